"""Field mode: the damage real fleets do to telemetry, and the changes they make to truth.

The simulator's default output is a perfect one-minute grid. Real Prometheus data is not:
scrapes are jittered and missed, single fields drop out for a few minutes, old dcgm-exporters
lack GR_ENGINE_ACTIVE, exporters restart, HA pairs duplicate every series, labels are renamed,
cards get replaced, MIG layouts change, nodes come and go, clocks drift, and a few samples are
NaN or negative. `FieldEffects` switches each of these on its own so a test can show which
effect breaks which number; every effect is deterministic under the simulation's seed.

Effects fall into two kinds (see `TRUTH_EFFECTS`): those that change what really happened
(pod restarts, card replacements, MIG layout changes, node churn) change the ground truth;
the rest only damage telemetry. Of those, the ones that drop or alter activity readings
(`READING_EFFECTS`: missed scrapes, per-series gaps, util-only nodes, exporter restarts,
NaN/negative samples) move the idle truth, never the card-hours: idle is judged on the
readings the exporter emitted under the documented sampling model (issue 13;
`simulator.field_truth`), since no observer can know a minute was idle when its reading is
gone. Jitter, clock skew, HA replicas and label renames leave the truth exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class FieldEffects:
    """Which field effects are on, and how strong; all off by default (byte-identical output)."""

    jitter_s: float = 0.0
    """Each scrape's timestamp is moved by up to ± this many seconds (uniform)."""
    missed_scrapes: float = 0.0
    """Fraction of (node, scrape) pairs with no sample at all."""
    series_gaps: float = 0.0
    """Fraction of series-hours with one 2-3 minute gap in one field (others present)."""
    util_only_nodes: int = 0
    """Nodes whose exporter reports DCGM_FI_DEV_GPU_UTIL but no GR_ENGINE_ACTIVE (old dcgm)."""
    exporter_restarts: int = 0
    """Exporter restarts: a hole in every series of a node, then values (counters) start over."""
    ha_replicas: bool = False
    """Two Prometheus replicas: every series twice, with `replica="a"` and `replica="b"`."""
    label_renames: bool = False
    """At the window's middle, `Hostname` becomes `hostname` and `pod` becomes `exported_pod`."""
    pod_restarts: int = 0
    """Pods restarted on the same card: a new pod name from the restart on (changes truth)."""
    card_replacements: int = 0
    """Cards replaced: a new UUID in the same slot from the replacement on (changes truth)."""
    mig_layout_changes: int = 0
    """MIG nodes whose layout changes mid-hour (changes truth)."""
    node_churn: int = 0
    """Nodes that join late or leave early (changes truth: no card-hours while absent)."""
    clock_skew_s: float = 0.0
    """Each node's clock is off by a fixed offset of up to ± this many seconds."""
    bad_samples: float = 0.0
    """Fraction of samples that are NaN or negative."""

    def __post_init__(self) -> None:
        for name in ("missed_scrapes", "series_gaps", "bad_samples"):
            if not 0 <= getattr(self, name) <= 0.5:
                raise ValueError(f"{name}: expected a fraction in [0, 0.5]")
        for name in ("jitter_s", "clock_skew_s"):
            if not 0 <= getattr(self, name) <= 30:
                raise ValueError(f"{name}: expected seconds in [0, 30] (under half a scrape)")
        for name in ("util_only_nodes", "exporter_restarts", "pod_restarts",
                     "card_replacements", "mig_layout_changes", "node_churn"):
            if not 0 <= getattr(self, name) <= 1000:
                raise ValueError(f"{name}: expected a count in [0, 1000]")

    @classmethod
    def none(cls) -> FieldEffects:
        """Every effect off: the simulator's clean output."""
        return cls()

    @classmethod
    def all(cls) -> FieldEffects:
        """Every effect at a realistic level (what a production fleet shows in a week)."""
        return cls(
            jitter_s=10.0, missed_scrapes=0.02, series_gaps=0.05, util_only_nodes=1,
            exporter_restarts=2, ha_replicas=True, label_renames=True, pod_restarts=2,
            card_replacements=1, mig_layout_changes=1, node_churn=2, clock_skew_s=3.0,
            bad_samples=0.001,
        )

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The effect names, in declaration order (the keys of the YAML `field:` section)."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def only(cls, name: str) -> FieldEffects:
        """Just the effect `name`, at its `all()` level."""
        from gpuledger.core.errors import InputError

        if name not in cls.names():
            raise InputError(f"field effect {name!r}: expected one of {', '.join(cls.names())}")
        return replace(cls(), **{name: getattr(cls.all(), name)})

    @property
    def any(self) -> bool:
        """True when at least one effect is on."""
        return self != FieldEffects()

    @property
    def changes_truth(self) -> bool:
        """True when an effect that changes what really happened is on."""
        return any(getattr(self, n) != getattr(FieldEffects(), n) for n in TRUTH_EFFECTS)

    @property
    def drops_readings(self) -> bool:
        """True when an effect that drops or alters activity readings is on (idle truth moves)."""
        return any(getattr(self, n) != getattr(FieldEffects(), n) for n in READING_EFFECTS)

    def as_dict(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in self.names()}


TRUTH_EFFECTS = ("pod_restarts", "card_replacements", "mig_layout_changes", "node_churn")
"""Effects that change the ground truth; every other effect only damages telemetry."""
READING_EFFECTS = ("missed_scrapes", "series_gaps", "util_only_nodes", "exporter_restarts",
                   "bad_samples")
"""Telemetry effects that drop or alter activity readings: the idle truth follows the readings."""
