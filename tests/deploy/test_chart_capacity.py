"""The chart keeps the org lake's capacity now current: `publish --capacity-only` on a CronJob
(issue 35, docs/decisions/0241), rendered with the real helm (`tools.helm_build`).

Cases:
- with the lake configured (the "full" variant: publish enabled, lake and cluster set) the
  CronJob is rendered; its arguments parse with the CLI as `publish --capacity-only` on the
  chart's warehouse, the config it mounts carries the lake (uri and cluster); it runs as the
  read-only collector account without an API token; a missed run is skipped (short starting
  deadline) and a run ends within its 15-minute slot;
- every run of the default schedule falls 10 minutes after a collect run (the minute fields of
  both schedules expanded here), none at a collect run's start;
- without the lake (default values) it is not rendered, nor in the kustomize files; with
  `publish.capacity.enabled=false` only the monthly publish is; the schema refuses a typo and an
  empty schedule.
"""

from __future__ import annotations

import yaml

from tests.deploy.chart import CHART, VARIANTS, one, render, render_args, run_helm

NAME = "gpuledger-publish-capacity"


def _minutes(field: str) -> set[int]:
    """The minutes a cron minute field names (`*/15`, `10-59/15`, `7`)."""
    spec, _, step = field.partition("/")
    lo, hi = (0, 59) if spec == "*" else (int(spec.split("-")[0]), int(spec.split("-")[-1]))
    return set(range(lo, hi + 1, int(step or 1)))


def test_capacity_cronjob_publishes_capacity_only_to_the_configured_lake():
    from gpuledger.cli import resolve

    docs = render("full")
    job = one(docs, "CronJob", NAME)
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    path, params = resolve(container["args"])
    assert path == ["publish"] and params["capacity_only"] is True and not params.get("finalize")
    assert str(params["warehouse"]) == "/data/gpuledger.duckdb"
    mounted = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(params["config"]).startswith(mounted["config"])
    config = next(v["configMap"]["name"] for v in pod["volumes"] if v["name"] == "config")
    settings = yaml.safe_load(one(docs, "ConfigMap", config)["data"]["gpuledger.yaml"])
    assert settings["lake"] == {"uri": "s3://org-lake/gpu", "cluster": "prod-eu"}
    assert pod["serviceAccountName"] == "gl-reader" and pod["automountServiceAccountToken"] is False
    spec = job["spec"]
    assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] < 15 * 60
    assert spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] <= 15 * 60
    collect = one(docs, "CronJob", "gpuledger-collect")["spec"]["schedule"].split()
    capacity = spec["schedule"].split()
    assert collect[1:] == capacity[1:] == ["*", "*", "*", "*"]
    runs, collects = _minutes(capacity[0]), _minutes(collect[0])
    assert len(runs) == len(collects) == 4 and not runs & collects
    assert {(m - 10) % 60 for m in runs} == collects  # each run 10 minutes after a collect run


def test_no_capacity_cronjob_without_the_lake_or_when_turned_off():
    assert not [d for d in render() if d["metadata"]["name"] == NAME]  # no lake by default
    assert not [p.name for p in (CHART.parents[1]).glob("*.yaml") if NAME in p.read_text()]  # kustomize
    off = render_args([*VARIANTS["full"], "--set", "publish.capacity.enabled=false"])
    names = {d["metadata"]["name"] for d in off if d["kind"] == "CronJob"}
    assert "gpuledger-publish" in names and NAME not in names
    for args, message in ((("--set", "publish.capacity.shedule=x"), "'shedule' not allowed"),
                          (("--set", "publish.capacity.schedule="), "/publish/capacity/schedule")):
        done = run_helm("lint", "--strict", str(CHART), *args)
        assert done.returncode != 0 and message in done.stdout + done.stderr, (args, done.stdout + done.stderr)
