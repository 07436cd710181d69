"""What a rollout needs while it runs: the plan, the gateway, the audit trail, the progress record.

Why one object: the MIG and quota rollouts (and rollback) share the same rules for saving
progress after each step, auditing each write, waiting with a deadline, and doing nothing real
in dry-run mode; keeping them here keeps the rollout modules about their own steps only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpuledger.actuator.audit import Auditor
from gpuledger.actuator.gateway import ClusterGateway
from gpuledger.actuator.rollout_progress import Progress
from gpuledger.core.config import Settings, utcnow

if TYPE_CHECKING:
    from gpuledger.optimizer.plan.contract import Plan


@dataclass
class RolloutContext:
    plan: Plan
    gateway: ClusterGateway
    audit: Auditor
    settings: Settings
    progress: Progress
    save: Callable[[Progress], None]
    dry_run: bool = False
    clock: Callable[[], datetime] = utcnow
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    @property
    def state_timeout(self) -> timedelta:
        return timedelta(seconds=self.settings.plans.state_timeout_s)

    @property
    def poll_s(self) -> float:
        """Poll often enough to notice a state change within ~5% of the timeout, at most 1 s."""
        return max(0.05, min(1.0, self.settings.plans.state_timeout_s / 20))

    def checkpoint(self) -> None:
        """Persist the progress record (never in dry-run mode: a dry run leaves no trace)."""
        if not self.dry_run:
            self.save(self.progress)

    def record(
        self, action: str, obj: str | None, *, before: Any = None, after: Any = None,
        result: str = "ok", detail: str | None = None,
    ) -> None:
        """Audit one cluster action (dry runs are summarized once by the workflow instead)."""
        if not self.dry_run:
            self.audit.record(action, obj, before=before, after=after, result=result, detail=detail)
