"""Workloads, not replicas: `bill --by owner`, `idle` and `recommend` per workload, and filters.

The fleet (4 h, H100s at 3.00/h): team `serve` runs a vLLM Deployment `llm` (ReplicaSet
`llm-7d9f8c6b5d`) with two replicas on one GPU each, both idle; team `research` runs a Job
`train-abc` whose pod holds two GPUs (one busy, one idle) and a notebook (StatefulSet
`nb-ann`, label `notebook-name`) idle on a fifth card.

Cases:
- `owned_by`: the ReplicaSet's pod-template hash is dropped (Deployment `llm`), the notebook
  label wins over the StatefulSet, a pod without owner is its own workload; every owner form
  with every label form as the rule per pod (frozen) gives it; labels that are no JSON object
  are none;
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

from gpuledger.analytics.workloads.requested import owned_by
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


def owner_of(kind: str | None, name: str | None, labels: dict[str, str] | str | None,
             pod: str) -> tuple[str, str]:
    """One pod through `owned_by` (labels as a dict, JSON text, or none)."""
    text = json.dumps(labels) if isinstance(labels, dict) else labels
    frame = pl.DataFrame({"owner_kind": [kind], "owner_name": [name], "labels": [text], "pod": [pod]},
                         schema=dict.fromkeys(("owner_kind", "owner_name", "labels", "pod"), pl.String))
    row = owned_by(frame).row(0, named=True)
    return row["workload_kind"], row["workload"]


def test_owner_of() -> None:
    assert owner_of("ReplicaSet", "llm-7d9f8c6b5d", {}, "llm-7d9f8c6b5d-aaaaa") == ("Deployment", "llm")
    assert owner_of("StatefulSet", "nb-ann", {"notebook-name": "nb-ann"}, "nb-ann-0") == ("notebook", "nb-ann")
    assert owner_of("StatefulSet", "db", {}, "db-0") == ("StatefulSet", "db")
    assert owner_of(None, None, {}, "lonely") == ("Pod", "lonely")


def _owner_of_per_row(owner_kind: str | None, owner_name: str | None, labels: dict[str, str],
                      pod: str) -> tuple[str, str]:
    """The rule as one Python call per pod, frozen from 434ed71 (before `owned_by`): the
    independent statement of it that the expressions are held to."""
    import re

    for key in ("notebook-name", "jupyter.org/notebook", "notebooks.kubeflow.org/name"):
        if labels.get(key):
            return "notebook", labels[key]
    if labels.get("app") == "notebook" or labels.get("app.kubernetes.io/component") == "notebook":
        return "notebook", owner_name or pod
    if owner_kind == "ReplicaSet" and owner_name:
        match = re.match(r"^(?P<deployment>.+)-[a-z0-9]{5,10}$", owner_name)
        return "Deployment", match.group("deployment") if match else owner_name
    if owner_kind and owner_name:
        return owner_kind, owner_name
    return "Pod", pod


LABELS = [{"notebook-name": "nb"}, {"jupyter.org/notebook": "nb"}, {"notebooks.kubeflow.org/name": "nb"},
          {"app": "notebook"}, {"app.kubernetes.io/component": "notebook"}, {"notebook-name": ""},
          {"notebook-name": "", "jupyter.org/notebook": "jp"}, {"app": "llm", "tier": "gpu"}, {}]
OWNERS = [("ReplicaSet", "llm-7d9f8c6b5d"), ("ReplicaSet", "a-b-c-12345"), ("ReplicaSet", "-abcde"),
          ("ReplicaSet", "short-ab"), ("ReplicaSet", ""), ("ReplicaSet", None), ("StatefulSet", "nb"),
          ("Job", "train-abc"), ("", "x"), (None, None), ("Job", "")]


@pytest.mark.parametrize("labels", LABELS)
def test_owned_by_follows_the_rule_per_pod(labels: dict[str, str]) -> None:
    """Every owner reference with every label form, as expressions over a frame and as the rule
    per pod: the same workload kind and name (an empty label or owner name counts as none)."""
    for kind, name in OWNERS:
        assert owner_of(kind, name, labels, "pod-0") == _owner_of_per_row(kind, name, labels, "pod-0"), (kind, name)


@pytest.mark.parametrize("text", [None, "", "not json", "[1, 2]", '{"app": "notebook"'])
def test_labels_that_are_not_an_object_are_none(text: str | None) -> None:
    assert owner_of("Job", "train", text, "p") == ("Job", "train")


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
