"""The series read of the sample pass (`warehouse.queries.sampling.read`, decision 0144) against the read
through the `gpu_samples` view it replaced (`READ_SQL` and `NAMES_SQL`, still the path of a
catalog without the v008 tables): the same names, and the pass over either read gives the same
hourly frame, allocations and idle runs bit for bit (same rows in the same order of the pass)."""

from __future__ import annotations

import pytest
from polars.testing import assert_frame_equal

from gpuledger.analytics.sampling import results, sweep
from gpuledger.core.config import Settings
from gpuledger.core.rules import SamplingRules
from gpuledger.warehouse.queries import sampling as read
from tests.analytics.pass_fleet import DAY, simulated_fleet

KEYS = ["dev", "hold"]


def test_series_read_equals_the_view_read(monkeypatch: pytest.MonkeyPatch) -> None:
    rules = SamplingRules.of(Settings())
    window = {"lo": DAY.start - rules.margin, "hi": DAY.end + rules.margin}
    with simulated_fleet() as wh:
        assert read.has_series_layout(wh)
        values, series, names = read.read(wh, window["lo"], window["hi"])
        by_series = sweep.run(wh, DAY, rules)
        monkeypatch.setattr(read, "has_series_layout", lambda _wh: False)
        by_view = sweep.run(wh, DAY, rules)
        view_names = wh.query(read.NAMES_SQL, window)
    assert values.height > 10_000 and series["sid"].is_unique().all()
    assert_frame_equal(names.sort(KEYS, nulls_last=True), view_names.sort(KEYS, nulls_last=True))
    for consumer in (results.hourly, results.allocations, results.idle_pieces):
        new, old = consumer(by_series), consumer(by_view)
        keys = [c for c in ("hour", "start_us", "uuid", "gpu_i_id", "vgpu", "namespace", "pod") if c in new.columns]
        assert new.height > 10
        assert_frame_equal(new.sort(keys, nulls_last=True), old.sort(keys, nulls_last=True), check_exact=True)
