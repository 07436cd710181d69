"""GitOps export: a plan as the manifests that would apply it, written instead of applied.

`gpuledger plans export ID -o yaml` hands a reviewed plan to a GitOps repository, where the
usual review and sync take over. What is written:
- quota plans: one manifest per changed quota object of the plan's queue system (a Kueue
  ClusterQueue, a Volcano Queue: whatever `actuator.queues.writer_for` names), holding only the
  fields the plan owns (`spec.<body_field>` with the planned numbers set, by the writer's own
  mutation);
- MIG plans: the mig-parted ConfigMap with the plan's entries (to merge into the repository's
  `config.yaml`: entries the plan does not use are not in the plan, so they are not written),
  and each node's `nvidia.com/mig.config` label.

What each kind writes is its rollout's (`KindRollout.manifests`, `actuator.plan_kinds.<kind>`);
this module makes them manifests, renders and dry-runs them.

Every manifest is a partial object meant for server-side apply (the fields gpuledger owns);
`dry_run` sends each one as a server-side apply with `dryRun=All`, so admission, the CRD schema
and CEL rules judge it without anything being stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import yaml

from gpuledger.actuator.gateway import ObjectRef
from gpuledger.actuator.plan_kinds import rollout_for
from gpuledger.core.errors import InputError

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import ClusterGateway, Obj
    from gpuledger.core.config import Settings
    from gpuledger.optimizer.plan.contract import Plan

FIELD_MANAGER = "gpuledger-export"
FORMATS = ("yaml", "json")


Exported = list[tuple[ObjectRef, "Obj"]]
"""Each manifest with where it lives in the API."""


def export_objects(plan: Plan, settings: Settings) -> Exported:
    """The manifests that apply `plan` (module docstring), in a stable order, with their refs."""
    return [(ref, _manifest(ref, body)) for ref, body in rollout_for(plan.kind).manifests(plan, settings)]


def export_manifests(plan: Plan, settings: Settings) -> list[Obj]:
    return [doc for _, doc in export_objects(plan, settings)]


def render(docs: Sequence[Obj], fmt: str = "yaml") -> str:
    """YAML (one document per manifest) or a JSON `List`."""
    if fmt == "yaml":
        return yaml.safe_dump_all(list(docs), sort_keys=False)
    if fmt == "json":
        import json

        return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}, indent=2)
    raise InputError(f"export format {fmt!r}: expected one of {', '.join(FORMATS)}")


def _api_version(ref: ObjectRef) -> str:
    """`/apis/<group>/<version>/...` → group/version; `/api/v1/...` → v1."""
    parts = ref.path.strip("/").split("/")
    return f"{parts[1]}/{parts[2]}" if parts[0] == "apis" else parts[1]


def _manifest(ref: ObjectRef, body: Obj) -> Obj:
    """`body` (the fields gpuledger owns; its `metadata`, e.g. labels, after name and namespace)
    as a whole partial object."""
    meta: dict[str, Any] = {"name": ref.name}
    if ref.namespace:
        meta["namespace"] = ref.namespace
    rest = {k: v for k, v in body.items() if k != "metadata"}
    meta |= body.get("metadata", {})
    return {"apiVersion": _api_version(ref), "kind": ref.kind, "metadata": meta, **rest}


def dry_run(gateway: ClusterGateway, objects: Exported) -> list[str]:
    """Send every manifest as a server-side apply with dryRun=All; the objects it judged.

    Raises the gateway's error (one line) for the first manifest the API server refuses."""
    judged = []
    for ref, doc in objects:
        gateway.request("PATCH", ref.path, what=f"dry-run apply {ref}", body=doc,
                        content_type="application/apply-patch+yaml",
                        query={"dryRun": "All", "fieldManager": FIELD_MANAGER, "force": "true"})
        judged.append(str(ref))
    return judged
