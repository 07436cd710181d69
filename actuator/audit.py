"""The actuator's audit trail: one append-only record per action, in the warehouse.

Why a small class: every record must carry who, when, which plan, which object, the state
before and after and the result; binding actor and plan once means no call site can forget
them. Records are written as the action happens (not at the end), so a crash leaves a trail.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpuledger.core.config import utcnow

if TYPE_CHECKING:
    from gpuledger.warehouse.protocols import WritableWarehouse


@dataclass
class Auditor:
    wh: WritableWarehouse
    actor: str
    plan_id: str | None
    clock: Callable[[], datetime] = utcnow

    def record(
        self, action: str, obj: str | None, *, before: Any = None, after: Any = None,
        result: str = "ok", detail: str | None = None,
    ) -> int:
        """Append one record; `before`/`after` are JSON-able (None: not applicable)."""
        return self.wh.append_audit({
            "occurred_at": self.clock(),
            "actor": self.actor,
            "plan_id": self.plan_id,
            "action": action,
            "object": obj,
            "before_state": None if before is None else json.dumps(before, sort_keys=True, default=str),
            "after_state": None if after is None else json.dumps(after, sort_keys=True, default=str),
            "result": result,
            "detail": detail,
        })
