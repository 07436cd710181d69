"""The DRA plane's two advice kinds: `dra-fragmentation` and `dra-profiles`.

Why advice kinds and not a plan: on a DRA node with dynamic MIG the driver creates each claim's
MIG device when the claim is prepared (docs/decisions/0087), so there is no layout to write.
What an operator can act on is which cards are fragmented (free memory slices that cannot hold
the profile their count would allow) and which DeviceClasses claim templates should offer. The
analysis lives in `analytics.devices.dra_plan`; this module only turns it into the rows every
advice kind shares (`analytics.advice.run.COLUMNS`) and a JSON evidence document, and
`analytics.advice.run` registers the two kinds (prices and the month factor passed in, so this
module needs nothing from the registry).

Fragmentation over a window, exactly: a card's state changes only when a claim on it starts or
ends, so `dra_plan.fragmentation` is evaluated at the window's start and at every such moment
inside it, and each state holds until the next one. A card fragmented some of the time is one
row; its stranded capacity is valued as the memory slices the fragmentation withholds
(`largest_by_count` minus `largest_creatable`, over the card's 8) x the card-hour price x the
hours fragmented, scaled to a month like every other kind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from functools import cache
from itertools import pairwise
from typing import Any

from gpuledger.analytics.devices.dra_plan import _by_count, _creatable, profile_recommendations
from gpuledger.core.mig import MEMORY_SLICES, gpu_model
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import dra as queries


def _moments(wh: Warehouse, window: Window) -> list[datetime]:
    """The window's start and every claim start/end inside it: where a card's state can change."""
    return [window.start, *queries.claim_change_moments(wh, window.start, window.end), window.end]


def _withheld(model_name: str, by_count: str | None, creatable: str | None) -> int:
    """Memory slices a fragmented card cannot offer in one device (by count minus creatable)."""
    profiles = gpu_model(model_name).profiles
    size = {name: p.memory for name, p in profiles.items()}
    return size.get(by_count or "", 0) - size.get(creatable or "", 0)


def _fragmented_at(wh: Warehouse) -> Callable[[datetime], list[dict[str, Any]]]:
    """`dra_plan.fragmentation(wh, at).filter(fragmented)` at any moment, from the cards and
    the MIG claims read once: a window has a moment per claim start and end (thousands in a
    month), and two queries per moment were most of this kind's time. A card's figures depend
    only on its model and used slices, so each distinct state is worked out once."""
    cards = queries.dynamic_mig_cards(wh).rows()
    claims = queries.mig_claim_placements(wh)
    by_card: dict[str, list[tuple[str, int, datetime, datetime]]] = defaultdict(list)
    for uuid, profile, start, begins, ends in claims.iter_rows():
        by_card[str(uuid)].append((str(profile), int(start), begins, ends))

    @cache
    def figures(model_name: str, used: frozenset[int]) -> tuple[int, str | None, str | None, bool]:
        model = gpu_model(model_name)
        free = set(range(MEMORY_SLICES)) - used
        by_count, creatable = _by_count(model, len(free)), _creatable(model, free)
        size = {p.name: p.memory for p in model.profiles.values()}
        return (len(free), by_count, creatable,
                by_count is not None and size.get(creatable or "", 0) < size[by_count])

    def at(moment: datetime) -> list[dict[str, Any]]:
        out = []
        for uuid, node, model_name in cards:
            memory = gpu_model(model_name).profiles
            used = frozenset(i for profile, start, begins, ends in by_card.get(str(uuid), ())
                             if begins is not None and ends is not None and begins <= moment < ends
                             for i in range(start, start + memory[profile].memory))
            free, by_count, creatable, fragmented = figures(model_name, used)
            if fragmented:
                out.append({"uuid": uuid, "node": node, "model": model_name, "free_slices": free,
                            "largest_by_count": by_count, "largest_creatable": creatable})
        return out
    return at


def fragmented_cards(wh: Warehouse, window: Window) -> list[dict[str, Any]]:
    """Per dynamic card fragmented at some moment of the window: hours fragmented, the worst
    state (most slices withheld) and the withheld slice-hours."""
    moments = _moments(wh, window)
    states = _fragmented_at(wh)
    cards: dict[str, dict[str, Any]] = defaultdict(lambda: {"hours": 0.0, "slice_hours": 0.0, "worst": None})
    for at, nxt in pairwise(moments):
        hours = (nxt - at).total_seconds() / 3600
        if hours <= 0:
            continue
        for row in states(at):
            withheld = _withheld(row["model"], row["largest_by_count"], row["largest_creatable"])
            card = cards[row["uuid"]]
            card.update(node=row["node"], model=row["model"])
            card["hours"] += hours
            card["slice_hours"] += withheld * hours
            if card["worst"] is None or withheld > card["worst"]["withheld_slices"]:
                card["worst"] = {"at": at.isoformat(), "free_slices": row["free_slices"],
                                 "largest_by_count": row["largest_by_count"],
                                 "largest_creatable": row["largest_creatable"], "withheld_slices": withheld}
    return [{"uuid": uuid, **card} for uuid, card in sorted(cards.items())]


def fragmentation_advice(wh: Warehouse, window: Window, price: Callable[[str], float],
                         month: float) -> tuple[list[dict[str, object]], dict[str, Any]]:
    """Rows and evidence of `dra-fragmentation`: `price(model)` is the card-hour price, `month`
    the factor from the window to a month."""
    found = fragmented_cards(wh, window)
    rows: list[dict[str, object]] = []
    for card in found:
        worst = card["worst"]
        saving = card["slice_hours"] / MEMORY_SLICES * price(card["model"]) * month
        card["monthly_saving"] = saving
        rows.append({
            "kind": "dra_fragmentation", "scope": f"{card['node']} {card['uuid']}",
            "current": f"fragmented {card['hours'] / window.hours:.0%} of the window",
            "recommended": f"free a {worst['largest_by_count']} (only a {worst['largest_creatable']} fits)",
            "monthly_saving": saving,
            "reason": (f"{worst['free_slices']} free memory slices at {worst['at']} hold a "
                       f"{worst['largest_by_count']} by count but no allowed start fits it; "
                       f"{card['slice_hours']:.2f} slice-hours withheld over {card['hours']:.2f} h"),
        })
    return rows, {"cards": found}


def profiles_advice(wh: Warehouse, window: Window,
                    goal: float) -> tuple[list[dict[str, object]], dict[str, Any]]:
    """Rows and evidence of `dra-profiles`: the fewest MIG profiles covering `goal` of the
    window's DRA MIG claim-hours, each as the DeviceClass a claim template would reference."""
    found = profile_recommendations(wh, window, coverage=goal)
    rows: list[dict[str, object]] = [{
        "kind": "dra_profile", "scope": r["profile"],
        "current": f"{r['claims']} claims, {r['claim_hours']:.2f} h",
        "recommended": f"DeviceClass {r['device_class']['metadata']['name']}",
        "monthly_saving": None,  # not priced (decision 0213): offering a class saves no known sum
        "reason": f"{r['share']:.0%} of the window's MIG claim-hours (the set covers the {goal:.0%} goal)",
    } for r in found]
    return rows, {"goal": goal, "profiles": found}
