"""Every file and flag a user hands the product is refused in one line, quickly, writing nothing.

Cases (each failed on the code before issue 22's hardening):
- YAML bounds: a 470-byte alias bomb as a config and as a fleet file is refused in well under a
  second (it ran 40 s and took 666 MB); 100,000-deep nesting is refused (it crashed the parser);
  a key written twice in a config, fleet or demand file is refused with its line; a date like
  2026-02-30 in the price book is one line, not a traceback;
- config: a misspelt key gets a did-you-mean; `unit_price: 1e20` (it looped in cent
  apportioning for minutes), NaN and negative budgets are refused;
- quota files: an unknown top-level, capacity or ClusterQueue spec key (did-you-mean), a queue
  defined twice, negative/NaN/infinite/huge weights and quotas, `guaranteed` that is not a
  count; history with a repeated (ts, queue, flavor, resource) row, a queue the file does not
  define, NaN/infinite/negative demand, a misspelt column, unreadable timestamps;
- flags: `serve --port -1`, `--port 99999`, `--refresh-s 0` and NaN, `--header-timeout-s 0` and NaN; `optimize --workers 0`;
- bounded work: a 4,000-GPU what-if fleet with `--time-limit 0.3` ends in one line within a few
  seconds, with no warehouse created (reading the file alone took 71 s).
"""

from __future__ import annotations

import pytest
import yaml

from tests.hardening.conftest import DEMAND, FLEET

BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for name, prev in zip("abcdefghi", [None, *"abcdefgh"], strict=True)
)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def optimize_mig(tmp_path, fleet=FLEET, demand=DEMAND, *extra):
    return ["--warehouse", tmp_path / "w.duckdb", "optimize", "mig", "--fleet", fleet, "--demand", demand,
            *extra]


def test_alias_bomb_is_refused_before_it_expands(run_cli, tmp_path):
    """Not timed (a timed unit test only measures the machine's load): the bomb expands to
    billions of nodes, so a loader that expanded it would never answer within the test's
    timeout, and the refusal names the alias limit that stopped it."""
    assert len(BOMB.encode()) < 500
    bomb = write(tmp_path, "bomb.yaml", BOMB)
    for argv in (["--config", bomb, "--warehouse", tmp_path / "w.duckdb", "bill", "--period", "2026-11"],
                 optimize_mig(tmp_path, bomb)):
        line = run_cli(argv).assert_one_line_refusal(warehouse=tmp_path / "w.duckdb")
        assert "aliases expand it past" in line


def test_deep_nesting_is_refused(run_cli, tmp_path):
    deep = write(tmp_path, "deep.yaml", "nodes: " + "[" * 100_000 + "]" * 100_000 + "\n")
    line = run_cli(optimize_mig(tmp_path, deep)).assert_one_line_refusal(warehouse=tmp_path / "w.duckdb")
    assert "nested deeper than" in line


@pytest.mark.parametrize(("name", "text", "role"), [
    ("c.yaml", "idle:\n  threshold: 0.1\n  threshold: 0.5\n", "config"),
    ("f.yaml", "nodes:\n  - name: a\n    model: H100-80GB\n    gpus: 1\n    gpus: 2\n", "fleet"),
    ("d.yaml", "demand:\n  - model: H100-80GB\n    whole: 1\n    whole: 3\n", "demand"),
])
def test_duplicate_keys_are_refused(run_cli, tmp_path, name, text, role):
    path = write(tmp_path, name, text)
    argv = {"config": ["--config", path, *optimize_mig(tmp_path)],
            "fleet": optimize_mig(tmp_path, path), "demand": optimize_mig(tmp_path, FLEET, path)}[role]
    line = run_cli(argv).assert_one_line_refusal(warehouse=tmp_path / "w.duckdb")
    assert "duplicate key" in line and "line " in line


