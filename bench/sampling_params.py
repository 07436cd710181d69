"""The parameters of the frozen SQL pass (`bench.sampling_sql_before`) from today's typed rules.

The SQL statement takes one dict keyed `$lo`, `$hi` (the read window), `$ws`, `$we` (the clip
window) and the rules by short names; the product passes a `Window` and
`core.rules.SamplingRules` instead (docs/decisions/0147), so the differential checks and benches
that run the old statement build its dict here.
"""

from __future__ import annotations

from typing import Any

from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import Window

_US = 1_000_000


def params(window: Window, rules: SamplingRules) -> dict[str, Any]:
    """The old statement's parameters for `window` under `rules`."""
    return {
        "lo": window.start - rules.margin,
        "hi": window.end + rules.margin,
        "ws": int(window.start.timestamp() * _US),
        "we": int(window.end.timestamp() * _US),
        "tol": rules.gap_tolerance_us,
        "stale": rules.staleness_us,
        "fallback": rules.fallback_spacing_us,
        "thr": rules.idle_threshold,
        "min_idle": rules.idle_min_us,
        "held_fb": rules.held_fb_mib,
    }
