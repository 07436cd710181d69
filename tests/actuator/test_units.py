"""The actuator's pure parts and its HTTP error handling, without a cluster.

Cases:
- quantities: "8", "500m", "64Gi", "1e3" parse exactly; malformed ones are refused; equality
  across forms; whole values are written as ints and fractions as milli-units;
- HTTP status → error class (409, 404, 401/403, 400/415/422, 429, 429 on an eviction, 5xx, other);
- the gateway against a real loopback HTTP server: 503 twice then 200 is retried to success,
  409 is not retried, a refused connection is temporary and gives up after the set attempts,
  and a write without a resourceVersion is refused before any request;
- mig-parted documents: other entries are kept, None removes an entry, expected MIG resources by
  hand (`devices: all` needs the GPU count), zero allocatable ignored;
- quota ordering: decreases are written before increases, and replaying the steps keeps every
  cohort's (flavor, resource) sum at or below the larger of its old and new sums (computed by
  hand), whereas the naive plan order would exceed it;
- the progress record survives a JSON round trip.
"""

from __future__ import annotations

import json
import socket
import threading
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest
from kubernetes import client

from gpuledger.actuator.gateway import ClusterGateway, EvictionBlockedError, RetryPolicy, map_status, node_ref
from gpuledger.actuator.migconfig import expected_mig_resources, mig_allocatable, with_entries
from gpuledger.actuator.quantity import format_quantity, parse_quantity, same_quantity
from gpuledger.actuator.quota_rollout import plan_steps
from gpuledger.actuator.rollout_progress import MigProgress, NodeProgress, Progress, QuotaProgress, QuotaStep
from gpuledger.core.errors import (
    ClusterError,
    ConflictError,
    ForbiddenError,
    InputError,
    InvalidError,
    NotFoundError,
    TemporaryClusterError,
)
from tests.actuator.helpers import qc


# 1. Quantities -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "value"), [
    ("8", Fraction(8)), ("500m", Fraction(1, 2)), ("64Gi", Fraction(64 * 2**30)), ("1e3", Fraction(1000)),
    ("1.5", Fraction(3, 2)), ("2k", Fraction(2000)), (7, Fraction(7)), (0.25, Fraction(1, 4)),
    ("250u", Fraction(1, 4000)), ("3n", Fraction(3, 10**9)), ("0.1", Fraction(1, 10)), ("1.5Ei", Fraction(3 * 2**59)),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "1Z", "1_000", "NaN", "Infinity", "1ki", "2Ki8"])
def test_parse_quantity_refuses(text):
    with pytest.raises(InputError, match="not a Kubernetes quantity"):
        parse_quantity(text, where="nominalQuota")


def test_quantity_equality_and_format():
    assert same_quantity("1000m", 1) and same_quantity("1", "1") and not same_quantity("2", 1)
    assert same_quantity(None, None) and not same_quantity(None, 0)
    assert format_quantity(6.0) == 6 and isinstance(format_quantity(6.0), int)
    assert format_quantity(0.5) == "500m"


# 2. Status mapping --------------------------------------------------------------------------------
@pytest.mark.parametrize(("status", "cls"), [
    (409, ConflictError), (404, NotFoundError), (401, ForbiddenError), (403, ForbiddenError),
    (400, InvalidError), (415, InvalidError), (422, InvalidError), (429, TemporaryClusterError),
    (500, TemporaryClusterError), (503, TemporaryClusterError), (418, ClusterError),
])
def test_map_status(status, cls):
    err = map_status(status, "patch Node/n1", "boom")
    assert type(err) is cls
    assert "patch Node/n1" in str(err) and str(status) in str(err)


def test_eviction_429_is_a_blocked_eviction_not_a_retry():
    err = map_status(429, "evict Pod/ns/p", "Cannot evict pod", eviction=True)
    assert isinstance(err, EvictionBlockedError) and not err.temporary


