"""Which team a namespace is billed to, at the time of each billed row.

The collector stores the team it resolved in `namespaces.team`, and every change of a namespace's
team or labels in `namespace_history` with the moment it holds from (`warehouse.namespace_history`,
docs/decisions/0226). The bill resolves again with the same rule (`core.teams`: team label, then
`Settings.teams.fallback`), so a rule added after collection (or a namespace the inventory never
saw) still lands on a team without re-collecting. A stored team wins; what stays without a team
is billed as `unattributed`.

Each row is billed to the team in force at its moment (`with_teams`; the bill's rows are days, so
the team in force at the day's start); a namespace's first row stands for the time before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.teams import fallback_team, resolve_team, stored_labels
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.teams import namespace_history_rows

EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
"""Where a namespace's first row starts: it stands for the time before it (nothing earlier is known)."""
_SCHEMA: dict[str, pl.DataType] = {
    "namespace": pl.String(), "valid_from": pl.Datetime("us", "UTC"), "team": pl.String()}


def team_history(wh: Warehouse, settings: Settings, window: Window | None = None) -> pl.DataFrame:
    """`namespace`, `valid_from`, `team` (None when unattributed): each team of each stored
    namespace from the moment it holds, oldest first; with `window`, only the rows in force
    somewhere in it. A relabel that keeps the team adds no row."""
    rows = namespace_history_rows(wh)
    teams = [
        row["team"] or resolve_team(row["namespace"], stored_labels(row["labels"]), settings.teams)
        or fallback_team(row["namespace"], settings.teams)
        for row in rows.iter_rows(named=True)
    ]
    frame = pl.DataFrame({"namespace": rows["namespace"], "valid_from": rows["valid_from"], "team": teams},
                         schema_overrides={"namespace": pl.String, "team": pl.String})
    frame = frame.with_columns(pl.col("valid_from").cast(pl.Datetime("us", "UTC")))
    first = pl.col("namespace") != pl.col("namespace").shift(1)
    frame = frame.with_columns(  # a first row stands for the time before it
        pl.when(first.fill_null(True)).then(pl.lit(EARLIEST)).otherwise("valid_from").alias("valid_from")
    ).filter(  # only a change of team starts a new row
        first.fill_null(True) | (pl.col("team").ne_missing(pl.col("team").shift(1)))
    )
    if window is not None:
        until = pl.col("valid_from").shift(-1).over("namespace")
        frame = frame.filter(pl.col("valid_from") < window.end, until.is_null() | (until > window.start))
    return frame.select(pl.col(c).cast(t) for c, t in _SCHEMA.items())


def team_changes(history: pl.DataFrame, window: Window) -> list[datetime]:
    """The day starts inside `window` from which some namespace is billed to another team (the
    lines grain cuts its periods there, as at a price change: one team per namespace and period)."""
    later = history.filter(pl.col("valid_from") > window.start, pl.col("valid_from") < window.end)
    days = {datetime.combine(v.date(), datetime.min.time(), tzinfo=UTC) for v in later["valid_from"]}
    return sorted(d for d in days if window.start < d)


def with_teams(
    frame: pl.DataFrame, history: pl.DataFrame, settings: Settings, at: pl.Expr
) -> pl.DataFrame:
    """`frame` with `team`: its `namespace`'s team in force at `at` (a datetime expression over
    `frame`); a namespace the history lacks gets `Settings.teams.fallback`; None stays None."""
    known = set(history["namespace"].to_list())
    missing = sorted(set(frame["namespace"].drop_nulls().unique().to_list()) - known)
    extra = pl.DataFrame({"namespace": missing, "valid_from": [EARLIEST] * len(missing),
                          "team": [fallback_team(ns, settings.teams) for ns in missing]}, schema=_SCHEMA)
    teams = pl.concat([history, extra]) if missing else history
    if not teams["namespace"].is_duplicated().any():  # no relabel in the window: one team each
        return frame.join(teams.drop("valid_from"), on="namespace", how="left")
    keyed = frame.with_row_index("_row").with_columns(at.cast(pl.Datetime("us", "UTC")).alias("_at"))
    joined = keyed.sort("_at").join_asof(
        teams.sort("valid_from"), left_on="_at", right_on="valid_from", by="namespace", strategy="backward",
        check_sortedness=False,  # sorted by `_at` across all groups, so within each too
    )
    return joined.sort("_row").drop("_row", "_at", "valid_from")


def with_teams_at(wh: Warehouse, settings: Settings, frame: pl.DataFrame, at: datetime) -> pl.DataFrame:
    """`frame` with `team`: each `namespace`'s team in force at the one moment `at` (a page
    showing who held what at a past moment names the team of that moment, as the bill does)."""
    return with_teams(frame, team_history(wh, settings), settings, pl.lit(at))


def day_start(column: str = "day") -> pl.Expr:
    """A `Date` column as the moment its day starts (UTC), the `at` of a daily row."""
    return pl.col(column).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")


def teams_between(
    cuts: Sequence[datetime] | None, history: pl.DataFrame, window: Window
) -> list[datetime] | None:
    """`cuts` (price changes) with the team changes of `history` inside `window` added."""
    if cuts is None:
        return None
    return sorted(set(cuts) | set(team_changes(history, window)))
