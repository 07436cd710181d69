"""A StatefulSet pod recreated under the same name is two pods in the inventory, billed once.

Kubernetes gives a StatefulSet's replacement pod the old name (its ordinal identity) but a new
uid and `status.startTime`, so the pods table keeps one row per incarnation (its key is
namespace, pod, start_ts). The bill joined the pod facts on the name alone: every held hour of
such a pod came out once per incarnation (issue 29's plane run: MIG +17 % card-hours, +90 %
idle; time-slicing moved card-hours between teams through the card clamp). Expected values
are hand arithmetic on the segments below.

Prices: H100-80GB 3.00/card-hour (the default price book).
"""

from __future__ import annotations

import json

import pytest

from gpuledger.analytics.workloads.requested import workload_usage
from gpuledger.core.config import Settings
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import Seg, at, gpus, load, mig_instances, namespaces, pods, samples, window
from tests.analytics.conftest import by_team


def _incarnations(namespace: str, pod: str, *spans: tuple[object, object, dict[str, float]]) -> list[dict]:
    return [{"namespace": namespace, "pod": pod, "owner_kind": "StatefulSet", "owner_name": pod[:-2],
             "start_ts": start, "end_ts": end, "gpu_requests": json.dumps(requests)}
            for start, end, requests in spans]


def test_restarted_statefulset_pod_on_a_mig_slice_is_billed_once(make_bill, tmp_path):
    # db-0 holds the 3g slice (3/7) 0:00-1:20, idle (no activity) 0:40-1:20; recreated, it
    # holds it again 1:25-3:00. Card-hours 3/7 x 175/60; idle 3/7 x 40/60.
    gpu = {"nvidia.com/mig-3g.40gb": 1}
    frames = {
        "gpus": gpus({"uuid": "GPU-M", "sharing_mode": "mig"}),
        "gpu_samples": samples([
            Seg("GPU-M", at(0), at(0, 40), "db-ns", "db-0", gpu_i_id=1, profile="3g.40gb"),
            Seg("GPU-M", at(0, 40), at(1, 20), "db-ns", "db-0", act=0.0, gpu_i_id=1, profile="3g.40gb"),
            Seg("GPU-M", at(1, 20), at(1, 25), gpu_i_id=1, profile="3g.40gb"),
            Seg("GPU-M", at(1, 25), at(3), "db-ns", "db-0", gpu_i_id=1, profile="3g.40gb"),
        ]),
        "namespaces": namespaces({"db-ns": "data"}),
        "mig_instances": mig_instances(("GPU-M", 1, "3g.40gb", at(0), at(3))),
        "pods": pods(*_incarnations("db-ns", "db-0", (at(0), at(1, 20), gpu), (at(1, 25), at(3), gpu))),
    }
    lines = by_team(make_bill(window(3), frames))
    assert lines["data"]["card_hours"] == pytest.approx(3 / 7 * 175 / 60)
    assert lines["data"]["idle_card_hours"] == pytest.approx(3 / 7 * 40 / 60)
    assert lines["unallocated"]["card_hours"] == pytest.approx(3 - 3 / 7 * 175 / 60)
    # The requested-vs-used report: one allocation row for the slice, its card-hours the bill's.
    with Warehouse.open(load(tmp_path / "r.duckdb", window(3), frames), read_only=True) as wh:
        usage = workload_usage(wh, window(3), Settings())
    assert usage.select("pod", "workload").rows() == [("db-0", "db")]
    assert usage["card_hours"].sum() == pytest.approx(3 / 7 * 175 / 60)


def test_each_hour_takes_the_requests_of_the_incarnation_alive_then(make_bill):
    # A vGPU pod v-0 asks 30 % of the cores in its first life (0:00-0:55), 50 % in its second
    # (1:00-2:00, the spec edited), memory a small 8 GiB of 80 (10 %): 0.3 x 55/60 + 0.5
    # card-hours, beside w (20 %, 2 h: 0.4). The old join billed both lives in each hour.
    # (Spans of one name that touch are one pod to the warehouse, `Warehouse._merge_intervals`:
    # a recreated pod starts after the old one was last listed.)
    small = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8192}
    frames = {
        "gpus": gpus({"uuid": "GPU-V", "sharing_mode": "vgpu"}),
        "gpu_samples": samples([
            Seg("GPU-V", at(0), at(0, 55), "x-ns", "v-0", vgpu="0"),
            Seg("GPU-V", at(1), at(2), "x-ns", "v-0", vgpu="0"),
            Seg("GPU-V", at(0), at(2), "y-ns", "w-0", vgpu="1"),
        ]),
        "namespaces": namespaces({"x-ns": "x", "y-ns": "y"}),
        "pods": pods(
            *_incarnations("x-ns", "v-0", (at(0), at(0, 55), small | {"nvidia.com/gpucores": 30}),
                           (at(1), at(2), small | {"nvidia.com/gpucores": 50})),
            *_incarnations("y-ns", "w-0", (at(0), at(2), small | {"nvidia.com/gpucores": 20})),
        ),
    }
    lines = by_team(make_bill(window(2), frames))
    assert lines["x"]["card_hours"] == pytest.approx(0.3 * 55 / 60 + 0.5)
    assert lines["y"]["card_hours"] == pytest.approx(0.4)
    assert lines["unallocated"]["card_hours"] == pytest.approx(2 - 0.3 * 55 / 60 - 0.5 - 0.4)
