"""The field harness (shared by tests/field and bench/bench_field.py): a simulated fleet with field effects, through a real metrics engine
(Prometheus from a promtool backfill, or VictoriaMetrics from its import API), collected into a
real DuckDB warehouse by the collect pipeline, billed, and set beside the simulator's truth.

Each run starts its own engine and stops it as soon as the warehouse is collected, so at most
one engine holds memory at a time. The expected counts of bad and duplicate samples are computed here from
the OpenMetrics file itself (what the collector's centred one-step `last_over_time` read sees in each
minute), never from the collector's code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.collect_pipeline import collect_window
from gpuledger.collectors.quality import Quality
from gpuledger.core.config import Settings
from gpuledger.core.frames import DCGM_FIELDS
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.field import FieldEffects
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.simulator.hami import SCHEDULER_FAMILIES
from gpuledger.warehouse import Warehouse
from tools.metrics_servers import ServerPool

GPUS = 40
"""The default fleet's smallest size with every pool (5 nodes of 8: one per pool)."""
HAMI_GPUS = 16
"""The HAMi-only fleet: 2 nodes of 8."""
WINDOW = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 1, 12, tzinfo=UTC))
SEED = 7
SETTINGS = Settings()
FAMILIES = tuple(DCGM_FIELDS)
"""Source `api`: dcgm-exporter series (and HAMi's scheduler series, `HAMI_FAMILIES`) go through
the engine; the Kubernetes facts come through the collect pipeline's snapshot hook, as the
Kubernetes collector gives them. Source `prometheus`: every family the simulator writes goes
through the engine (kube-state-metrics and HAMi's series included) and there is no snapshot."""
HAMI_FAMILIES = tuple(name for name, _ in SCHEDULER_FAMILIES)
SOURCES = ("api", "prometheus")
FLEETS = ("default", "hami")
"""`default`: every plane (`FleetSpec.default`); `hami`: only HAMi vGPU nodes (`hami_fleet`).
`bench/bench_planes.py` also runs `whole`, `mig` and `timeslice`: the default fleet's pools of
that sharing mode alone (`plane_fleet`)."""
PLANE_SHARING = {"whole": "exclusive", "mig": "mig", "timeslice": "timeslice", "hami": "vgpu"}


class Snapshot:
    """What the Kubernetes collector would load: the simulator's inventory frames."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def snapshot(self) -> Mapping[str, pl.DataFrame]:
        inventory = self.sim.inventory()
        return {k: inventory[k] for k in ("gpus", "nodes", "namespaces", "pods", "mig_instances",
                                          "vgpu_allocations")}


def hami_fleet(gpus: int, effects: FieldEffects) -> FleetSpec:
    """The default fleet's HAMi pool alone, on `gpus` cards (nodes of 8)."""
    return plane_fleet("hami", gpus, effects)


