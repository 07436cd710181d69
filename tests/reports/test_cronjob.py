"""deploy/cronjob-report.yaml: the monthly report CronJob.

Cases:
- runs at 06:00 on the 1st of each month in UTC (`timeZone` set), `concurrencyPolicy: Forbid`,
  a `startingDeadlineSeconds`, retries (`backoffLimit`)
- its arguments are a valid `gpuledger report due` command line (parsed by our own CLI parser),
  writing under a path that a mounted PersistentVolumeClaim provides
- the read-only root filesystem still leaves the PDF renderer a writable HOME (an emptyDir)
- the real kube-apiserver accepts it (server-side dry-run create) and keeps the time zone
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuledger.cli import resolve

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "cronjob-report.yaml"


def _cronjob() -> dict:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    assert len(docs) == 1 and docs[0]["kind"] == "CronJob"
    return docs[0]


def test_schedule_and_policies():
    spec = _cronjob()["spec"]
    minute, hour, day, month, weekday = spec["schedule"].split()
    assert (minute, hour, day, month, weekday) == ("0", "6", "1", "*", "*")
    assert spec["timeZone"] == "Etc/UTC"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] > 0
    assert spec["jobTemplate"]["spec"]["backoffLimit"] >= 1


def test_command_line_and_volume():
    pod = _cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    path, params = resolve(container["args"])
    assert path == ["report", "due"]
    assert params["out"] == "/data/reports" and params["backfill"] == 3
    assert str(params["warehouse"]).startswith("/data/")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    data = next(name for name, path in mounts.items() if params["out"].startswith(path + "/"))
    assert "persistentVolumeClaim" in volumes[data]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    home = next(e["value"] for e in container["env"] if e["name"] == "HOME")
    tmp = next(name for name, path in mounts.items() if home.startswith(path))
    assert "emptyDir" in volumes[tmp]
    assert pod["automountServiceAccountToken"] is False


def test_api_server_accepts_it(k8s_cluster, k8s_namespace):
    from kubernetes import client

    body = _cronjob()
    body["metadata"] = {**body["metadata"], "namespace": k8s_namespace}
    with k8s_cluster.api_client() as api:
        created = client.BatchV1Api(api).create_namespaced_cron_job(
            k8s_namespace, body, dry_run="All"  # type: ignore[arg-type]  # a dict body is accepted
        )
    assert created.spec.time_zone == "Etc/UTC"
    assert created.spec.schedule == "0 6 1 * *"
    assert created.spec.concurrency_policy == "Forbid"
