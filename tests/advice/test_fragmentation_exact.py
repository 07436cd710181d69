"""The keyed fragmentation rates equal the frozen per-card-hour loop (fragmentation_reference.py).

Random layouts of A100 and H100 cards over three days of hours: empty cards, cards whose layout
changes every few hours, valid and over-full mixes, two pools, a model without a demanded
profile (the fallback: its smallest profile in use) and a node whose every card is empty with
no demanded profile for its model (no row at all). Frames are compared whole, with ==.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.advice.fragmentation import fragmentation_rates
from tests.advice import fragmentation_reference as reference

A100, H100 = "A100-SXM4-40GB", "H100-80GB"
MIXES = {
    A100: [{}, {"3g.20gb": 1, "1g.5gb": 1}, {"2g.10gb": 2, "1g.5gb": 3}, {"4g.20gb": 1}, {"1g.5gb": 7},
           {"3g.20gb": 2}, {"7g.40gb": 1}, {"2g.10gb": 1}],
    H100: [{}, {"3g.40gb": 1, "1g.10gb": 2}, {"1g.20gb": 2, "3g.40gb": 1}, {"2g.20gb": 3}, {"1g.10gb": 1}],
}
T0 = datetime(2026, 10, 1, tzinfo=UTC)


def layouts(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    cards = [("mig-a", f"n{i // 4}", f"u{i}", A100 if i < 12 else H100) for i in range(20)]
    cards.append(("mig-b", "n-empty", "u-empty", "A100-80GB"))
    rows = []
    for hour in range(72):
        ts = T0 + timedelta(hours=hour)
        for pool, node, uuid, model in cards:
            mixes = MIXES.get(model, [{}])
            mix = mixes[int(rng.integers(len(mixes)))] if hour % 5 == 0 or rng.random() < 0.3 else mixes[0]
            if not mix:
                rows.append((ts, pool, node, uuid, model, None, 0))
            rows += [(ts, pool, node, uuid, model, p, n) for p, n in mix.items()]
    frame = pl.DataFrame(rows, schema={"ts": pl.Datetime("us", "UTC"), "pool": pl.String, "node": pl.String,
                                       "uuid": pl.String, "model": pl.String, "profile": pl.String,
                                       "n": pl.Int64}, orient="row")
    return frame.sample(fraction=1.0, shuffle=True, seed=seed)


@pytest.mark.parametrize("smallest", [{A100: "1g.5gb", H100: "1g.10gb"}, {A100: "2g.10gb"}, {}],
                         ids=["both", "a100-only", "fallback"])
def test_rates_equal_the_loop(smallest: dict[str, str]) -> None:
    frame = layouts(len(smallest))
    new = fragmentation_rates(frame, smallest)
    old = reference.fragmentation_rates(frame, smallest)
    assert new.height > 100 and float(new["rate"].max()) > 0  # type: ignore[arg-type]
    assert new.schema == old.schema
    assert new.to_dicts() == old.to_dicts()
    assert "n-empty" not in new["node"].to_list()
