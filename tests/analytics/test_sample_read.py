"""The series read of the sample pass (`analytics.sampling.read`, decision 0144) against the read
through the `gpu_samples` view it replaced (`READ_SQL` and `NAMES_SQL`, still the path of a
catalog without the v008 tables): the same names, and the pass over either read gives the same
hourly frame, allocations and idle runs bit for bit (same rows in the same order of the pass)."""

from __future__ import annotations

import pytest
from polars.testing import assert_frame_equal

from gpuledger.analytics.sampling import read, sweep
from gpuledger.analytics.sampling.model import SampleRules, params
from gpuledger.analytics.sampling.steps import NAMES_SQL
from gpuledger.core.config import Settings
from tests.analytics.pass_fleet import DAY, simulated_fleet

KEYS = ["dev", "hold"]


def test_series_read_equals_the_view_read(monkeypatch: pytest.MonkeyPatch) -> None:
    p = params(DAY, SampleRules.of(Settings()))
    window = {"lo": p["lo"], "hi": p["hi"]}
    with simulated_fleet() as wh:
        assert read.has_series_layout(wh)
        values, series, names = read.read(wh, window)
        by_series = sweep.run(wh, p)
        monkeypatch.setattr(read, "has_series_layout", lambda _wh: False)
        by_view = sweep.run(wh, p)
        view_names = wh.query(NAMES_SQL, window)
    assert values.height > 10_000 and series["sid"].is_unique().all()
    assert_frame_equal(names.sort(KEYS, nulls_last=True), view_names.sort(KEYS, nulls_last=True))
    for consumer in (sweep.hourly, sweep.allocations, sweep.idle_runs):
        new, old = consumer(by_series), consumer(by_view)
        keys = [c for c in ("hour", "start_us", "uuid", "gpu_i_id", "vgpu", "namespace", "pod") if c in new.columns]
        assert new.height > 10
        assert_frame_equal(new.sort(keys, nulls_last=True), old.sort(keys, nulls_last=True), check_exact=True)
