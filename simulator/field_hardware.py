"""Field effects that change the hardware (and so the truth): node churn and card replacement.

Both are spans on slots, the mechanism a MIG reconfiguration already uses: a slot exists for
`[start, end)`, the schedule's renewal process only runs a slot inside its span, and the truth
and the samples only see a slot where it exists. So a node that joins late or leaves early
simply has shorter slots (no card-hours while absent), and a replaced card is two cards in the
same place: the old one's slots end at the replacement, the new one (a new UUID, the same
index, bus id and slot layout) starts `REPLACE_GAP_S` later, the minutes the node's slot
stood empty. The inventory reports each card's `first_seen`/`last_seen` from the same spans
(`simulator.inventory.presence_steps`), so capacity counts a card only while it is present.
Nodes and cards are picked by position (MIG pools are left to
`mig_layout_changes`), so the choice is the same for every seed and chunking.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from gpuledger.simulator.field import FieldEffects
from gpuledger.simulator.hardware import Gpu, Hardware, Stranded
from gpuledger.simulator.timebase import Timebase

REPLACE_GAP_S = 600
"""How long the slot stands empty while the card is swapped."""


def churn_spans(tb: Timebase, n: int) -> list[tuple[int, int]]:
    """Presence spans of the churning nodes: even ones join at 1/4 of the window, odd ones
    leave at 3/4."""
    return [(tb.steps // 4, tb.steps) if i % 2 == 0 else (0, 3 * tb.steps // 4) for i in range(n)]


def replace_step(tb: Timebase) -> int:
    """Replacements happen at the hour nearest two thirds of the window."""
    at = tb.origin_s + 2 * tb.steps * tb.step_s // 3
    hour = round(at / 3600) * 3600
    return int(min(max((hour - tb.origin_s) // tb.step_s, 1), tb.steps - 1))


def apply_field_hardware(hw: Hardware, tb: Timebase, field: FieldEffects, cluster: str) -> Hardware:
    """Hardware with node churn and card replacements applied (unchanged when both are off)."""
    plain = [i for i, n in enumerate(hw.nodes) if hw.pools[n.pool].sharing != "mig"]
    churned = list(reversed(plain))[: field.node_churn]
    for n_idx, span in zip(churned, churn_spans(tb, len(churned)), strict=True):
        _clip_node(hw, n_idx, span)
    candidates = [i for i in plain if i not in churned][: field.card_replacements]
    for n_idx in candidates:
        _replace_card(hw, hw.nodes[n_idx].gpus[0], replace_step(tb), tb, cluster)
    return hw


def _clip_node(hw: Hardware, n_idx: int, span: tuple[int, int]) -> None:
    lo, hi = span
    cards = set(hw.nodes[n_idx].gpus)
    hw.slots[:] = [
        replace(s, start=max(s.start, lo), end=min(s.end, hi)) if s.gpu in cards else s
        for s in hw.slots
    ]
    hw.stranded[:] = [
        replace(s, start=max(s.start, lo), end=min(s.end, hi)) if s.gpu in cards else s
        for s in hw.stranded
    ]


def _replace_card(hw: Hardware, g_idx: int, at: int, tb: Timebase, cluster: str) -> None:
    old = hw.gpus[g_idx]
    node = hw.nodes[old.node]
    back = min(at + max(1, REPLACE_GAP_S // tb.step_s), tb.steps)
    h = hashlib.sha256(f"{cluster}/{node.name}/{old.index}/replacement".encode()).hexdigest()
    uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
    new_idx = len(hw.gpus)
    hw.gpus.append(Gpu(uuid, old.node, old.index, old.model, old.pool, old.sharing, old.replicas,
                       old.memory_mib, old.pci_bus_id))
    node.replacements.append(new_idx)
    mine = [s for s in hw.slots if s.gpu == g_idx]
    hw.slots[:] = [replace(s, end=min(s.end, at)) if s.gpu == g_idx else s for s in hw.slots]
    hw.slots.extend(replace(s, gpu=new_idx, start=max(s.start, back)) for s in mine)
    rest: list[Stranded] = [s for s in hw.stranded if s.gpu == g_idx]
    hw.stranded[:] = [replace(s, end=min(s.end, at)) if s.gpu == g_idx else s for s in hw.stranded]
    hw.stranded.extend(replace(s, gpu=new_idx, start=max(s.start, back)) for s in rest)


def same_span(hw: Hardware, node_slots: list[int], i: int) -> int:
    """How many slots from `i` on exist for the same span (a group never straddles a card
    that was replaced or a node's churn)."""
    spans = [(hw.slots[s].start, hw.slots[s].end) for s in node_slots[i:]]
    n = 1
    while n < len(spans) and spans[n] == spans[0]:
        n += 1
    return n
