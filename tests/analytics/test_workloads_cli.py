"""Workloads, not replicas: `bill --by owner`, `idle` and `recommend` per workload, and filters.

The fleet (4 h, H100s at 3.00/h): team `serve` runs a vLLM Deployment `llm` (ReplicaSet
`llm-7d9f8c6b5d`) with two replicas on one GPU each, both idle; team `research` runs a Job
`train-abc` whose pod holds two GPUs (one busy, one idle) and a notebook (StatefulSet
`nb-ann`, label `notebook-name`) idle on a fifth card.

Cases:
- `owner_of`: the ReplicaSet's pod-template hash is dropped (Deployment `llm`), the notebook
  label wins over the StatefulSet, a pod without owner is its own workload;
- `idle --team serve` returns only serve's rows, one row for the Deployment with pods 2 and
  gpus 2 and the idle cost of both replicas (2 x 4 h x 3.00 = 24.00); the multi-GPU Job pod is
  one row with gpus 2; `--by allocation` gives the old one-row-per-pod-and-GPU output;
- `recommend` has no two rows for one workload and kind; the Deployment's saving is the sum of
  its replicas' (idle cost x 730/4 each, hand-computed) and it is `scale_down_when_idle`,
  classified serving, never an idle notebook; the notebook is `reclaim_idle_notebook`;
  `--team research` returns only research; the per-team savings add up to the total;
- `bill --by owner` has one line per workload that sums to the fleet cost to the cent, and the
  Deployment's line is its two pods' lines; `--team` keeps only that team; the CSV carries
  `period` and `currency`; `--by label:app` groups by the label;
- `budgets -o json` lists each team's status.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.workloads.requested import owner_of
from gpuledger.cli import main
from tests.analytics.builders import Seg, at, gpus, load, namespaces, pods, samples, window

SPAN = ["--start", "2026-11-01T00:00:00Z", "--end", "2026-11-01T04:00:00Z"]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    frames = {
        "gpus": gpus(*({"uuid": f"GPU-{i}", "gpu_index": i} for i in range(5))),
        "gpu_samples": samples([
            Seg("GPU-0", at(0), at(4), "serving", "llm-7d9f8c6b5d-aaaaa", act=0.01, fb=60000),
            Seg("GPU-1", at(0), at(4), "serving", "llm-7d9f8c6b5d-bbbbb", act=0.01, fb=60000),
            Seg("GPU-2", at(0), at(4), "lab", "train-abc-xyz12", act=0.9, fb=70000),
            Seg("GPU-3", at(0), at(4), "lab", "train-abc-xyz12", act=0.01, fb=70000),
            Seg("GPU-4", at(0), at(4), "lab", "nb-ann-0", act=0.01, fb=8000),
        ]),
        "namespaces": namespaces({"serving": "serve", "lab": "research"}),
        "pods": pods(
            {"namespace": "serving", "pod": "llm-7d9f8c6b5d-aaaaa", "owner_kind": "ReplicaSet",
             "owner_name": "llm-7d9f8c6b5d", "labels": json.dumps({"app": "llm"})},
            {"namespace": "serving", "pod": "llm-7d9f8c6b5d-bbbbb", "owner_kind": "ReplicaSet",
             "owner_name": "llm-7d9f8c6b5d", "labels": json.dumps({"app": "llm"})},
            {"namespace": "lab", "pod": "train-abc-xyz12", "owner_kind": "Job", "owner_name": "train-abc",
             "gpu_requests": json.dumps({"nvidia.com/gpu": 2}), "labels": json.dumps({"app": "train"})},
            {"namespace": "lab", "pod": "nb-ann-0", "owner_kind": "StatefulSet", "owner_name": "nb-ann",
             "labels": json.dumps({"notebook-name": "nb-ann"})},
        ),
    }
    return load(tmp_path_factory.mktemp("workloads") / "w.duckdb", window(4), frames)


def run(capsys: pytest.CaptureFixture[str], warehouse: Path, *args: str) -> str:
    code = main(["--warehouse", str(warehouse), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_owner_of() -> None:
    assert owner_of("ReplicaSet", "llm-7d9f8c6b5d", {}, "llm-7d9f8c6b5d-aaaaa") == ("Deployment", "llm")
    assert owner_of("StatefulSet", "nb-ann", {"notebook-name": "nb-ann"}, "nb-ann-0") == ("notebook", "nb-ann")
    assert owner_of("StatefulSet", "db", {}, "db-0") == ("StatefulSet", "db")
    assert owner_of(None, None, {}, "lonely") == ("Pod", "lonely")


@pytest.mark.parametrize("labels", [
    {"notebook-name": "nb"}, {"jupyter.org/notebook": "nb"}, {"notebooks.kubeflow.org/name": "nb"},
    {"app": "notebook"}, {"app.kubernetes.io/component": "notebook"},
    {"app": "llm", "tier": "gpu"}, {},
])
def test_owner_of_reads_labels_only_where_they_name_a_notebook(labels: dict[str, str]) -> None:
    """`workload_usage` parses a pod's labels only when their text has "notebook" in it
    (`_notebook_labels`): every notebook form `owner_of` knows is found that way, and the
    owner of labels without the word is the same as with none."""
    from gpuledger.analytics.workloads.requested import _notebook_labels

    parsed = _notebook_labels(json.dumps(labels))
    assert owner_of("StatefulSet", "nb", parsed, "nb-0") == owner_of("StatefulSet", "nb", labels, "nb-0")
    assert (owner_of("StatefulSet", "nb", parsed, "nb-0")[0] == "notebook") == ("notebook" in json.dumps(labels))


def test_idle_per_workload_and_team(capsys: pytest.CaptureFixture[str], warehouse: Path) -> None:
    doc = json.loads(run(capsys, warehouse, "idle", *SPAN, "--team", "serve", "-o", "json"))
    rows = doc["workloads"]
    assert [(r["team"], r["workload_kind"], r["workload"], r["pods"], r["gpus"]) for r in rows] == [
        ("serve", "Deployment", "llm", 2, 2)]
    assert rows[0]["idle_cost"] == pytest.approx(2 * 4 * 3.00, abs=0.06)
    research = json.loads(run(capsys, warehouse, "idle", *SPAN, "--team", "research", "-o", "json"))["workloads"]
    job = next(r for r in research if r["workload_kind"] == "Job")
    assert job["workload"] == "train-abc" and job["gpus"] == 2 and job["pods"] == 1
    old = json.loads(run(capsys, warehouse, "idle", *SPAN, "--by", "allocation", "-o", "json"))["allocations"]
    assert len(old) == 4  # both replicas, the Job's idle GPU and the notebook, one row each


def test_idle_unknown_grouping_lists_what_idle_accepts(capsys: pytest.CaptureFixture[str], warehouse: Path) -> None:
    """One line that names every grouping `idle` takes, its own ones included."""
    assert main(["--warehouse", str(warehouse), "idle", *SPAN, "--by", "bogus"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'bogus'" in err[0]
    for grouping in ("'owner'", "'pod'", "'allocation'", "'priority_class'", "label:<key>"):
        assert grouping in err[0]


def test_recommend_one_per_workload_and_kind(capsys: pytest.CaptureFixture[str], warehouse: Path) -> None:
    doc = json.loads(run(capsys, warehouse, "recommend", *SPAN, "-o", "json"))
    recs = doc["recommendations"]
    keys = [(r["team"], r["namespace"], r["workload_kind"], r["workload"], r["kind"]) for r in recs]
    assert len(keys) == len(set(keys))
    llm = next(r for r in recs if r["workload"] == "llm")
    assert llm["kind"] == "scale_down_when_idle" and llm["gpus"] == 2 and llm["pods"] == 2
    assert not str(llm["workload_profile"]).startswith("idle notebook")
    assert llm["monthly_saving"] == pytest.approx(2 * 12.0 * 730 / 4, rel=0.01)  # 2 x (4 h idle x 3.00)
    notebook = next(r for r in recs if r["workload_kind"] == "notebook")
    assert notebook["kind"] == "reclaim_idle_notebook"
    assert sum(doc["saving_by_team"].values()) == pytest.approx(doc["monthly_saving"], abs=0.02)
    only = json.loads(run(capsys, warehouse, "recommend", *SPAN, "--team", "research", "-o", "json"))
    assert {r["team"] for r in only["recommendations"]} == {"research"}


def test_bill_by_owner(capsys: pytest.CaptureFixture[str], warehouse: Path) -> None:
    doc = json.loads(run(capsys, warehouse, "bill", *SPAN, "--by", "owner", "-o", "json"))
    lines = doc["lines"]
    assert round(sum(line["cost"] for line in lines), 2) == doc["fleet_cost"]
    pods_doc = json.loads(run(capsys, warehouse, "bill", *SPAN, "--by", "pod", "-o", "json"))
    replicas = [line["cost"] for line in pods_doc["lines"] if str(line.get("pod", "")).startswith("llm-")]
    llm = [line for line in lines if line.get("workload") == "llm"]
    assert len(llm) == 1 and llm[0]["workload_kind"] == "Deployment"
    assert llm[0]["cost"] == pytest.approx(sum(replicas), abs=0.001) and len(replicas) == 2
    team = json.loads(run(capsys, warehouse, "bill", *SPAN, "--team", "serve", "-o", "json"))
    assert [line["team"] for line in team["lines"]] == ["serve"]
    csv = run(capsys, warehouse, "bill", *SPAN, "-o", "csv")
    frame = pl.read_csv(csv.encode())
    assert set(frame["currency"]) == {"USD"} and frame["period"].n_unique() == 1
    labelled = json.loads(run(capsys, warehouse, "bill", *SPAN, "--by", "label:app", "-o", "json"))
    assert {line.get("workload") for line in labelled["lines"] if line.get("workload_kind") == "label:app"} == {
        "llm", "train"}
    unlabelled = [line for line in labelled["lines"] if line.get("workload_kind") == "unlabelled"]
    # the pods without the label: one "(no app label)" line per team and namespace, not one per pod
    keys = [(line["team"], line.get("namespace")) for line in unlabelled]
    assert len(keys) == len(set(keys)) and {line["workload"] for line in unlabelled} <= {"(no app label)"}


def test_budgets_json(capsys: pytest.CaptureFixture[str], warehouse: Path) -> None:
    doc = json.loads(run(capsys, warehouse, "budgets", *SPAN, "-o", "json"))
    assert doc["schema"] == "gpuledger.budgets/v1"
    assert {t["team"] for t in doc["teams"]} >= {"serve", "research"}
    assert all(t["state"] == "no_budget" for t in doc["teams"])
