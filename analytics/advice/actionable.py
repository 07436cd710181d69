"""Which advice rows a person should read: the one home of the actionable floor.

Why: the autoscaling kind alone returns ~100 rows of "HPA 1-1, 0.00" on the demo fleet (serving
Deployments already sized right); listed, they buried the advice worth money on the Fleet page,
in `recommend --kind` and in the statements (issue 32). A row is *actionable* when it saves at
least `advice.min_monthly_saving` a month, or when its kind names a risk to act on whatever it
saves (`RISK_KINDS`: a pool past the knee of its overcommit curve loses work, and fixing it may
cost money), or when its saving is unknown (`None`: an unpriced row cannot be said to save
too little). Actionable rows are ranked by money, largest first; the rest are counted per kind
("94 Deployments already right-sized") with their summed saving.

One rule for the figure a surface states beside the listed rows ("12 worth acting on, together
$X/month", `Shown.total`): the sum of the listed rows' savings, never of the counted ones (a
catalog row that would cost money is no action anyone takes; summed in, it hid money from the
rows that are: docs/decisions/0213). A risk row's saving is unknown (`None`: fixing a pool past
its knee may cost money, the advice cannot price it), never 0: it is listed, shown "not priced"
and left out of the sum. One order for every surface (`rank_key`: by saving, unknown last, then a
full tiebreak), so `recommend --top N` gives the same rows in its table and its JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuledger.core.config import Settings

RISK_KINDS = frozenset({"overcommit_past_knee"})
"""Row kinds listed whatever they save: acting on them removes a risk, not a cost."""
QUIET: Mapping[str, tuple[str, str]] = {
    "autoscaling": ("Deployment already right-sized", "Deployments already right-sized"),
    "overcommit_ratio": ("shared pool already at its best ratio", "shared pools already at their best ratio"),
    "profile_catalog": ("MIG model whose catalog saves too little",
                        "MIG models whose catalog saves too little"),
    "dra_fragmentation": ("DRA node whose rebuild saves too little",
                          "DRA nodes whose rebuild saves too little"),
    "scale_down_when_idle": ("workload idle too little to scale down",
                             "workloads idle too little to scale down"),
    "reclaim_idle_notebook": ("notebook idle too little to reclaim", "notebooks idle too little to reclaim"),
    "whole_to_mig": ("workload whose move to MIG saves too little",
                     "workloads whose move to MIG saves too little"),
    "rightsize_mig": ("workload whose MIG right-sizing saves too little",
                      "workloads whose MIG right-sizing saves too little"),
}
"""How the counted rows of a row kind read, one and many ("1 MIG model whose catalog saves too
little", "94 Deployments already right-sized"); a kind not named here reads "<kind> row(s) under
the floor"."""


def quiet_label(kind: str, count: int) -> str:
    """The counted rows' label for `count` rows: singular for one (issue 32: "1 MIG models")."""
    single, many = QUIET.get(kind, (f"{kind} row under the floor", f"{kind} rows under the floor"))
    return single if count == 1 else many


@dataclass(frozen=True)
class Quiet:
    """The rows of one kind under the floor: how many, what they save together, how they read."""

    kind: str
    count: int
    monthly_saving: float
    label: str

    def line(self, currency: str) -> str:
        """One line for a person: "94 Deployments already right-sized (USD 0.40/month together)";
        a sum that rounds to nothing is left out ("40 Deployments already right-sized", not
        "(USD 0.00/month together)"); a negative sum says what it means (a catalog that would
        cost more than it saves)."""
        if abs(self.monthly_saving) < 0.005:
            return f"{self.count:,} {self.label}"
        one = self.count == 1
        costly = self.monthly_saving < -0.005
        cost = f"; acting on {'it' if one else 'them'} would cost money" if costly else ""
        together = "" if one else " together"
        return f"{self.count:,} {self.label} ({currency} {self.monthly_saving:,.2f}/month{together}{cost})"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "monthly_saving": round(self.monthly_saving, 2),
                "label": self.label}


@dataclass(frozen=True)
class Shown:
    """Advice rows split for reading: `rows` listed (by saving, largest first), `quiet` counted."""

    rows: list[dict[str, Any]]
    quiet: list[Quiet]

    @property
    def hidden(self) -> int:
        return sum(q.count for q in self.quiet)

    @property
    def total(self) -> float:
        """What acting on the listed rows saves a month: their known savings summed (module
        docstring; the counted rows and the unpriced risks are not in it)."""
        return sum(saving(r) for r in self.rows)


