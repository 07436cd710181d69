"""Fleet-shaping advice (issue 19): one module per kind, each a pure analysis over frames with
its method in the module docstring (`profile_catalog`, `fragmentation`, `overcommit`,
`autoscaling` + `autoscaling_manifest`), and `run`, which reads the warehouse and hands the
frames over; `preemption` flags queues where preemption throws away a real share of spend
(admit before run). The top room of analytics below `exports`: may import `workloads` and every
room below it (and core, warehouse).

The kinds `gpuledger recommend --kind` offers are registered here, in `KINDS`, each by the
function that reads the warehouse for it (`run.py`, or a module of its own). Declared lazily,
so naming them (the CLI's choices, the serving store's publisher) imports no analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuledger.core.errors import InputError
from gpuledger.core.registry import Registry

if TYPE_CHECKING:
    from gpuledger.analytics.advice.run import AdviceFn

KINDS: Registry[AdviceFn] = Registry("advice kind", error=InputError)
"""Advice kind name (the `--kind` value) → its function `(wh, window, settings) -> Advice`, in
the order `run_advice` runs them and the statements show them. A new kind: one module with its
function, and one line here."""
KINDS.register_lazy("profile-catalog", "gpuledger.analytics.advice.run:catalog_advice")
KINDS.register_lazy("overcommit", "gpuledger.analytics.advice.run:overcommit_advice")
KINDS.register_lazy("autoscaling", "gpuledger.analytics.advice.run:autoscaling_advice_kind")
KINDS.register_lazy("fragmentation", "gpuledger.analytics.advice.run:fragmentation_advice")
KINDS.register_lazy("dra-fragmentation", "gpuledger.analytics.advice.run:dra_fragmentation_kind")
KINDS.register_lazy("dra-profiles", "gpuledger.analytics.advice.run:dra_profiles_kind")

FLEET_SHAPING_KINDS = ("profile-catalog", "fragmentation", "overcommit", "autoscaling")
"""The four kinds that reshape the fleet: what the Fleet page and the monthly fleet statement
show (the DRA kinds stay on the CLI and the Fleet page's DRA section). Here, not in `run`, so
naming them imports no analysis (the serving store's publisher runs in every writer's close)."""
