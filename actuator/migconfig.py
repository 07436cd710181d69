"""The mig-parted ConfigMap document and the MIG resources a node should show afterwards.

The GPU Operator's MIG Manager reads one ConfigMap whose `config.yaml` holds
`version: v1` and `mig-configs: {name: [{devices: all | [idx], mig-enabled, mig-devices}]}`.
A node label `nvidia.com/mig.config=<name>` selects an entry. This module only transforms
documents; the reads and writes happen in the rollout through the gateway.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from gpuledger.core.errors import InputError

CONFIG_KEY = "config.yaml"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STATE_SUCCESS, MIG_STATE_FAILED = "success", "failed"
MIG_STATES_IN_PROGRESS: tuple[str, ...] = ("pending", "rebooting")
"""What MIG Manager writes while it works (NVIDIA/mig-parted `cmd/nvidia-mig-manager`):
`pending` while it reconfigures, `rebooting` while the host restarts for a change that needs it
(MIG mode on some GPUs, `WITH_REBOOT`); then `success` or `failed`. Both are waited for."""
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def config_key(configmap: Mapping[str, Any]) -> str:
    """The data key holding the document: `config.yaml`, or the only key when there is one."""
    data = configmap.get("data") or {}
    if CONFIG_KEY in data or len(data) != 1:
        return CONFIG_KEY
    return str(next(iter(data)))


def read_document(configmap: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The parsed mig-parted document (an empty v1 document when the key is absent)."""
    text = (configmap.get("data") or {}).get(config_key(configmap))
    if not text:
        return {"version": "v1", "mig-configs": {}}
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{where}: {config_key(configmap)} is not valid YAML ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("mig-configs", {}), dict):
        raise InputError(f"{where}: {config_key(configmap)} must be a mapping with a mig-configs mapping")
    doc.setdefault("mig-configs", {})
    return doc


def with_entries(doc: Mapping[str, Any], entries: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `doc` where each named entry is set to its value (None removes it); others kept."""
    configs = dict(doc.get("mig-configs") or {})
    for name, entry in entries.items():
        if entry is None:
            configs.pop(name, None)
        else:
            configs[name] = entry
    return {**doc, "mig-configs": configs}


def dump_document(doc: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False)


def expected_mig_resources(entry: Sequence[Mapping[str, Any]], gpu_count: int | None) -> dict[str, int]:
    """`nvidia.com/mig-<profile>` → count a node running this entry advertises (mixed strategy)."""
    counts: Counter[str] = Counter()
    for group in entry:
        devices = group.get("devices", "all")
        if devices == "all":
            if gpu_count is None:
                raise InputError("mig-parted entry uses `devices: all` but the node's GPU count is unknown")
            n_devices = gpu_count
        else:
            n_devices = len(devices)
        if not group.get("mig-enabled"):
            continue
        for profile, count in (group.get("mig-devices") or {}).items():
            counts[MIG_RESOURCE_PREFIX + str(profile)] += int(count) * n_devices
    return {name: n for name, n in counts.items() if n}


def mig_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    """The node's advertised `nvidia.com/mig-*` allocatable counts (zeros dropped)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    out: dict[str, int] = {}
    for name, value in allocatable.items():
        if name.startswith(MIG_RESOURCE_PREFIX):
            amount = int(str(value))
            if amount:
                out[name] = amount
    return out


def labels(node: Mapping[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def gpu_count(node: Mapping[str, Any]) -> int | None:
    value = labels(node).get(GPU_COUNT_LABEL)
    return int(value) if value and value.isdigit() else None
