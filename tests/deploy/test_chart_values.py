"""The chart's values like the ones people install (issue 33.3, 31.4): each new value rendered,
the schema refusing typos and wrong types, secrets never in a ConfigMap, old keys still read,
the lake publish CronJob and the `helm test` pod (its script run against a real server).

The "full" variant (tests/deploy/chart.py) sets every new value at once; it also goes through
`helm lint --strict` (test_chart.py) and the server-side dry run (test_chart_k8s.py).
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys

import yaml

from tests.deploy.chart import CHART, VARIANTS, by_kind, one, render, render_args, run_helm

PROM, SIGNING = "Bearer full-prom-t0ken", "full-signing-k3y"


def _pods(docs: list[dict]) -> dict[str, dict]:
    """Pod specs by owner name: the dashboard Deployment and every CronJob."""
    out = {d["metadata"]["name"]: d["spec"]["template"] for d in by_kind(docs, "Deployment")}
    out |= {d["metadata"]["name"]: d["spec"]["jobTemplate"]["spec"]["template"] for d in by_kind(docs, "CronJob")}
    return out


def _gpuledger_containers(pod: dict) -> list[dict]:
    return [c for c in pod["spec"]["containers"] if c["name"] != "auth-proxy"]


def test_every_new_value_reaches_every_pod():
    docs = render("full")
    pods = _pods(docs)
    assert set(pods) == {"gpuledger-dashboard", "gpuledger-collect", "gpuledger-report", "gpuledger-compact",
                         "gpuledger-publish", "gpuledger-publish-capacity"}
    for name, pod in pods.items():
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["labels"]["cost-center"] == "platform", name
        assert meta["annotations"]["example.com/scrape"] == "no", name
        assert spec["nodeSelector"] == {"node-role.example.com/infra": "true"}, name
        assert spec["tolerations"] == [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}], name
        assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == "kubernetes.io/arch", name
        if name != "gpuledger-dashboard":  # the ReadWriteOnce volume: beside the dashboard, always
            term = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
            assert term["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": "gpuledger-dashboard"}
        assert {"name": "ca", "configMap": {"name": "corp-ca"}} in spec["volumes"], name
        for container in _gpuledger_containers(pod):
            assert {"name": "AWS_REGION", "value": "eu-west-1"} in container["env"], name
            assert {"name": "ca", "mountPath": "/etc/ssl/corp", "readOnly": True} in container["volumeMounts"]
    accounts = {d["metadata"]["name"]: d for d in by_kind(docs, "ServiceAccount")}
    assert set(accounts) == {"gl-app", "gl-reader"}
    for account in accounts.values():
        assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/gl"}
    assert pods["gpuledger-dashboard"]["spec"]["serviceAccountName"] == "gl-app"
    assert pods["gpuledger-collect"]["spec"]["serviceAccountName"] == "gl-reader"
    assert pods["gpuledger-publish"]["spec"]["serviceAccountName"] == "gl-reader"
    assert pods["gpuledger-publish-capacity"]["spec"]["serviceAccountName"] == "gl-reader"
    bound = {(d["metadata"]["name"], s["name"]) for d in docs if d["kind"].endswith("Binding") for s in d["subjects"]}
    assert bound == {("gpuledger-read", "gl-app"), ("gpuledger-read", "gl-reader"),
                     ("gpuledger-actuator", "gl-app"), ("gpuledger-mig-config", "gl-app")}


def test_ingress_and_servicemonitor_relabelings():
    docs = render("full")
    ingress = one(docs, "Ingress", "gpuledger")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == {"a.example/x": "1"}
    assert ingress["spec"]["tls"] == [{"secretName": "gl-tls", "hosts": ["gl.example.com"]}]
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == "gl.example.com"
    backend = rule["http"]["paths"][0]["backend"]["service"]
    service = one(docs, "Service", backend["name"])
    assert backend["port"] == {"name": "http"} and any(p["name"] == "http" for p in service["spec"]["ports"])
    endpoint = one(docs, "ServiceMonitor", "gpuledger")["spec"]["endpoints"][0]
    assert endpoint["relabelings"] == [
        {"action": "replace", "targetLabel": "job", "replacement": "gpuledger"},  # the self-monitoring rules' job
        {"action": "replace", "targetLabel": "cluster", "replacement": "prod-eu"}]
    assert endpoint["metricRelabelings"][0]["action"] == "drop"
    assert not by_kind(render(), "Ingress")  # off by default
    default_endpoint = one(render(), "ServiceMonitor", "gpuledger")["spec"]["endpoints"][0]
    assert default_endpoint["relabelings"] == [{"action": "replace", "targetLabel": "job", "replacement": "gpuledger"}]


def test_secret_settings_never_reach_a_configmap():
    """Two secrets given as plain values (chart-made Secret), one from an existing Secret: no
    ConfigMap holds a value; the chart's Secret does; each container reads each from a Secret."""
    docs = render("full")
    for config in by_kind(docs, "ConfigMap"):
        text = yaml.safe_dump(config)
        assert PROM not in text and SIGNING not in text and "full-prom" not in text, config["metadata"]["name"]
    settings = yaml.safe_load(one(docs, "ConfigMap", "gpuledger-config")["data"]["gpuledger.yaml"])
    assert settings["prometheus"]["auth_header"] == "${GPULEDGER_PROMETHEUS_AUTH}"
    assert settings["reports"]["signing_key"] == "${GPULEDGER_REPORT_KEY}"
    assert settings["finance"]["budget_webhook"] == "${GPULEDGER_BUDGET_WEBHOOK}"
    secret = one(docs, "Secret", "gpuledger-secrets")
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "prometheus-auth": PROM, "report-signing-key": SIGNING}
    wanted = {"GPULEDGER_PROMETHEUS_AUTH": ("gpuledger-secrets", "prometheus-auth"),
              "GPULEDGER_REPORT_KEY": ("gpuledger-secrets", "report-signing-key"),
              "GPULEDGER_BUDGET_WEBHOOK": ("gl-hooks", "url")}
    for name, pod in _pods(docs).items():
        for container in _gpuledger_containers(pod):
            refs = {e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
                    for e in container["env"] if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]}
            assert refs == wanted, name
    # Without any secret value: no Secret object, no ${...} in the settings.
    plain = render()
    assert not by_kind(plain, "Secret")
    assert "${" not in one(plain, "ConfigMap", "gpuledger-config")["data"]["gpuledger.yaml"]


