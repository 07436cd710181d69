"""Kueue as a `QuotaWriter`: ClusterQueue `spec.resourceGroups`, read-modify-write whole.

Kueue's `resourceGroups` is an atomic list: a write replaces all of it, so the mutation copies
the list as read, changes only the planned numbers of each (flavor, resource) and sends the
whole list back (the gateway adds the resourceVersion it read).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from gpuledger.actuator.gateway import Obj, ObjectRef, cluster_queue_ref
from gpuledger.actuator.quantity import format_quantity, same_quantity
from gpuledger.actuator.queues import WRITERS
from gpuledger.core.errors import ConflictingPlanError

if TYPE_CHECKING:
    from gpuledger.optimizer.plan.contract import QuotaChange

FIELDS = (
    ("nominalQuota", "nominal"), ("borrowingLimit", "borrowing_limit"), ("lendingLimit", "lending_limit"),
)
"""ClusterQueue resource field → the `QuotaChange` attribute stem (`old_<stem>`, `new_<stem>`)."""


class KueueWriter:
    """Kueue's part of the apply stage (see the module docstring)."""

    name = "kueue"
    object_kind = "ClusterQueue"
    body_field = "resourceGroups"

    def ref(self, queue: str) -> ObjectRef:
        return cluster_queue_ref(queue)

    def body(self, obj: Obj) -> list[Any]:
        return list((obj.get("spec") or {}).get("resourceGroups") or [])

    def mutation(self, obj: Obj, changes: Sequence[QuotaChange]) -> Obj | None:
        """The merge patch replacing `spec.resourceGroups` with the planned numbers set, or None."""
        name = obj["metadata"]["name"]
        groups: list[Any] = copy.deepcopy(self.body(obj))
        touched = False
        for change in changes:
            resource = _find(groups, change, name)
            for api_field, attr in FIELDS:
                old, new = getattr(change, f"old_{attr}"), getattr(change, f"new_{attr}")
                current = resource.get(api_field)
                if same_quantity(current, _opt(new)):
                    continue
                if not same_quantity(current, _opt(old)):
                    raise ConflictingPlanError(
                        f"ClusterQueue/{name} flavor {change.flavor} resource {change.resource}: "
                        f"{api_field} is {current!r}, the plan expected {_opt(old)!r} "
                        f"(or its target {_opt(new)!r}); re-plan"
                    )
                if new is None:
                    resource.pop(api_field, None)
                else:
                    resource[api_field] = format_quantity(new)
                touched = True
        return {"spec": {"resourceGroups": groups}} if touched else None

    def manifest_spec(self, body: Sequence[Any], changes: Sequence[QuotaChange]) -> dict[str, Any]:
        """The whole `resourceGroups` with the planned numbers set: the list is atomic, a
        manifest owns all of it."""
        obj: Obj = {"metadata": {"name": "export"}, "spec": {"resourceGroups": list(body)}}
        patch = self.mutation(obj, changes)
        return dict(patch["spec"]) if patch else {"resourceGroups": [copy.deepcopy(g) for g in body]}


def _find(groups: list[Any], change: QuotaChange, queue: str) -> dict[str, Any]:
    for group in groups:
        for flavor in group.get("flavors") or []:
            if flavor.get("name") != change.flavor:
                continue
            for resource in flavor.get("resources") or []:
                if resource.get("name") == change.resource:
                    return cast(dict[str, Any], resource)
    raise ConflictingPlanError(
        f"ClusterQueue/{queue}: no flavor {change.flavor!r} with resource {change.resource!r} "
        "any more; re-plan"
    )


def _opt(value: float | None) -> int | str | None:
    return None if value is None else format_quantity(value)


KUEUE = WRITERS.register("kueue", KueueWriter())
