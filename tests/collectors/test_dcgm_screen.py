"""The vectorised pieces of `dcgm.build_gpu_samples` (0146) against independent computations:
the per-field sample positions (binary search over the concatenated runs, or a scan when the
order is anything else), the bad-value marks (a per-sample Python rule), and the MIG profile
mapped once per distinct pair (`canonical_profile` called per series)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from gpuledger.collectors import dcgm
from gpuledger.core.mig import canonical_profile


def test_by_field_positions_equal_a_scan_in_order_and_shuffled() -> None:
    rng = np.random.default_rng(7)
    ordered = np.repeat(np.arange(9, dtype=np.int8), rng.integers(0, 50, 9))
    ordered = np.delete(ordered, np.nonzero(ordered == 4)[0])  # a field with no samples
    for f in (ordered, rng.permutation(ordered), ordered[:1], ordered[:0]):
        runs = dcgm._by_field(f, 9)
        assert len(runs) == 9
        for i, positions in enumerate(runs):
            assert positions.tolist() == [k for k, v in enumerate(f.tolist()) if v == i]


def test_bad_value_marks_follow_the_per_sample_rule() -> None:
    fields = ["gpu_util", "power_w", "sm_active", "not_a_bounded_field"]
    values = [math.nan, -1.0, 0.0, 50.0, 100.0, 100.5, math.inf, -math.inf, 1.0, 1.01, 5000.0, 5001.0]
    rng = np.random.default_rng(3)
    f = rng.integers(0, len(fields), 400).astype(np.int8)
    value = np.array([values[k] for k in rng.integers(0, len(values), 400)])
    marks = dcgm._bad_values(value, f, fields)

    def mark(v: float, name: str) -> int:
        lo, hi = dcgm.BOUNDS.get(name, (0.0, math.inf))
        if not math.isfinite(v):
            return 1
        if v < lo:
            return 2
        return 3 if v > hi else 0

    assert marks.tolist() == [mark(v, fields[i]) for v, i in zip(value.tolist(), f.tolist(), strict=True)]
    assert {1, 2, 3, 0} <= set(marks.tolist())
    assert dcgm._bad_values(np.array([]), np.array([], dtype=np.int8), fields).size == 0


def test_profiles_mapped_per_pair_equal_a_call_per_series() -> None:
    pairs = pl.DataFrame({
        "p": ["7g.79gb", "7g.79gb", None, "1g.10gb", "3g.40gb", "bogus", "7g.79gb", "2g.20gb"],
        "m": ["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB",
              "NVIDIA A100-SXM4-80GB", None, "NVIDIA H100 80GB HBM3", None, "NVIDIA A100-SXM4-40GB"],
    })
    expected = [None if p is None else canonical_profile(m, p) for p, m in pairs.iter_rows()]
    assert dcgm._canonical_profiles(pairs).to_list() == expected
    assert expected[0] != "7g.79gb"  # the pair the mapping exists for is really mapped


def test_screen_keeps_and_counts_by_an_independent_per_sample_rule() -> None:
    """Step 2 on samples before, on, off and past the chunk's grid, past now + tolerance, of
    series with and without a device, with good and bad values."""
    from datetime import UTC, datetime, timedelta

    from gpuledger.collectors.chunks import Chunk
    from gpuledger.collectors.quality import Quality
    from gpuledger.collectors.screen import FUTURE_TOLERANCE
    from gpuledger.core.window import Window

    start = datetime(2026, 11, 2, tzinfo=UTC)
    chunk = Chunk(Window(start, start + timedelta(minutes=30)))
    fields = ["gpu_util", "power_w"]
    rng = np.random.default_rng(11)
    n = 600
    offsets_s = rng.choice([-60, -1, 0, 60, 61, 600, 1740, 1800, 1860, 1200, 1500], n)
    sid = rng.integers(0, 4, n)
    f = np.sort(rng.integers(0, 2, n)).astype(np.int8)
    value = rng.choice([1.0, 50.0, -2.0, math.nan, 101.0, 6000.0], n)
    now = start + timedelta(minutes=18)  # past now + 2 min: the last third of the chunk
    raw = pl.DataFrame({"sid": sid, "f": f, "ts": [start + timedelta(seconds=int(s)) for s in offsets_s],
                        "value": value}, schema_overrides={"ts": pl.Datetime("us", "UTC"), "f": pl.Int8})
    did_of = np.array([0, 1, -1, 1])  # series 2 has no device
    ids = dcgm._SeriesIds(pl.DataFrame(), 2, did_of, np.zeros(4, dtype=np.int64), np.zeros(4, dtype=np.int8))
    quality = Quality()
    kept = dcgm._screen(raw, ids, fields, chunk, now=now, quality=quality)

    expect_counts: dict[str, int] = {}
    expect_kept = []
    for k in range(n):
        at = start + timedelta(seconds=int(offsets_s[k]))
        if did_of[sid[k]] < 0:
            reason = "unattributable"
        elif at < chunk.start or at >= chunk.end or at > now + FUTURE_TOLERANCE or offsets_s[k] % 60:
            reason = "clock_skew"
        else:
            expect_kept.append((int(sid[k]), int(offsets_s[k]) // 60))
            v = float(value[k])
            lo, hi = dcgm.BOUNDS[fields[f[k]]]
            reason = "nan" if not math.isfinite(v) else "negative" if v < lo else "out_of_range" if v > hi else ""
        if reason:
            expect_counts[reason] = expect_counts.get(reason, 0) + 1
    assert quality.by_reason() == expect_counts
    assert list(zip(kept.sid.tolist(), kept.instant.tolist(), strict=True)) == expect_kept
    assert set(expect_counts) == {"unattributable", "clock_skew", "nan", "negative", "out_of_range"}
    assert np.isnan(kept.value[kept.bad > 0]).all() and not np.isnan(kept.value[kept.bad == 0]).any()
