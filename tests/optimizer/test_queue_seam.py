"""The queue-system seam and the one-home rules behind it.

Cases:
- each stage's registry gives Kueue by default, names it among the known systems, and refuses
  an unknown system in one line that lists the known ones;
- a system registered under a new name is what that stage hands out (the plug-in point), and
  registering a second, different implementation under a taken name is refused;
- the HTTP status → error class map (`core.errors.error_for_status`): classes, temporariness,
  hints only when asked;
- the team rule (`core.teams`): label (raw or KSM-sanitized key) before fallback rules, groups
  in fallback teams, no match → None;
- ClusterQueue → team (`analytics.teams.queues`) on a real DuckDB warehouse: teams reach a
  ClusterQueue through LocalQueues in their namespaces; a shared queue lists every team and has
  no single owner; unlabelled namespaces and LocalQueues without `spec.clusterQueue` count for
  nothing;
- the optimizer reads the same owners from the warehouse (its QueueSpec.team).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.actuator.queues import WRITERS, quota_writer
from gpuledger.analytics.teams.queues import queue_owners, queue_team_sets, target_cluster_queue
from gpuledger.collectors.queues import COLLECTORS, queue_collector
from gpuledger.core.config import TeamSettings
from gpuledger.core.errors import (
    ClusterError,
    ConflictError,
    ForbiddenError,
    InputError,
    InvalidError,
    NotFoundError,
    TemporaryClusterError,
    error_for_status,
)
from gpuledger.core.frames import NAMESPACES, QUEUE_SAMPLES, QUEUES, polars_schema
from gpuledger.core.queues import queue_registry
from gpuledger.core.registry import Registry
from gpuledger.core.teams import ksm_label, resolve_team
from gpuledger.core.window import Window
from gpuledger.optimizer.quota.inputs import quota_inputs_from_warehouse
from gpuledger.optimizer.quota.queues import READERS, quota_reader
from gpuledger.warehouse import LoadBatch, Warehouse

AT = datetime(2026, 3, 1, tzinfo=UTC)


# 1. Registries --------------------------------------------------------------------------------
@pytest.mark.parametrize(("registry", "get"), [
    (COLLECTORS, queue_collector), (READERS, quota_reader), (WRITERS, quota_writer),
])
def test_each_stage_has_kueue_and_refuses_unknown_systems(registry, get):
    assert get().name == "kueue" and get("kueue") is get()
    assert "kueue" in registry.names()
    with pytest.raises(InputError, match=r"queue system 'slurm': no \w+ support \(known: kueue, volcano\)") as info:
        get("slurm")
    assert "\n" not in str(info.value)


def test_kueue_parts_agree_on_the_object_kind():
    assert quota_reader().object_kind == quota_writer().object_kind == "ClusterQueue"
    assert "ClusterQueue" in {r.kind for r in queue_collector().resources}
    assert quota_writer().ref("a b").path == "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/a%20b"


def test_a_registered_system_is_handed_out_by_name():
    registry: Registry[str] = queue_registry("collect", "gpuledger.collectors.queues")
    assert registry.register("volcano", "volcano-part") == "volcano-part"
    assert registry.get("volcano") == "volcano-part"
    assert set(registry.names()) >= {"kueue", "volcano"}
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("volcano", "another")


# 2. HTTP status → error class -----------------------------------------------------------------
@pytest.mark.parametrize(("status", "cls", "temporary"), [
    (409, ConflictError, False), (404, NotFoundError, False), (401, ForbiddenError, False),
    (403, ForbiddenError, False), (400, InvalidError, False), (422, InvalidError, False),
    (429, TemporaryClusterError, True), (503, TemporaryClusterError, True),
    (418, ClusterError, False), (0, ClusterError, False),
])
def test_error_for_status(status, cls, temporary):
    err = error_for_status(status, "listing x failed")
    assert type(err) is cls and err.temporary is temporary and str(err) == "listing x failed"


def test_error_hints_only_when_asked():
    assert str(error_for_status(403, "m", hint=True)) == "m (check the RBAC rules in deploy/rbac.yaml)"
    assert str(error_for_status(409, "m", hint=True)) == "m (the object changed since it was read)"
    assert str(error_for_status(404, "m", hint=True)) == "m"


# 3. The team rule -----------------------------------------------------------------------------
def test_team_rule():
    teams = TeamSettings.model_validate({
        "label_key": "example.com/team",
        "fallback": [{"namespace_regex": "ml-(.*)", "team": "\\1"}, {"namespace_regex": "ml-.*", "team": "x"}],
    })
    assert ksm_label("example.com/team") == "label_example_com_team"
    assert resolve_team("ml-a", {"example.com/team": "alpha"}, teams) == "alpha"
    assert resolve_team("ml-a", {"example_com_team": "beta"}, teams) == "beta"
    assert resolve_team("ml-vision", {"example.com/team": ""}, teams) == "vision"
    assert resolve_team("other", {"team": "ignored"}, teams) is None


# 4. ClusterQueue → team ------------------------------------------------------------------------
def _queue(kind: str, name: str, namespace: str = "", spec: dict | None = None) -> dict:
    return {"kind": kind, "name": name, "namespace": namespace, "cohort": None,
            "spec": json.dumps(spec or {}), "resource_version": "1", "observed_at": AT}


@pytest.fixture
def wh(tmp_path):
    namespaces = pl.DataFrame([
        {"namespace": "a1", "team": "alpha", "labels": "{}", "observed_at": AT},
        {"namespace": "a2", "team": "alpha", "labels": "{}", "observed_at": AT},
        {"namespace": "b1", "team": "beta", "labels": "{}", "observed_at": AT},
        {"namespace": "loose", "team": None, "labels": "{}", "observed_at": AT},
    ], schema=polars_schema(NAMESPACES))
    gpu = {"name": "nvidia.com/gpu", "nominalQuota": 4}
    cq_spec = {"cohortName": "all", "resourceGroups": [
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [gpu]}]}]}
    queues = pl.DataFrame([
        *(_queue("ClusterQueue", n, spec=cq_spec) for n in ("cq-alpha", "cq-shared", "cq-none")),
        _queue("LocalQueue", "train", "a1", {"clusterQueue": "cq-alpha"}),
        _queue("LocalQueue", "batch", "a2", {"clusterQueue": "cq-shared"}),
        _queue("LocalQueue", "batch", "b1", {"clusterQueue": "cq-shared"}),
        _queue("LocalQueue", "nowhere", "b1", {}),
        _queue("LocalQueue", "batch", "loose", {"clusterQueue": "cq-none"}),
    ], schema=polars_schema(QUEUES))
    ts = [AT + timedelta(minutes=i) for i in range(3)]
    samples = pl.DataFrame({
        "ts": ts * 3, "cluster_queue": [q for q in ("cq-alpha", "cq-shared", "cq-none") for _ in ts],
        "flavor": "f", "resource": "nvidia.com/gpu", "usage": 1.0, "nominal_quota": 4.0,
    })
    schema = polars_schema(QUEUE_SAMPLES)
    samples = samples.select(*(pl.col(c).cast(schema[c]) if c in samples.columns else pl.lit(None, schema[c]).alias(c)
                               for c in QUEUE_SAMPLES.column_names))
    with Warehouse.open(tmp_path / "wh.duckdb") as w:
        w.load(LoadBatch(frames={"namespaces": namespaces, "queues": queues}))
        w.load(LoadBatch(frames={"queue_samples": samples}, window=Window(AT, AT + timedelta(hours=1))))
        yield w


def test_queue_teams_through_local_queues(wh):
    sets = queue_team_sets(wh)
    assert sets == {"cq-alpha": frozenset({"alpha"}), "cq-shared": frozenset({"alpha", "beta"})}
    assert queue_owners(wh) == {"cq-alpha": "alpha"}


def test_target_cluster_queue_shapes():
    assert target_cluster_queue('{"clusterQueue": "q"}') == "q"
    assert target_cluster_queue({"spec": {"clusterQueue": "q"}}) == "q"
    assert target_cluster_queue("not json") is None
    assert target_cluster_queue(None) is None


def test_optimizer_reads_the_same_owners(wh):
    inputs = quota_inputs_from_warehouse(wh, timedelta(days=1))
    assert {q.name: q.team for q in inputs.queues} == {"cq-alpha": "alpha", "cq-shared": None, "cq-none": None}
    assert inputs.queue_system == "kueue" and inputs.reader is quota_reader()
