"""GitOps export: a plan as the manifests that would apply it, written instead of applied.

`gpuledger plans export ID -o yaml` hands a reviewed plan to a GitOps repository, where the
usual review and sync take over. What is written:
- quota plans: one manifest per changed quota object of the plan's queue system (a Kueue
  ClusterQueue today, whatever `actuator.queues.writer_for` names), holding only the fields the
  plan owns (`spec.<body_field>` with the planned numbers set, by the writer's own mutation);
- MIG plans: the mig-parted ConfigMap with the plan's entries (to merge into the repository's
  `config.yaml`: entries the plan does not use are not in the plan, so they are not written),
  and each node's `nvidia.com/mig.config` label.

Every manifest is a partial object meant for server-side apply (the fields gpuledger owns);
`dry_run` sends each one as a server-side apply with `dryRun=All`, so admission, the CRD schema
and CEL rules judge it without anything being stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import yaml

from gpuledger.actuator.gateway import ObjectRef, configmap_ref, node_ref
from gpuledger.actuator.migconfig import CONFIG_KEY, dump_document
from gpuledger.actuator.queues import writer_for
from gpuledger.core.errors import InputError

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import ClusterGateway, Obj
    from gpuledger.core.config import Settings
    from gpuledger.optimizer.plan.contract import Plan

FIELD_MANAGER = "gpuledger-export"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
FORMATS = ("yaml", "json")


Exported = list[tuple[ObjectRef, "Obj"]]
"""Each manifest with where it lives in the API."""


def export_objects(plan: Plan, settings: Settings) -> Exported:
    """The manifests that apply `plan` (module docstring), in a stable order, with their refs."""
    from gpuledger.optimizer.plan.contract import QuotaChanges

    if isinstance(plan.changes, QuotaChanges):
        return _quota(plan)
    return _mig(plan, settings)


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
    meta: dict[str, Any] = {"name": ref.name}
    if ref.namespace:
        meta["namespace"] = ref.namespace
    return {"apiVersion": _api_version(ref), "kind": ref.kind, "metadata": meta, **body}


def _quota(plan: Plan) -> Exported:
    """Each changed queue's quota body with the planned numbers, via its writer's mutation."""
    from gpuledger.optimizer.plan.contract import QuotaChanges

    changes = plan.changes
    assert isinstance(changes, QuotaChanges)
    writer = writer_for(plan)
    docs: Exported = []
    for update in sorted(changes.cluster_queues, key=lambda u: u.name):
        planned = [c for c in changes.quotas if c.cluster_queue == update.name and c.changed]
        if not planned:
            continue
        ref = writer.ref(update.name)
        current: Obj = {"metadata": {"name": update.name},
                        "spec": {writer.body_field: [dict(g) for g in update.resource_groups]}}
        patch = writer.mutation(current, planned) or {"spec": current["spec"]}
        docs.append((ref, _manifest(ref, patch)))
    return docs


def _mig(plan: Plan, settings: Settings) -> Exported:
    """The mig-parted ConfigMap with the plan's entries, then one label per node."""
    from gpuledger.optimizer.plan.contract import MigChanges

    changes = plan.changes
    assert isinstance(changes, MigChanges)
    k = settings.kubernetes
    docs: Exported = []
    if changes.nodes:
        ref = configmap_ref(k.mig_configmap_namespace, k.mig_configmap_name)
        docs.append((ref, _manifest(ref, {"data": {CONFIG_KEY: dump_document(changes.mig_parted_config())}})))
    for node in sorted(changes.nodes, key=lambda n: n.node):
        ref = node_ref(node.node)
        doc = _manifest(ref, {})
        doc["metadata"]["labels"] = {MIG_CONFIG_LABEL: node.mig_config}
        docs.append((ref, doc))
    return docs


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