def test_a_secret_in_extra_settings_is_refused_in_one_line():
    done = run_helm("template", "gpuledger", str(CHART),
                    "--set-json", 'extraSettings={"reports":{"signing_key":"plain-k3y"}}')
    assert done.returncode != 0
    assert "extraSettings.reports.signing_key: a secret belongs in a Secret" in done.stderr
    assert "plain-k3y" not in done.stderr + done.stdout
    # A reference to an environment variable (filled from extraEnv) is not a secret in the file.
    ok = run_helm("template", "gpuledger", str(CHART),
                  "--set-json", 'extraSettings={"reports":{"signing_key":"${MY_KEY}"}}')
    assert ok.returncode == 0, ok.stderr


def test_schema_refuses_unknown_keys_and_wrong_types():
    """`helm lint --strict` (and template/install) against values.schema.json."""
    cases = {
        ("--set", "dashbaord.port=1"): "additional properties 'dashbaord' not allowed",
        ("--set", "dashboard.port=abc"): "/dashboard/port",
        ("--set", "serviceMonitor.relabeling[0].action=drop"): "'relabeling' not allowed",
        ("--set", "currency=dollars"): "/currency",
        ("--set-json", 'plans={"expireAfterHours":"soon"}'): "/plans/expireAfterHours",
        ("--set", "ingress.enabled=yes"): "/ingress/enabled",
    }
    for args, message in cases.items():
        done = run_helm("lint", "--strict", str(CHART), *args)
        assert done.returncode != 0, args
        assert message in done.stdout + done.stderr, (args, done.stdout + done.stderr)
        assert "0 chart(s) failed" not in done.stdout
    assert run_helm("lint", "--strict", str(CHART), *VARIANTS["full"]).returncode == 0