# 3. The gateway against a real HTTP server --------------------------------------------------------
class _Script(BaseHTTPRequestHandler):
    answers: ClassVar[list[int]] = []
    seen: ClassVar[list[tuple[str, str]]] = []

    def _answer(self) -> None:
        type(self).seen.append((self.command, self.path))
        status = type(self).answers.pop(0) if type(self).answers else 200
        body = json.dumps({"kind": "Status", "message": f"scripted {status}"} if status >= 300
                          else {"metadata": {"name": "n1", "resourceVersion": "7"}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def scripted():
    server = HTTPServer(("127.0.0.1", 0), _Script)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Script.answers, _Script.seen = [], []
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    gateway = ClusterGateway(client.ApiClient(config), retry=RetryPolicy(attempts=4, base_s=0.01, max_s=0.02))
    yield gateway
    gateway.close()
    server.shutdown()
    server.server_close()


def test_temporary_errors_are_retried(scripted):
    _Script.answers = [503, 503, 200]
    assert scripted.get_node("n1")["metadata"]["name"] == "n1"
    assert len(_Script.seen) == 3


def test_temporary_errors_give_up_after_the_set_attempts(scripted):
    _Script.answers = [503] * 10
    with pytest.raises(TemporaryClusterError, match="read Node/n1: HTTP 503: scripted 503"):
        scripted.get_node("n1")
    assert len(_Script.seen) == 4


def test_conflict_is_not_retried_blindly(scripted):
    _Script.answers = [409]
    with pytest.raises(ConflictError):
        scripted.patch(node_ref("n1"), {"spec": {"unschedulable": True}}, "7")
    assert len(_Script.seen) == 1
    assert "dryRun=All" in _Script.seen[0][1]  # the dry run goes first


def test_refused_connection_is_temporary():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # a free port nobody listens on
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    with (
        ClusterGateway(client.ApiClient(config), retry=RetryPolicy(attempts=2, base_s=0.01)) as gateway,
        pytest.raises(TemporaryClusterError, match="cannot reach the API server"),
    ):
        gateway.get_node("n1")


def test_unguarded_write_is_refused(scripted):
    with pytest.raises(InvalidError, match="unguarded"):
        scripted.patch(node_ref("n1"), {"spec": {"unschedulable": True}}, "")
    assert _Script.seen == []


# 4. mig-parted documents --------------------------------------------------------------------------
def test_with_entries_keeps_other_entries():
    doc = {"version": "v1", "mig-configs": {"a": [1], "b": [2]}}
    new = with_entries(doc, {"b": [3], "c": [4]})
    assert new["mig-configs"] == {"a": [1], "b": [3], "c": [4]}
    assert doc["mig-configs"] == {"a": [1], "b": [2]}  # input untouched
    assert with_entries(new, {"c": None})["mig-configs"] == {"a": [1], "b": [3]}


def test_expected_mig_resources_by_hand():
    entry = [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [2], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [3], "mig-enabled": False},
    ]
    assert expected_mig_resources(entry, None) == {"nvidia.com/mig-3g.40gb": 4, "nvidia.com/mig-1g.10gb": 7}
    everything = [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 3}}]
    assert expected_mig_resources(everything, 4) == {"nvidia.com/mig-2g.20gb": 12}
    with pytest.raises(InputError, match="GPU count"):
        expected_mig_resources(everything, None)


def test_mig_allocatable_ignores_zero_and_other_resources():
    node = {"status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "4",
                                       "nvidia.com/mig-1g.10gb": "0"}}}
    assert mig_allocatable(node) == {"nvidia.com/mig-3g.40gb": 4}


# 5. Quota ordering --------------------------------------------------------------------------------
def test_decreases_go_first_and_cohort_sum_never_exceeds_capacity():
    # cohort "research", capacity 16 GPUs: a=8, b=4, c=4 → a=4, b=6, c=6 (sum stays 16).
    changes = [qc("a-queue", 8, 4), qc("b-queue", 4, 6), qc("c-queue", 4, 6)]
    # The plan lists b first: applying in plan order would pass through b=6, a=8, c=4 → 18 > 16.
    ordered = [changes[1], changes[0], changes[2]]
    steps = plan_steps(ordered)
    assert [(s.cluster_queue, s.phase) for s in steps] == [
        ("a-queue", "decrease"), ("b-queue", "increase"), ("c-queue", "increase")]
    quotas: dict[str, float] = {"a-queue": 8, "b-queue": 4, "c-queue": 4}
    peak = sum(quotas.values())
    for step in steps:
        for change in ordered:
            decrease = change.new_nominal < change.old_nominal
            if change.cluster_queue == step.cluster_queue and decrease == (step.phase == "decrease"):
                quotas[change.cluster_queue] = change.new_nominal
        peak = max(peak, sum(quotas.values()))
    assert quotas == {"a-queue": 4, "b-queue": 6, "c-queue": 6}
    assert peak == 16
    naive: dict[str, float] = {"a-queue": 8, "b-queue": 4, "c-queue": 4}
    naive_peak = 0
    for change in ordered:
        naive[change.cluster_queue] = change.new_nominal
        naive_peak = max(naive_peak, sum(naive.values()))
    assert naive_peak == 18  # what the ordering prevents


def test_a_queue_with_both_kinds_is_written_twice():
    steps = plan_steps([qc("a", 8, 4, resource="nvidia.com/gpu"), qc("a", 2, 3, resource="cpu")])
    assert [(s.cluster_queue, s.phase) for s in steps] == [("a", "decrease"), ("a", "increase")]


# 6. Progress record -------------------------------------------------------------------------------
def test_progress_round_trip():
    mig = Progress(apply=MigProgress(nodes=[NodeProgress(node="n1", phase="labeled", before_mig_config="x")]))
    again = Progress.load(json.loads(json.dumps(mig.dump())), MigProgress)
    assert isinstance(again.apply, MigProgress) and again.apply.node("n1").phase == "labeled"
    quota = Progress(apply=QuotaProgress(steps=[QuotaStep(cluster_queue="a", phase="decrease", done=True)]))
    back = Progress.load(quota.dump(), QuotaProgress)
    assert isinstance(back.apply, QuotaProgress) and back.apply.steps[0].done
    assert Progress.load(None, MigProgress).apply is None
