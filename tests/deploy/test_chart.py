"""deploy/helm/gpuledger: lint, render (default and two variants), what the objects say.

The server-side dry-run apply against the real kube-apiserver is in test_chart_k8s.py; the
least-privilege RBAC, exercised with real ServiceAccount tokens, in test_chart_rbac.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpuledger.core.config import load_settings
from tests.deploy.chart import CHART, RULES, VARIANTS, by_kind, one, render, run_helm

ROOT = Path(__file__).resolve().parents[2]


def test_helm_lint_passes_for_every_variant():
    for args in VARIANTS.values():
        done = run_helm("lint", "--strict", str(CHART), *args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rendered_settings_load(variant, tmp_path, monkeypatch):
    """The ConfigMap's gpuledger.yaml is a valid Settings file (unknown keys are refused)."""
    monkeypatch.setenv("GPULEDGER_PROMETHEUS_AUTH", "Bearer test-token-123456")
    monkeypatch.setenv("GPULEDGER_REPORT_KEY", "k" * 32)
    monkeypatch.setenv("GPULEDGER_BUDGET_WEBHOOK", "https://hooks.example.com/services/T0/x")
    config = one(render(variant), "ConfigMap", "gpuledger-config")
    path = tmp_path / "gpuledger.yaml"
    path.write_text(config["data"]["gpuledger.yaml"])
    settings = load_settings(path)
    assert settings.prometheus.url == "http://prometheus-operated.monitoring.svc:9090"
    assert settings.kubernetes.kubeconfig == "/etc/gpuledger/kube/config"
    if variant == "full":
        assert settings.prometheus.auth_header is not None
        assert settings.reports.signing_key is not None and settings.finance.budget_webhook is not None
        assert settings.plans.expire_after_hours == 48 and settings.plans.nodes_in_parallel == 2
        assert [(p.model, p.unit_price) for p in settings.price_book] == [("H100-80GB", 3.1)]
        assert (settings.lake.uri, settings.lake.cluster) == ("s3://org-lake/gpu", "prod-eu")
    elif variant == "no-proxy":
        assert settings.access.proxy_addresses == ("10.0.0.7",)
        assert settings.prometheus.auth_header is not None
        assert settings.prometheus.auth_header.get_secret_value() == "Bearer test-token-123456"
        assert "test-token" not in config["data"]["gpuledger.yaml"]
        assert settings.kubernetes.mig_configmap_name == "mig-cfg"
    else:
        assert settings.access.proxy_addresses == ("127.0.0.1",)
        assert settings.prometheus.auth_header is None
    if variant == "minimal":
        assert settings.teams.budgets == {"nlp": 20000.0, "vision": 5000.0}
        assert [(p.model, p.unit_price) for p in settings.price_book] == [("H100-80GB", 3.2)]
        assert settings.access.roles[0].team == "nlp"


def _dashboard(docs):
    return one(docs, "Deployment", "gpuledger-dashboard")["spec"]["template"]["spec"]


