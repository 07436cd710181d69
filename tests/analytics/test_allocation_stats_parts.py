"""Per-allocation statistics in parts (`warehouse.queries.workloads.allocation_stats`, 0244).

The two exact p95s are holistic aggregates DuckDB cannot spill, so the allocations are split
into as many statements as the memory bound needs. Cases:
- `quantile_parts`, by hand: 19.7 M samples at 32 B need 5 parts under 256 MiB, 1 under 12 GiB;
- any number of parts gives the same rows as one statement, and every p95 equals numpy's
  linear-interpolated quantile of the samples as loaded (an independent computation), over
  allocations whose samples lie in two series (two containers of one pod, a pod moved between
  nodes), a MIG instance, a labelled vGPU and samples with no activity reading;
- DuckDB's bound as it resolved it (`workloads.memory_limit_bytes`): a size and a share of the RAM.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from gpuledger.core.activity import DEFAULT_SOURCE
from gpuledger.core.config_warehouse import WarehouseSettings
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import workloads
from tests.analytics.builders import Seg, at, gpus, load, namespaces, samples, window

KEY = ["namespace", "pod", "uuid", "gpu_i_id", "vgpu", "profile"]


def _samples() -> pl.DataFrame:
    segs = [
        Seg("GPU-0", at(0), at(8), "ml", "train-0"),
        Seg("GPU-1", at(0), at(5), "ml", "svc-0"),
        Seg("GPU-1", at(5), at(8), "ml", "svc-0", node="node-b"),  # the same pod, another node
        Seg("GPU-2", at(0), at(8), "ml", "mig-0", gpu_i_id=1, profile="3g.40gb"),
        Seg("GPU-2", at(0), at(8), "ds", "mig-1", gpu_i_id=2, profile="3g.40gb"),
        Seg("GPU-3", at(0), at(8), "ds", "vgpu-0", vgpu="0"),
        Seg("GPU-3", at(0), at(8), "ds", "vgpu-1", vgpu="1"),
        Seg("GPU-4", at(0), at(8), "ds", "nb-0"),
        Seg("GPU-5", at(0), at(8)),  # no holder: not an allocation
    ]
    frame = samples(segs)
    rng = np.random.default_rng(34)
    act = rng.uniform(0.0, 1.0, frame.height)
    act[rng.uniform(size=frame.height) < 0.05] = np.nan  # no reading: not an activity value
    fb = rng.integers(1_000, 40_000, frame.height).astype(float)
    container = np.where((frame["pod"] == "train-0").fill_null(False).to_numpy() & (np.arange(frame.height) % 3 == 0),
                         "sidecar", frame["container"].to_numpy())
    return frame.with_columns(
        pl.Series("gr_engine_active", act).fill_nan(None),
        pl.Series("fb_used_mib", fb),
        pl.Series("container", container, dtype=pl.String),
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    frames = {"gpus": gpus(*({"uuid": f"GPU-{i}", "gpu_index": i} for i in range(6))),
              "gpu_samples": _samples(), "namespaces": namespaces({"ml": "ml", "ds": "data"})}
    return load(tmp_path_factory.mktemp("parts") / "w.duckdb", window(8), frames)


def test_parts_keep_each_part_within_half_the_bound():
    demo_month = 19_691_244
    assert workloads.quantile_parts(demo_month, 256 * 2**20) == 5  # 630 MB over 128 MiB halves
    assert workloads.quantile_parts(demo_month, int(11.7 * 2**30)) == 1
    assert workloads.quantile_parts(0, 256 * 2**20) == 1
    assert workloads.quantile_parts(4 * 2**20, 256 * 2**20) == 1  # 128 MiB of state: exactly half
    assert workloads.quantile_parts(4 * 2**20 + 1, 256 * 2**20) == 2


def _stats(path, parts: int | None, monkeypatch) -> pl.DataFrame:
    if parts is not None:
        monkeypatch.setattr(workloads, "quantile_parts", lambda samples, limit: parts)
    with Warehouse.open(path, read_only=True) as wh:
        return workloads.allocation_stats(wh, window(8).start, window(8).end, DEFAULT_SOURCE).sort(
            KEY, nulls_last=True)


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_any_number_of_parts_gives_the_same_rows(fleet, parts, monkeypatch):
    whole = _stats(fleet, 1, monkeypatch)
    split = _stats(fleet, parts, monkeypatch)
    assert whole.height == 7
    assert split.select(KEY, "samples", "act_p95", "fb_p95_mib", "fb_max_mib").equals(
        whole.select(KEY, "samples", "act_p95", "fb_p95_mib", "fb_max_mib"))
    for column in ("act_mean", "act_std"):  # sums: the last bit follows DuckDB's thread order
        assert split[column].to_list() == pytest.approx(whole[column].to_list(), rel=1e-12)


def test_each_p95_is_numpys_quantile_of_the_loaded_samples(fleet, monkeypatch):
    stats = _stats(fleet, 3, monkeypatch)
    loaded = _samples().filter(pl.col("namespace").is_not_null())
    assert stats["samples"].sum() == loaded.height
    for row in stats.iter_rows(named=True):
        mine = loaded.filter(pl.col("pod") == row["pod"])
        act = mine["gr_engine_active"].drop_nulls().to_numpy()
        assert row["samples"] == mine.height
        assert row["act_p95"] == pytest.approx(float(np.quantile(act, 0.95)), rel=1e-12)
        assert row["act_mean"] == pytest.approx(float(act.mean()), rel=1e-12)
        assert row["fb_p95_mib"] == pytest.approx(float(np.quantile(mine["fb_used_mib"].to_numpy(), 0.95)))
        assert row["fb_max_mib"] == mine["fb_used_mib"].max()
    assert stats.filter(pl.col("pod") == "mig-0")["profile"].to_list() == ["3g.40gb"]
    assert stats.filter(pl.col("pod") == "vgpu-1")["vgpu"].to_list() == ["1"]
    assert stats.filter(pl.col("pod") == "nb-0")["vgpu"].to_list() == [None]


@pytest.mark.parametrize(("setting", "expected"), [("256MiB", 256 * 2**20), ("1.5GiB", 1.5 * 2**30)])
def test_the_bound_as_duckdb_resolved_it(fleet, setting, expected):
    with Warehouse.open(fleet, read_only=True, limits=WarehouseSettings(memory_limit=setting)) as wh:
        assert workloads.memory_limit_bytes(wh) == pytest.approx(expected, rel=1e-3)


def test_a_share_of_the_ram_resolves_to_bytes(fleet):
    import psutil

    with Warehouse.open(fleet, read_only=True, limits=WarehouseSettings(memory_limit="25%")) as wh:
        share = workloads.memory_limit_bytes(wh) / psutil.virtual_memory().total
    assert 0.0 < share <= 0.2501  # of the container's limit instead where that is lower


def test_parts_are_sized_by_the_kept_fingerprints(fleet, monkeypatch):
    """The samples `quantile_parts` sizes by come from the fingerprints every write keeps per day
    and series (v018), not a count of the month's values: the window's samples where its days
    hold only them, more where the window cuts a day (never fewer); and those of the allocations
    with a sample in the asked ranges, counted here from the samples view (another path)."""
    sized: list[int] = []
    monkeypatch.setattr(workloads, "quantile_parts", lambda samples, limit: sized.append(samples) or 2)
    asked = (at(4), at(5))
    with Warehouse.open(fleet, read_only=True) as wh:
        def values(lo, hi, touching=None):
            keys = "namespace, pod, uuid, gpu_i_id, coalesce(vgpu, ''), mig_profile"
            only = "" if touching is None else (
                f" AND ({keys}) IN (SELECT ({keys}) FROM gpu_samples WHERE ts >= $a AND ts < $b)")
            return int(wh.scalar("SELECT count(*) FROM gpu_samples WHERE ts >= $lo AND ts < $hi "
                                 f"AND namespace IS NOT NULL{only}",
                                 {"lo": lo, "hi": hi} | ({} if touching is None else
                                                         {"a": touching[0], "b": touching[1]})))

        workloads.allocation_stats(wh, at(0), at(8), DEFAULT_SOURCE, [asked])
        workloads.allocation_stats(wh, at(0), at(4), DEFAULT_SOURCE)
        every = int(wh.scalar("SELECT count(*) FROM gpu_sample_values"))
        held, of_asked, first_half = values(at(0), at(8)), values(at(0), at(8), asked), values(at(0), at(4))
    assert sized[0] == every == held + _holderless(), "the window holds its days' samples"
    assert sized[1] == of_asked < every, "the asked allocations' samples (every allocation here), no card's unheld"
    assert sized[2] == every > first_half, "a window cutting its day: the day's samples"


def _holderless() -> int:
    """The samples of the card no pod holds (counted in the window's values, no allocation's)."""
    return int(_samples().filter(pl.col("namespace").is_null()).height)
