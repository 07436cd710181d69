"""What an NVIDIA DRA device's name says: the card and, for a MIG device, its placement.

Why in core: the NVIDIA DRA driver publishes no index and no placement attribute (current
`deviceinfo.go`; the `index`/`parentIndex`/`memorySliceStart` of `v1beta1`-era drivers are gone),
so the name is the only source of both, and it is read on two paths: the ResourceSlices of an
API listing (`collectors.dra_objects`) and the `dra_device_name` labels and kube-state-metrics
series of a Prometheus history (`collectors.dra_prometheus`, `analytics.devices.dra_history`).

Names (mig.go `ToCanonicalName`, deviceinfo.go `CanonicalName`):
- `gpu-<N>`: a whole GPU, `N` its minor number;
- `gpu-<N>-mig-<profile without dots>-<GI profile id>-<placement start>` (current drivers);
- `gpu-<N>-mig-<GI profile id>-<placement start>-<placement size>` (older drivers, e.g.
  `gpu-0-mig-19-6-1` in dcgm-exporter PR 532's samples).
`N` is the same card for every device of one driver's pool (node); it is not dcgm-exporter's
`gpu` index, which is the DCGM id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeviceName:
    """What an NVIDIA DRA device's name says: the card's `gpu-<N>` prefix and, for a MIG
    device, its GPU-instance profile id and placement start (None where the name does not say)."""

    card: int | None
    gi_profile_id: int | None = None
    placement: int | None = None
    mig: bool = False


_GPU_NAME = re.compile(r"^gpu-(\d+)$")
_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-(\d+g\d+gb\S*?)-(\d+)-(\d+)$")
"""`gpu-<minor>-mig-<profile without dots>-<GI profile id>-<placement start>` (mig.go
`ToCanonicalName`, current drivers)."""
_OLD_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-(\d+)-(\d+)-(\d+)$")
"""`gpu-<N>-mig-<GI profile id>-<placement start>-<placement size>` (drivers before the profile
joined the name, e.g. `gpu-0-mig-19-6-1` in dcgm-exporter PR 532's samples)."""


def device_name(name: str | None) -> DeviceName:
    """The facts in a device name (module docstring); nothing for a name of another shape."""
    text = name or ""
    if match := _GPU_NAME.match(text):
        return DeviceName(int(match.group(1)))
    if match := _MIG_NAME.match(text):
        return DeviceName(int(match.group(1)), int(match.group(3)), int(match.group(4)), mig=True)
    if match := _OLD_MIG_NAME.match(text):
        return DeviceName(int(match.group(1)), int(match.group(2)), int(match.group(3)), mig=True)
    return DeviceName(None)


_PROFILE = re.compile(r"^(\d+g)(\d+gb.*)$")


def profile_from_name(name: str | None) -> str | None:
    """The MIG profile a current driver's device name spells without dots (`1g10gb` ->
    `1g.10gb`); None for a whole GPU or an older name (which has only the GI profile id)."""
    match = _MIG_NAME.match(name or "")
    if not match:
        return None
    parts = _PROFILE.match(match.group(2))
    return f"{parts.group(1)}.{parts.group(2).replace('-me', '+me')}" if parts else None
