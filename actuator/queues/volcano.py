"""Volcano as a `QuotaWriter`: a Queue's `spec.deserved`, `spec.capability` and
`spec.guarantee.resource`, changed by JSON merge patch.

Unlike Kueue's atomic `resourceGroups`, Volcano's three quota fields are plain maps, so the
patch names only the planned resources (`null` removes one: a limit the plan lifts); cpu,
memory and every other resource are not in the patch at all. The gateway adds the
resourceVersion it read, so a concurrent writer makes the write fail with 409, re-read and
re-check rather than be overwritten. The planned numbers map back as in
`optimizer.quota.queues.volcano` (deserved = nominal, capability = nominal + borrowing limit,
guarantee = nominal − lending limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from gpuledger.actuator.gateway import Obj, ObjectRef
from gpuledger.actuator.quantity import format_quantity, same_quantity
from gpuledger.actuator.queues import WRITERS
from gpuledger.core.errors import ConflictingPlanError
from gpuledger.optimizer.quota.queues.volcano import queue_state

if TYPE_CHECKING:
    from gpuledger.optimizer.plan.contract import QuotaChange

API = "scheduling.volcano.sh/v1beta1"


def _targets(change: QuotaChange, prefix: str) -> dict[str, float | None]:
    """Field → its value under the plan's `old` or `new` numbers (None: unset)."""
    nominal = getattr(change, f"{prefix}_nominal")
    borrow, lend = getattr(change, f"{prefix}_borrowing_limit"), getattr(change, f"{prefix}_lending_limit")
    return {"deserved": nominal, "capability": None if borrow is None else nominal + borrow,
            "guarantee": None if lend is None else nominal - lend}


def _current(spec: dict[str, Any], field: str, resource: str) -> Any:
    holder = (spec.get("guarantee") or {}).get("resource") if field == "guarantee" else spec.get(field)
    return (holder or {}).get(resource)


def _fmt(value: float | None) -> int | str | None:
    return None if value is None else format_quantity(value)


class VolcanoWriter:
    """Volcano's part of the apply stage (see the module docstring)."""

    name = "volcano"
    object_kind = "Queue"
    body_field = "deserved"
    """Audit records show the whole quota body (`body`), keyed under this field's name."""

    def ref(self, queue: str) -> ObjectRef:
        return ObjectRef("Queue", queue, "", f"/apis/{API}/queues/{quote(queue, safe='')}")

    def body(self, obj: Obj) -> list[Any]:
        state = queue_state(obj["metadata"]["name"], obj.get("spec") or {})
        return [{k: state[k] for k in ("deserved", "capability", "guarantee")}]

    def live_state(self, obj: Obj) -> dict[str, Any]:
        """The part a plan depends on, exactly as `optimizer.quota.queues.volcano` hashed it."""
        return queue_state(obj["metadata"]["name"], obj.get("spec") or {})

    def mutation(self, obj: Obj, changes: Sequence[QuotaChange]) -> Obj | None:
        """The merge patch setting the planned numbers (None: all set already); raises
        `ConflictingPlanError` when a number is neither the plan's old value nor its new one."""
        name, spec = obj["metadata"]["name"], obj.get("spec") or {}
        patch: dict[str, dict[str, Any]] = {"deserved": {}, "capability": {}, "guarantee": {}}
        for change in changes:
            old, new = _targets(change, "old"), _targets(change, "new")
            for field in ("deserved", "capability", "guarantee"):
                current = _current(spec, field, change.resource)
                want = _fmt(new[field])
                if same_quantity(current, want):
                    continue
                expected = _fmt(old[field])
                if not same_quantity(current, expected):
                    raise ConflictingPlanError(
                        f"Queue/{name} {change.resource}: {field} is {current!r}, the plan expected "
                        f"{expected!r} (or its target {want!r}); re-plan")
                patch[field][change.resource] = want
        body: dict[str, Any] = {k: v for k, v in patch.items() if v and k != "guarantee"}
        if patch["guarantee"]:
            body["guarantee"] = {"resource": patch["guarantee"]}
        return {"spec": body} if body else None

    def manifest_spec(self, body: Sequence[Any], changes: Sequence[QuotaChange]) -> dict[str, Any]:
        """The planned resources' entries of `deserved`, `capability` and `guarantee.resource`,
        from the plan's new numbers: the three are plain maps, so a manifest owns only the
        entries the plan sets (cpu and the rest stay whoever's they are). A limit the plan lifts
        has no number, so the manifest does not set it."""
        spec: dict[str, Any] = {}
        for change in sorted(changes, key=lambda c: c.resource):
            for field, value in _targets(change, "new").items():
                if value is not None:
                    spec.setdefault(field, {})[change.resource] = _fmt(value)
        if "guarantee" in spec:
            spec["guarantee"] = {"resource": spec["guarantee"]}
        return spec


VOLCANO = WRITERS.register("volcano", VolcanoWriter())
