"""dcgm-exporter's DRA scrapes from upstream (tests/fixtures/dcgm/dra_*.prom, SOURCES.md there),
read through a real Prometheus and `collect_window` (the same replay as
tests/collectors/test_conformance.py): the claims, devices and reservations rebuilt from their
`dra_*` labels (docs/decisions/0163), each named `prometheus`. Truths from SOURCES.md:

- `dra_full_gpu_gh200`: claim `gpu-test3/single-gpu` holds the whole GPU `gpu-0` of
  `GPU-a4f34abc-…` (pool `sc-starwars-xxxx`), reserved by `pod1` and `pod2`;
- `dra_mig_a30_lowercase_hostname`: claim `gpu-test4/pod-c98945f5d-dnjs6-mig-devices-thfdj` holds
  `gpu-1-mig-1g6gb-14-0` (current name: profile 1g.6gb, GI profile 14, placement 0) on the parent
  `GPU-e04ce2a0-…`, its MIG UUID from `dra_mig_device_uuid`, reserved by `pod-c98945f5d-dnjs6`;
- `dra_mig_gh200`: `gpu-0-mig-19-6-1` (a PR 532-era name: GI profile 19, placement 6, size 1) with
  no `GPU_I_*` labels: a MIG device at placement 6 of `GPU-a4f34abc-…`, profile 1g.12gb from
  `dra_mig_profile`.
Each fixture is one unchanged scrape replayed for POINTS minutes, so every span is the replay's.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.collectors.test_conformance import POINTS, _collect, _openmetrics, _slot
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus

GH200 = "GPU-a4f34abc-7715-3560-dcea-7238b9611a45"
A30_MIG_PARENT = "GPU-e04ce2a0-21a4-b68c-854a-f5c0d26bfc0b"
CASES = {
    "dra_full_gpu_gh200": (
        ("gpu-test3", "single-gpu"), ("sc-starwars-xxxx", "gpu-0"),
        ("gpu", GH200, GH200, None, -1, "NVIDIA GH200 96GB HBM3"), ["pod1", "pod2"]),
    "dra_mig_a30_lowercase_hostname": (
        ("gpu-test4", "pod-c98945f5d-dnjs6-mig-devices-thfdj"), ("nim-operator-72q5r53", "gpu-1-mig-1g6gb-14-0"),
        ("mig", "MIG-c73ab1c4-6cb7-59b6-be7e-21c4ac35c3b6", A30_MIG_PARENT, "1g.6gb", 0, "NVIDIA A30"),
        ["pod-c98945f5d-dnjs6"]),
    "dra_mig_gh200": (
        ("gpu-test4", "pod-56dbf5cf44-xnfk5-mig-devices-rxspm"), ("sc-starwars-mab9-b00", "gpu-0-mig-19-6-1"),
        ("mig", "MIG-24c6a0e5-fe28-53ac-9537-c4e23104f30f", GH200, "1g.12gb", 6, "NVIDIA GH200 96GB HBM3"),
        ["pod-56dbf5cf44-xnfk5"]),
}


@pytest.fixture(scope="module")
def replayed(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Prometheus holding every dcgm fixture replayed, each in its own hour (`_slot`)."""
    return metrics_servers.prometheus(_openmetrics(tmp_path_factory.mktemp("dcgm-dra") / "f.om")).url


@pytest.mark.parametrize("name", sorted(CASES))
def test_claims_rebuilt_from_dra_labels(name: str, replayed: str, tmp_path: Path) -> None:
    (namespace, claim), (pool, device), facts, pods = CASES[name]
    start = _slot(name)
    wh, _ = _collect(replayed, tmp_path, name)
    try:
        devices = wh.query("SELECT driver, pool, device, kind, uuid, parent_uuid, profile, placement, model, "
                           "source FROM dra_devices").rows()
        claims = wh.query("SELECT claim_uid, driver, pool, device, namespace, claim, start_ts, end_ts, source "
                          "FROM dra_claims").rows()
        reservations = wh.query("SELECT claim_uid, namespace, pod FROM dra_reservations ORDER BY pod").rows()
    finally:
        wh.close()
    assert devices == [("gpu.nvidia.com", pool, device, *facts, "prometheus")]
    uid = f"prometheus:{namespace}/{claim}"
    end = start + timedelta(minutes=POINTS)
    assert [(*c[:6], c[8]) for c in claims] == [(uid, "gpu.nvidia.com", pool, device, namespace, claim,
                                                  "prometheus")]
    assert (claims[0][6], claims[0][7]) == (start, end)
    assert reservations == [(uid, namespace, pod) for pod in pods]