@pytest.mark.parametrize(("text", "expected"), [
    ("price_book:\n  - {model: H100-80GB, unit_price: 1e20}\n", "unit_price: Input should be less than"),
    ("price_book:\n  - {model: H100-80GB, unit_price: 3, effective_from: 2026-02-30}\n", "not valid YAML"),
    ("teams:\n  budgets: {a: .nan}\n", "finite number"),
    ("teams:\n  budgets: {a: -5}\n", "greater than or equal to 0"),
    ("sharing:\n  discount: {mig: 0.5}\n", "did you mean 'discounts'"),
    ("plans:\n  solver_time_limit: 5\n", "did you mean 'solver_time_limit_s'"),
])
def test_config_values_and_keys(run_cli, tmp_path, text, expected):
    config = write(tmp_path, "c.yaml", text)
    argv = ["--config", config, "--warehouse", tmp_path / "w.duckdb", "bill", "--period", "2026-11"]
    assert expected in run_cli(argv).assert_one_line_refusal(warehouse=tmp_path / "w.duckdb")


QUEUES = {
    "clusterQueues": [
        {"metadata": {"name": name}, "spec": {
            "cohortName": "gpu", "fairSharing": {"weight": 1},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}
        for name in ("team-a", "team-b")
    ],
}
HISTORY = "ts,cluster_queue,flavor,resource,demand\n" + "".join(
    f"2026-11-0{d}T0{h}:00:00Z,{q},h100,nvidia.com/gpu,{(d + h) % 9}\n"
    for d in range(1, 4) for h in range(0, 4) for q in ("team-a", "team-b")
)


def quota_argv(tmp_path, queues=QUEUES, history=HISTORY):
    q = write(tmp_path, "queues.yaml", queues if isinstance(queues, str) else yaml.safe_dump(queues))
    h = write(tmp_path, "history.csv", history)
    return ["--warehouse", tmp_path / "w.duckdb", "optimize", "quota", "--queues", q, "--history", h,
            "--time-limit", "20"]


def test_valid_quota_files_still_plan(run_cli, tmp_path):
    result = run_cli([*quota_argv(tmp_path), "--no-save"])
    assert result.code == 0, result


def mutated(path, value):
    data = yaml.safe_load(yaml.safe_dump(QUEUES))
    *parents, last = path
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return data


SPEC = ("clusterQueues", 0, "spec")
RESOURCE = (*SPEC, "resourceGroups", 0, "flavors", 0, "resources", 0)


@pytest.mark.parametrize(("queues", "expected"), [
    ({**QUEUES, "capacty": []}, "unknown key 'capacty' (did you mean 'capacity'?)"),
    ({**QUEUES, "capacity": [{"cohort": "gpu", "flavor": "h100", "resource": "nvidia.com/gpu",
                              "amount": 16, "amout": 3}]}, "unknown key 'amout'"),
    (mutated((*SPEC, "cohortNmae"), "x"), "did you mean 'cohortName'"),
    (mutated((*RESOURCE, "nominalQuotta"), 3), "did you mean 'nominalQuota'"),
    ({"clusterQueues": [QUEUES["clusterQueues"][0]] * 2}, "'team-a' is defined more than once"),
    (mutated((*SPEC, "fairSharing", "weight"), -1), "weight: -1 must be a number from 0"),
    (mutated((*SPEC, "fairSharing", "weight"), float("nan")), "must be a number from 0"),
    (mutated((*RESOURCE, "nominalQuota"), float("inf")), "nominalQuota: inf must be"),
    (mutated((*RESOURCE, "nominalQuota"), 1e20), "must be a number from 0 to 100,000"),
    (mutated((*RESOURCE, "borrowingLimit"), -2), "borrowingLimit: -2 must be"),
    ({**QUEUES, "guaranteed": {"team-a": "lots"}}, "whole number of GPUs"),
])
def test_bad_queue_files(run_cli, tmp_path, queues, expected):
    line = run_cli(quota_argv(tmp_path, queues)).assert_one_line_refusal(warehouse=tmp_path / "w.duckdb")
    assert expected in line


@pytest.mark.parametrize(("history", "expected"), [
    (HISTORY + HISTORY.splitlines()[1] + "\n", "appears more than once"),
    (HISTORY + "2026-11-03T05:00:00Z,team-z,h100,nvidia.com/gpu,1\n", "queue 'team-z', which the queues file"),
    (HISTORY + "2026-11-03T05:00:00Z,team-a,h100,nvidia.com/gpu,NaN\n", "no NaN or infinity"),
    (HISTORY + "2026-11-03T05:00:00Z,team-a,h100,nvidia.com/gpu,inf\n", "no NaN or infinity"),
    (HISTORY + "2026-11-03T05:00:00Z,team-a,h100,nvidia.com/gpu,-3\n", "no NaN or infinity"),
    (HISTORY + "2026-11-03T05:00:00Z,team-a,h100,nvidia.com/gpu,1e300\n", "from 0 to 100,000"),
    (HISTORY.replace("demand\n", "demand,comment\n", 1).replace("\n2026", ",x\n2026"), "unknown key 'comment'"),
    (HISTORY.replace("ts,", "tss,", 1), "missing columns ts"),
    (HISTORY + "yesterday,team-a,h100,nvidia.com/gpu,1\n", "wrong types"),
])
def test_bad_history_files(run_cli, tmp_path, history, expected):
    line = run_cli(quota_argv(tmp_path, history=history)).assert_one_line_refusal(
        warehouse=tmp_path / "w.duckdb")
    assert expected in line


@pytest.mark.parametrize(("argv", "expected"), [
    (["serve", "--port", "-1"], "--port -1"),
    (["serve", "--port", "99999"], "--port 99999"),
    (["serve", "--refresh-s", "0"], "--refresh-s 0"),
    (["serve", "--refresh-s", "nan"], "--refresh-s nan"),
    (["serve", "--header-timeout-s", "0"], "--header-timeout-s 0"),
    (["serve", "--header-timeout-s", "nan"], "--header-timeout-s nan"),
])
def test_bad_serve_flags(run_cli, tmp_path, argv, expected):
    line = run_cli(["--warehouse", tmp_path / "w.duckdb", *argv]).assert_one_line_refusal(
        warehouse=tmp_path / "w.duckdb")
    assert expected in line


def test_bad_worker_count(run_cli, tmp_path):
    line = run_cli([*optimize_mig(tmp_path), "--workers", "0"]).assert_one_line_refusal(
        warehouse=tmp_path / "w.duckdb")
    assert "workers 0" in line


def test_time_limit_bounds_reading_a_large_fleet(run_cli, tmp_path):
    layouts = [{"1g.10gb": 7}, {"3g.40gb": 1, "4g.40gb": 1}, {"2g.20gb": 3, "1g.10gb": 1}, "whole"]
    nodes = [{"name": f"n{n}", "model": "H100-80GB",
              "gpus": [{"index": i, "layout": layouts[(n + i) % 4],
                        "busy": [] if layouts[(n + i) % 4] == "whole" else
                        [{"pod": f"ns/p{n}-{i}", "profile": next(iter(layouts[(n + i) % 4]))}]}
                       for i in range(8)]}
             for n in range(500)]
    fleet = write(tmp_path, "fleet.yaml", yaml.safe_dump({"nodes": nodes}))
    demand = write(tmp_path, "demand.yaml", "demand:\n  - {model: H100-80GB, profiles: {1g.10gb: 900}}\n")
    # The refusal naming the limit is the observable fact; wall time would only measure load.
    line = run_cli([*optimize_mig(tmp_path, fleet, demand), "--time-limit", "0.3"]).assert_one_line_refusal(
        warehouse=tmp_path / "w.duckdb")
    assert "time limit of 0.3 s" in line
