"""Issue 31 item 7: late samples re-roll the settled hours they change, before anything freezes them.

Cases (a simulated fleet loaded chunk by chunk as `collect` loads it, the roll-up advanced after
each chunk by `collect_rollup.Roller`, the class `collect` uses):
- one card's samples of one hour arrive only after that hour was rolled up and settled (a gap
  re-read, an explicit `--start` below the watermark): the next collect rolls the hour up again,
  so the roll-up bills what the raw samples bill (today: the roll-up keeps the hour without them);
- the same late hour, then `compact` removing its raw samples: compaction rolls it up again first,
  so the roll-up it leaves bills what the raw samples billed (today: it freezes the stale hour);
- the late load leaves its mark in the load's own transaction, and a re-roll clears it.
The oracle is the held time of the card in the late hour counted from the samples in the test
(one-minute samples of a held card: one minute each), and the raw bill (decision 0022: both
paths price the same frame).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.usage.rollup import compact_raw_samples
from gpuledger.collect_rollup import Roller, RollupPlan
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.store import ROLLUP_DIRTY

W = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC))
LATE = Window(datetime(2026, 11, 1, 9, tzinfo=UTC), datetime(2026, 11, 1, 10, tzinfo=UTC))
SETTINGS = Settings()


Chunk = tuple[dict[str, pl.DataFrame], Window | None]
"""A batch of frames and the window it owns (None: the inventory, loaded first)."""


@pytest.fixture(scope="module")
def chunks() -> list[Chunk]:
    sim = Simulation(FleetSpec.default(gpus=8), W, seed=5)
    first: list[Chunk] = [(dict(sim.inventory()), None)]
    return first + [(frames, sub) for sub, frames in sim.batches(timedelta(hours=6))]


def _held_card(frames: list[dict[str, pl.DataFrame]]) -> str:
    """A card whose samples in LATE all name a pod (held the whole hour)."""
    samples = pl.concat([f["gpu_samples"] for f in frames if "gpu_samples" in f])
    hour = samples.filter((pl.col("ts") >= LATE.start) & (pl.col("ts") < LATE.end))
    held = hour.group_by("uuid").agg(pl.col("pod").is_not_null().all().alias("held"), pl.len().alias("n"))
    return held.filter(pl.col("held") & (pl.col("n") >= 55)).sort("uuid")["uuid"][0]


def _collect(path: Path, chunks: list[Chunk], card: str) -> pl.DataFrame:
    """Load every chunk as collect does, rolling up after each; `card`'s LATE samples held back
    (returned)."""
    held_back = []
    with Warehouse.open(path) as wh:
        roller = Roller(wh, SETTINGS, RollupPlan(), W.start)
        for frames, sub in chunks:
            if sub is None:
                wh.load(LoadBatch(frames=frames))
                continue
            samples = frames["gpu_samples"]
            late = (pl.col("uuid") == card) & (pl.col("ts") >= LATE.start) & (pl.col("ts") < LATE.end)
            held_back.append(samples.filter(late))
            wh.load(LoadBatch({**frames, "gpu_samples": samples.filter(~late)}, window=sub))
            roller.advance(sub.end, W.end)
    return pl.concat(held_back)


def _late_load(path: Path, chunks: list[Chunk], late_rows: pl.DataFrame) -> None:
    """The late hour loaded again, whole (a load owns its window), as a re-read chunk is."""
    whole = pl.concat([f["gpu_samples"] for f, sub in chunks if sub is not None])
    hour = whole.filter((pl.col("ts") >= LATE.start) & (pl.col("ts") < LATE.end))
    assert late_rows.height > 0 and hour.height > late_rows.height
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch({"gpu_samples": hour}, window=LATE))


def _stored_held(wh: Warehouse, card: str) -> float:
    return float(wh.scalar("SELECT sum(held_hours) FROM card_hours_hourly WHERE uuid = ? AND ts = ?",
                           [card, LATE.start]) or 0.0)


def _team_costs(wh: Warehouse, source: str) -> dict[str, float]:
    bill = compute_bill(wh, W, SETTINGS, by=("team",), source=source)  # type: ignore[arg-type]
    return {r["team"]: round(r["cost"], 6) for r in bill.lines.to_dicts()}


def test_next_collect_rolls_late_hour_up_again(chunks: list[Chunk], tmp_path: Path) -> None:
    card = _held_card([f for f, sub in chunks if sub is not None])
    path = tmp_path / "w.duckdb"
    late_rows = _collect(path, chunks, card)
    with Warehouse.open(path, read_only=True) as wh:
        before = _stored_held(wh, card)
    assert before < 1.0 - late_rows.height / 60 + 0.02  # the hour rolled up without them
    _late_load(path, chunks, late_rows)
    with Warehouse.open(path) as wh:
        assert wh.watermark(ROLLUP_DIRTY) == LATE.start  # marked in the load's transaction
        Roller(wh, SETTINGS, RollupPlan(), W.start).advance(W.end, W.end)  # the next collect
        assert wh.watermark(ROLLUP_DIRTY) is None
        assert _stored_held(wh, card) == pytest.approx(1.0, abs=1e-9)  # held the whole hour
        assert _team_costs(wh, "rollup") == _team_costs(wh, "raw")


def test_compact_rolls_late_hour_up_before_removing_it(chunks: list[Chunk], tmp_path: Path) -> None:
    card = _held_card([f for f, sub in chunks if sub is not None])
    path = tmp_path / "w.duckdb"
    _late_load(path, chunks, _collect(path, chunks, card))
    with Warehouse.open(path) as wh:
        raw = _team_costs(wh, "raw")
        stats = compact_raw_samples(wh, SETTINGS.model_copy(
            update={"retention": SETTINGS.retention.model_copy(update={"raw_days": 1})}), datetime(2026, 11, 3, tzinfo=UTC))
        assert stats.removed_rows > 0
        assert wh.watermark(ROLLUP_DIRTY) is None
        assert _stored_held(wh, card) == pytest.approx(1.0, abs=1e-9)
        assert _team_costs(wh, "rollup") == raw


def test_provisional_hours_follow_the_samples_past_them(chunks: list[Chunk], tmp_path: Path) -> None:
    """Collects ending 10, then 25, then 50 minutes into an hour (a CronJob's ragged ends): after
    each, the hour before the end equals the same hour computed from the raw samples stored
    then. Main rolled that hour up again only when another hour became exact, so it kept what
    the first of those collects saw; this fleet's idle runs never cross those hours so that the
    margin changes them, so the case passes on main too (it guards rule 7, it does not show
    the defect)."""
    from gpuledger.analytics.usage.hourly import hourly_usage
    from gpuledger.core.rules import Rules

    whole = pl.concat([f["gpu_samples"] for f, sub in chunks if sub is not None])
    inventory = chunks[0][0]
    path = tmp_path / "w.duckdb"
    mismatches = []
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=inventory))
        others = {k: v for f, sub in chunks if sub is not None for k, v in f.items() if k != "gpu_samples"}
        loaded = W.start
        for hour in (3, 7, 11, 15):
            for minutes in (10, 25, 50):
                end = W.start + timedelta(hours=hour, minutes=minutes)
                part = Window(loaded, end)
                rows = whole.filter((pl.col("ts") >= part.start) & (pl.col("ts") < part.end))
                wh.load(LoadBatch({"gpu_samples": rows}, window=part))
                loaded = end
                Roller(wh, SETTINGS, RollupPlan(), W.start).advance(end, end)  # one collect run
                last = Window(end.replace(minute=0) - timedelta(hours=1), end.replace(minute=0))
                raw = float(hourly_usage(wh, last, Rules.of(SETTINGS))["idle_card_hours"].sum())
                stored = float(wh.scalar("SELECT sum(idle_card_hours) FROM card_hours_hourly WHERE ts = ?",
                                         [last.start]) or 0.0)
                if abs(raw - stored) > 1e-9:
                    mismatches.append((end, raw, stored))
    assert others  # pods and queues are not needed: the idle time is the samples'
    assert mismatches == []