def test_old_snake_case_keys_are_read_with_a_deprecation_note():
    args = ["--set", "plans.expire_after_hours=12", "--set", "plans.nodes_in_parallel=3",
            "--set-json", 'priceBook=[{"model":"A100-80GB","unit_price":0,"effective_from":"2026-02-01"}]']
    settings = yaml.safe_load(one(render_args(args), "ConfigMap", "gpuledger-config")["data"]["gpuledger.yaml"])
    assert settings["plans"] == {"expire_after_hours": 12, "nodes_in_parallel": 3, "state_timeout_s": 900}
    assert settings["price_book"] == [{"model": "A100-80GB", "unit_price": 0, "effective_from": "2026-02-01"}]
    notes = run_helm("install", "gpuledger", str(CHART), "--dry-run=client", *args)
    assert notes.returncode == 0, notes.stderr
    tail = notes.stdout.split("DEPRECATED value keys", 1)[1]
    assert "plans.expire_after_hours (now plans.expireAfterHours)" in tail
    assert "plans.nodes_in_parallel (now plans.nodesInParallel)" in tail
    assert "plans.state_timeout_s" not in tail
    assert "unit_price / effective_from" in tail
    clean = run_helm("install", "gpuledger", str(CHART), "--dry-run=client")
    assert "DEPRECATED" not in clean.stdout


def test_name_overrides():
    named = render_args(["--set", "nameOverride=ledger"], release="acme")
    assert {d["metadata"]["name"] for d in by_kind(named, "Deployment")} == {"acme-ledger-dashboard"}
    full = render_args(["--set", "fullnameOverride=gl"], release="acme")
    assert {d["metadata"]["name"] for d in by_kind(full, "ServiceAccount")} == {"gl", "gl-collector"}
    assert one(full, "ConfigMap", "gl-config")
    premade = render_args(["--set", "serviceAccount.create=false", "--set", "serviceAccount.name=team-sa"])
    assert not by_kind(premade, "ServiceAccount")
    assert one(premade, "ClusterRoleBinding", "gpuledger-actuator")["subjects"][0]["name"] == "team-sa"


def test_publish_cronjob_parses_with_the_cli_and_needs_its_lake():
    from gpuledger.cli import resolve

    job = one(render("full"), "CronJob", "gpuledger-publish")
    assert job["spec"]["schedule"] == "0 8 1 * *" and job["spec"]["concurrencyPolicy"] == "Forbid"
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    path, params = resolve(container["args"])
    assert path == ["publish"] and params["period"] == "last" and params["finalize"] is True
    assert str(params["warehouse"]) == "/data/gpuledger.duckdb"
    assert not [d for d in render() if d["metadata"]["name"] == "gpuledger-publish"]  # off by default
    missing = run_helm("template", "gpuledger", str(CHART), "--set", "publish.enabled=true")
    assert missing.returncode != 0 and "publish.enabled needs publish.lake" in missing.stderr


def test_helm_test_pod_passes_against_a_real_server(served):
    """The `helm test` hook's script, run here with the Service's address replaced by the
    served production server's ops port: it exits 0 (and 1 against a port where nothing listens)."""
    (pod,) = [d for d in render() if d["kind"] == "Pod"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["python3", "-c"]
    script = container["args"][0]
    service = "http://gpuledger-dashboard.gpuledger.svc:9464"
    assert service in script
    done = subprocess.run([sys.executable, "-c", script.replace(service, served.ops_url)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.findall(r"^(/\w+) 200$", done.stdout, re.M) == ["/healthz", "/readyz", "/metrics"]
    dead = subprocess.run([sys.executable, "-c", script.replace(service, "http://127.0.0.1:9")],
                          capture_output=True, text=True, timeout=120)
    assert dead.returncode != 0


def test_every_schema_key_is_documented_in_values_yaml():
    """values.yaml is the documentation (`helm show values`): every key the schema allows is in
    it, but the deprecated ones and Helm's `global`; and every key in it is in the schema
    (else `helm lint --strict` of the defaults would fail, test_chart.py)."""
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def missing(node: dict, present: dict, path: str) -> list[str]:
        out = []
        for key, sub in node.get("properties", {}).items():
            if sub.get("deprecated") or key == "global":
                continue
            if key not in present:
                out.append(f"{path}{key}")
            elif isinstance(present[key], dict) and sub.get("additionalProperties") is False:
                out += missing(sub, present[key], f"{path}{key}.")
        return out

    assert missing(schema, values, "") == []
    deprecated = {k for k, v in schema["properties"]["plans"]["properties"].items() if v.get("deprecated")}
    assert deprecated == {"expire_after_hours", "state_timeout_s", "nodes_in_parallel"}