def saving(row: Mapping[str, Any]) -> float:
    """A row's monthly saving as a float for sums (rows carry it as a number or its text); an
    unknown saving (`None`, a risk row) adds nothing."""
    value = row.get("monthly_saving")
    return float(str(value)) if value is not None else 0.0


def priced(row: Mapping[str, Any]) -> bool:
    """Whether the row's saving is known (a risk row's is not: `None`)."""
    return row.get("monthly_saving") is not None


UNPRICED: Mapping[str, tuple[str, str, str]] = {
    "autoscaling": ("batch-size hint", "batch-size hints", "a larger batch serves more requests per replica; "
                    "the replay prices replicas, not batch sizes"),
    "overcommit_past_knee": ("risk", "risks", "a pool past its overcommit knee loses work; shedding "
                             "replicas has no saving to show"),
    "dra_profile": ("DRA device class", "DRA device classes", "which DeviceClasses to offer DRA MIG "
                    "claims; offering one has no saving to price"),
    "fragmentation_rebuild": ("MIG rebuild", "MIG rebuilds",
                              "`gpuledger optimize mig` prices a rebuild by the GPUs it frees"),
}
"""Per row kind whose saving is unknown: how one and many read, and why there is no price."""


def unpriced_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per kind of the listed rows whose saving is unknown (`None`, shown "-" in a
    table): how many, and why they carry no price (docs/decisions/0213, 0228)."""
    counts: dict[str, int] = {}
    for row in rows:
        if not priced(row):
            counts[str(row.get("kind"))] = counts.get(str(row.get("kind")), 0) + 1
    out = []
    for kind, n in sorted(counts.items()):
        one, many, why = UNPRICED.get(kind, (f"{kind} row", f"{kind} rows", "no price is known"))
        out.append(f"{n:,} {one if n == 1 else many} listed not priced (saving \"-\"): {why}")
    return out


def is_actionable(row: Mapping[str, Any], floor: float) -> bool:
    """A risk, a saving at the floor or above, or an unpriced row: what it saves is unknown, so
    it cannot be said to save too little (a `dra_profile` row, which DeviceClasses to offer)."""
    return str(row.get("kind")) in RISK_KINDS or not priced(row) or saving(row) >= floor


TIEBREAK = ("kind", "scope", "team", "namespace", "workload")
"""Fields ordering rows of equal saving (advice rows have kind and scope, workload rows team,
namespace and workload); the whole row's text breaks what they leave tied."""


RANK_DECIMALS = 6
"""The decimals savings are compared at: those the JSON publishes (`exports._plain`). Two
rows whose savings agree there are equal to every reader, and the tiebreak orders them, not a
difference in the 8th decimal left by two ways of computing the same amount (issue 32)."""


def rank_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The one order of advice and recommendation rows: known savings first, largest first
    (at `RANK_DECIMALS`), then `TIEBREAK`, then the row's text: no two distinct rows tie, so every
    surface cutting the top N (table, JSON, CSV, page) shows the same rows in the same order."""
    import json

    return (not priced(row), -round(saving(row), RANK_DECIMALS), *(str(row.get(k) or "") for k in TIEBREAK),
            json.dumps(dict(row), sort_keys=True, default=str))


def floor_of(settings: Settings, *, every: bool = False) -> float:
    """The floor a surface splits at: `advice.min_monthly_saving`, or 0 when the reader asked
    for every row (`recommend --all`, `?all=true`)."""
    return 0.0 if every else settings.advice.min_monthly_saving


def split(rows: Iterable[Mapping[str, Any]], floor: float) -> Shown:
    """`rows` ranked by `rank_key`, those under `floor` (and not a risk) counted per kind
    instead. `floor` 0 lists every row."""
    listed: list[dict[str, Any]] = []
    counted: dict[str, list[float]] = {}
    for row in rows:
        if floor <= 0 or is_actionable(row, floor):
            listed.append(dict(row))
        else:
            counted.setdefault(str(row.get("kind")), []).append(saving(row))
    listed.sort(key=rank_key)
    quiet = [Quiet(kind, len(s), sum(s), quiet_label(kind, len(s)))
             for kind, s in sorted(counted.items())]
    return Shown(listed, quiet)


def quiet_lines(quiet: Sequence[Quiet], currency: str) -> list[str]:
    return [q.line(currency) for q in quiet]