def test_probes_hit_the_ops_port_and_the_app_hides_behind_the_proxy():
    spec = _dashboard(render())
    app = next(c for c in spec["containers"] if c["name"] == "dashboard")
    assert app["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert app["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert {"name": "metrics", "containerPort": 9464} in app["ports"]
    assert "--host=127.0.0.1" in app["args"] and "--metrics-port=9464" in app["args"]
    assert "--log-format=json" in app["args"]
    assert [c["name"] for c in spec["containers"]] == ["dashboard", "auth-proxy"]
    assert spec["terminationGracePeriodSeconds"] > 30  # gunicorn's graceful timeout fits
    open_spec = _dashboard(render("no-proxy"))
    assert [c["name"] for c in open_spec["containers"]] == ["dashboard"]
    assert "--host=0.0.0.0" in open_spec["containers"][0]["args"]


def test_every_pod_is_non_root_read_only_and_uses_the_chart_image():
    docs = render()
    pods = [_dashboard(docs)] + [c["spec"]["jobTemplate"]["spec"]["template"]["spec"]
                                 for c in by_kind(docs, "CronJob")]
    assert len(pods) == 4  # dashboard, collect, report, compact
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    image = f"{values['image']['repository']}:{chart['appVersion']}"
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        for c in pod["containers"]:
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            if c["name"] != "auth-proxy":
                assert c["image"] == image
    # The default image is the one deploy/Dockerfile documents building.
    assert image in (ROOT / "deploy" / "Dockerfile").read_text()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None and chart["appVersion"] == version.group(1)


def test_persistence_variants():
    default = render()
    claim = one(default, "PersistentVolumeClaim", "gpuledger-data")
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    volumes = {v["name"]: v for v in _dashboard(default)["volumes"]}
    assert volumes["data"] == {"name": "data", "persistentVolumeClaim": {"claimName": "gpuledger-data"}}
    existing = render("no-proxy")
    assert by_kind(existing, "PersistentVolumeClaim") == []
    assert {v["name"]: v for v in _dashboard(existing)["volumes"]}["data"]["persistentVolumeClaim"] == {
        "claimName": "wh"}
    minimal = render("minimal")
    assert {v["name"]: v for v in _dashboard(minimal)["volumes"]}["data"] == {"name": "data", "emptyDir": {}}


def test_operator_objects_follow_their_switches():
    default = render()
    monitor = one(default, "ServiceMonitor", "gpuledger")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    service = one(default, "Service", "gpuledger-dashboard")
    assert {"name": "metrics", "port": 9464, "targetPort": "metrics"} in service["spec"]["ports"]
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    rule = one(default, "PrometheusRule", "gpuledger")
    assert rule["spec"] == yaml.safe_load(RULES.read_text())  # one copy of the rules
    minimal = render("minimal")
    assert not by_kind(minimal, "ServiceMonitor") and not by_kind(minimal, "PrometheusRule")
    assert one(minimal, "Namespace", "gpuledger")["metadata"]["labels"][
        "pod-security.kubernetes.io/enforce"] == "restricted"


def test_plain_rules_file_is_the_charts_copy():
    plain = ROOT / "deploy" / "prometheus" / "gpuledger-rules.yaml"
    assert plain.read_text() == RULES.read_text()


def test_schedules_and_names_come_from_values():
    docs = render()
    assert one(docs, "CronJob", "gpuledger-collect")["spec"]["schedule"] == "*/15 * * * *"
    assert one(docs, "CronJob", "gpuledger-report")["spec"]["schedule"] == "0 6 1 * *"
    assert one(docs, "CronJob", "gpuledger-compact")["spec"]["schedule"] == "7 3 * * *"
    other = render(release="ledger", namespace="finops")
    assert {d["metadata"]["name"] for d in by_kind(other, "ServiceAccount")} == {
        "ledger-gpuledger", "ledger-gpuledger-collector"}
    assert all(d["metadata"].get("namespace") in (None, "finops", "gpu-operator") for d in other)


LEAST_PRIVILEGE = {
    ("ClusterRole", "gpuledger-read"): [
        {"apiGroups": [""], "resources": ["nodes", "namespaces", "pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["kueue.x-k8s.io"],
         "resources": ["clusterqueues", "localqueues", "resourceflavors", "cohorts", "workloads"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"],
         "resources": ["resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses"],
         "verbs": ["get", "list", "watch"]},
    ],
    ("ClusterRole", "gpuledger-actuator"): [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["patch", "update"]},
    ],
    ("Role", "gpuledger-mig-config"): [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["default-mig-parted-config"],
         "verbs": ["get", "patch", "update"]},
    ],
}
"""deploy/rbac.yaml before the chart (docs/decisions/0010-actuator-rbac.md), written out."""


def test_rendered_rbac_is_the_least_privilege_set():
    docs = render()
    roles = {(d["kind"], d["metadata"]["name"]): d["rules"] for d in docs if d["kind"] in ("ClusterRole", "Role")}
    assert roles == LEAST_PRIVILEGE
    bindings = {(d["kind"], d["metadata"]["name"]): (d["roleRef"]["name"], sorted(s["name"] for s in d["subjects"]))
                for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert bindings == {
        ("ClusterRoleBinding", "gpuledger-read"): ("gpuledger-read", ["gpuledger", "gpuledger-collector"]),
        ("ClusterRoleBinding", "gpuledger-actuator"): ("gpuledger-actuator", ["gpuledger"]),
        ("RoleBinding", "gpuledger-mig-config"): ("gpuledger-mig-config", ["gpuledger"]),
    }
    assert one(docs, "Role", "gpuledger-mig-config")["metadata"]["namespace"] == "gpu-operator"
    other = render("no-proxy")
    role = one(other, "Role", "gpuledger-mig-config")
    assert role["metadata"]["namespace"] == "nvidia" and role["rules"][0]["resourceNames"] == ["mig-cfg"]
    pods = [d for d in docs if d["kind"] == "CronJob"]
    collect = next(p for p in pods if p["metadata"]["name"] == "gpuledger-collect")
    assert collect["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == "gpuledger-collector"


def test_dashboard_and_collect_arguments_parse_with_the_cli():
    from gpuledger.cli import resolve

    docs = render()
    app = next(c for c in _dashboard(docs)["containers"] if c["name"] == "dashboard")
    path, params = resolve(app["args"])
    assert path == ["serve"]
    assert (params["host"], params["port"], params["metrics_port"]) == ("127.0.0.1", 8050, 9464)
    assert params["log_format"] == "json" and params["refresh_s"] == 120.0
    assert str(params["config"]) == "/etc/gpuledger/config/gpuledger.yaml"
    assert str(params["warehouse"]) == "/data/gpuledger.duckdb"


def test_collect_cronjob_refreshes_the_serving_results_after_collect():
    """The collect job's shell line: `collect`, then (only if it succeeded) `refresh-serving`
    on the same warehouse and config (docs/decisions/0140); both parse with the real CLI."""
    import shlex

    from gpuledger.cli import resolve

    job = one(render(), "CronJob", "gpuledger-collect")
    (container,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/bin/sh", "-c"]
    words = shlex.split(container["args"][0])
    cut = words.index("&&")
    first, second = words[:cut], [w for w in words[cut + 1:] if w != "exec"]
    assert first[0] == second[0] == "gpuledger"
    steps = [resolve(first[1:]), resolve(second[1:])]
    assert [path for path, _ in steps] == [["collect"], ["refresh-serving"]]
    for _, params in steps:
        assert str(params["warehouse"]) == "/data/gpuledger.duckdb"
        assert str(params["config"]) == "/etc/gpuledger/config/gpuledger.yaml"


def test_compact_cronjob_runs_retention_and_follows_its_toggle():
    """`gpuledger compact` nightly, on the warehouse volume, with no API token; the values'
    `compact.enabled=false` removes it (and only it); its arguments parse with the real CLI."""
    from gpuledger.cli import resolve

    docs = render()
    job = one(docs, "CronJob", "gpuledger-compact")
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    path, params = resolve(container["args"])
    assert path == ["compact"] and params["raw_days"] is None  # retention.raw_days from the settings
    assert str(params["warehouse"]) == "/data/gpuledger.duckdb"
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
    off = run_helm("template", "gpuledger", str(CHART), "--set", "compact.enabled=false")
    assert off.returncode == 0, off.stderr
    names = {d["metadata"]["name"] for d in yaml.safe_load_all(off.stdout) if d and d["kind"] == "CronJob"}
    assert names == {"gpuledger-collect", "gpuledger-report"}