def plane_fleet(plane: str, gpus: int, effects: FieldEffects) -> FleetSpec:
    """The default fleet's pools of one sharing mode (`PLANE_SHARING`) alone, on `gpus` cards
    (nodes of 8, shared out over those pools in turn)."""
    pools = [p for p in FleetSpec.default(gpus=GPUS).pools if p.sharing == PLANE_SHARING[plane]]
    nodes = [gpus // 8 // len(pools) + (i < gpus // 8 % len(pools)) for i in range(len(pools))]
    return FleetSpec.parse({"gpus_per_node": 8, "field": effects,
                            "pools": [{**p.model_dump(), "nodes": n} for p, n in zip(pools, nodes, strict=True) if n]},
                           source=f"{plane} fleet")


@dataclass(frozen=True)
class FieldRun:
    """One fleet through one engine: the bill, the truth, what collect reported and stored."""

    name: str
    engine: str
    source: str
    """`api` (snapshot + engine) or `prometheus` (the engine alone)."""
    fleet: str
    lines: pl.DataFrame
    """Bill lines: team, card_hours, idle_card_hours, activity_unknown_card_hours, cost
    (unattributed/unallocated included)."""
    fleet_cost: float
    vgpu: pl.DataFrame
    """Per team holding HAMi cards in the truth: `card_hours` (truth) and `card_hours_bill` on
    `vgpu` cards."""
    truth: pl.DataFrame
    """`Simulation.truth_by_team()` with the null team named `unattributed`."""
    quality: Quality
    stored: dict[str, int]
    """Non-null values per gpu_samples column in the warehouse."""
    reads: pl.DataFrame
    """Expected per field: reads (every replica), nan, negative, ha_duplicate (from the file)."""
    fleet_card_hours: float
    capacity_truth: float
    """The truth's card-hours of capacity: held, unallocated and stranded, cards present only."""
    gpu_count: int
    window: Window
    named: tuple[str, ...] = ()
    """What the bill names: its warnings, the namespaces it could not attribute, the nodes
    whose replica count it could not read."""

    def team_errors(self) -> pl.DataFrame:
        """Per team: truth, billed and relative error of card-hours and idle card-hours."""
        joined = self.truth.join(self.lines, on="team", how="left", suffix="_bill")
        return joined.with_columns(
            (pl.col("card_hours_bill") / pl.col("card_hours") - 1).alias("card_hours_err"),
            ((pl.col("idle_card_hours_bill") - pl.col("idle_card_hours"))
             / pl.col("idle_card_hours")).alias("idle_err"),
        )


def expected_reads(openmetrics: Path, window: Window, *, nan_is_stale: bool = False) -> pl.DataFrame:
    """What a one-minute `last_over_time` read of each dcgm series returns, counted per field.

    Each evaluation instant t of the window's grid sees the newest sample in (t - 60 s, t]; a
    series copy with a `replica` label is a second read of the same series. Counted: all reads,
    the NaN ones, the negative ones, and the copies beyond the first (`ha_duplicate`).
    `nan_is_stale`: the engine never returns a NaN sample to a query, as if it were a
    staleness marker (measured on Debian's victoria-metrics 1.79: NaN samples sent to
    `/api/v1/import/prometheus` are never read back), so NaN samples are no reads there."""
    step_ms = int(window.step.total_seconds() * 1000)
    first = int(window.start.timestamp() * 1000) // step_ms
    last = int(window.end.timestamp() * 1000) // step_ms - 1
    raw = pl.read_csv(openmetrics, has_header=False, separator="\x01", new_columns=["line"],
                      quote_char=None, comment_prefix="#", infer_schema=False)
    parts = raw.select(pl.col("line").str.extract_groups(
        r"^(DCGM_FI_[A-Z_]+)\{(.*)\} (\S+) (\d+)(?:\.(\d{3}))?$"
    ).alias("g")).unnest("g")
    parts.columns = ["metric", "labels", "value", "sec", "frac"]
    frame = parts.filter(pl.col("metric").is_not_null()).select(
        pl.col("metric").replace_strict(DCGM_FIELDS).alias("field"),
        pl.col("labels").str.replace(r'replica="[^"]*",?', "").alias("series"),
        pl.col("labels").str.extract(r'replica="([^"]*)"').fill_null("").alias("replica"),
        pl.col("value").cast(pl.Float64),
        (pl.col("sec").cast(pl.Int64) * 1000 + pl.col("frac").fill_null("0").cast(pl.Int64)).alias("ms"),
    ).with_columns(((pl.col("ms") + step_ms // 2 - 1) // step_ms).alias("m"))
    frame = frame.filter(pl.col("m").is_between(first, last))
    if nan_is_stale:
        frame = frame.filter(~pl.col("value").is_nan())
    reads = frame.sort("ms").group_by("field", "series", "replica", "m").agg(pl.col("value").last())
    copies = reads.group_by("field", "series", "m").agg(
        pl.len().alias("copies"), pl.col("value").first())
    return copies.group_by("field").agg(
        pl.col("copies").sum().alias("reads"),
        pl.col("value").is_nan().sum().alias("nan"),
        (pl.col("value") < 0).sum().alias("negative"),
        (pl.col("copies") - 1).sum().alias("ha_duplicate"),
    ).sort("field")


def field_run(name: str, effects: FieldEffects, engine: str, root: Path, *,
              gpus: int = GPUS, window: Window = WINDOW, source: str = "api",
              fleet: str = "default") -> FieldRun:
    """Simulate, write, serve, collect, bill (see the module docstring and `FAMILIES`)."""
    spec = FleetSpec.default(gpus=gpus, field=effects) if fleet == "default" else plane_fleet(fleet, gpus, effects)
    sim = Simulation(spec, window, seed=SEED)
    path = root / "fleet.om"
    sim.write_openmetrics(path, families=(*FAMILIES, *HAMI_FAMILIES) if source == "api" else None)
    reads = expected_reads(path, window, nan_is_stale=engine == "victoriametrics")
    pool = ServerPool(root)
    try:
        server = pool.prometheus(path) if engine == "prometheus" else pool.victoriametrics(path)
        with Warehouse.open(root / "w.duckdb") as wh:
            report = collect_window(wh, SETTINGS, server.url, window,
                                    now=lambda: window.end + timedelta(minutes=5),
                                    kubernetes=Snapshot(sim) if source == "api" else None)
            pool.stop_all()
            bill = compute_bill(wh, window, SETTINGS)
            vgpu_bill = bill.detail.filter(pl.col("sharing_mode") == "vgpu").group_by("team").agg(
                pl.sum("card_hours").alias("card_hours_bill"))
            counts = wh.query("SELECT " + ", ".join(
                f"count({c}) AS {c}" for c in DCGM_FIELDS.values()) + " FROM gpu_samples")
    finally:
        pool.stop_all()
        path.unlink(missing_ok=True)
    assert report.quality is not None
    truth = sim.truth_by_team().with_columns(pl.col("team").fill_null("unattributed"))
    ground = sim.ground_truth().filter(
        (pl.col("allocation_state") == "allocated") & (pl.col("sharing_mode") == "vgpu"))
    vgpu = ground.with_columns(pl.col("team").fill_null("unattributed")).group_by("team").agg(
        pl.sum("card_hours")).join(vgpu_bill, on="team", how="left").sort("team")
    return FieldRun(
        name=name, engine=engine, source=source, fleet=fleet,
        lines=bill.lines.select("team", "card_hours", "idle_card_hours", "activity_unknown_card_hours", "cost"),
        fleet_cost=float(bill.fleet_cost), vgpu=vgpu,
        truth=truth, quality=report.quality, stored=counts.row(0, named=True), reads=reads,
        fleet_card_hours=float(bill.fleet_card_hours),
        capacity_truth=float(sim.ground_truth()["card_hours"].sum()), gpu_count=sim.gpu_count, window=window,
        named=(*bill.warnings, *(f"unattributed namespace {n}" for n in bill.unattributed_namespaces),
               *(f"replicas unknown on node {n}" for n in bill.replicas_unknown_nodes)),
    )




def effects(name: str) -> FieldEffects:
    """`none`, `all`, or one effect's name (at its `all()` level)."""
    if name == "none":
        return FieldEffects.none()
    if name == "all":
        return FieldEffects.all()
    return FieldEffects.only(name)


def hours(window: Window) -> float:
    return (window.end - window.start).total_seconds() / 3600
