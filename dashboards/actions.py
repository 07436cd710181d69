"""The Plans page's buttons, enforced on the server: approve, reject, preview (dry run), apply.

Rules (each checked here, whatever the page showed):
1. Only admins act. A refused attempt is answered with `AccessDeniedError` before any write
   connection is opened, then recorded in the audit log (best effort).
2. Approve and reject are one short write transaction each through `SnapshotStore.writer()`,
   calling the actuator's workflow (`actuator.workflow.approve/reject`), which re-checks the role
   and the plan's state and writes the audit record.
3. Apply needs a successful dry-run preview of the same plan, by an admin, within
   `PREVIEW_VALID_S`: the preview is what the admin looked at before saying yes. The rule is the
   actuator's (`actuator.approval`), the same for `gpuledger plans apply`: the dry run records
   the preview in the audit log, and the apply checks it there. This app keeps the preview's
   result in memory only to show it on the page.
4. A rollout can run for many minutes (drains, MIG Manager). It runs in a background thread on a
   `ShortWriteWarehouse`, which opens the warehouse for each write and closes it at once, so
   collection keeps running during a rollout; the page polls the runner's in-memory status.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.actuator.approval import PREVIEW_VALID
from gpuledger.core.access import Principal
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.errors import AccessDeniedError, GpuledgerError, InputError
from gpuledger.warehouse import LoadBatch, LoadStats, Warehouse
from gpuledger.warehouse.snapshot_store import SnapshotStore, WarehouseBusyError

PREVIEW_VALID_S = int(PREVIEW_VALID.total_seconds())
MAX_REASON = 500

Observer = Callable[[str, Mapping[str, Any]], None]


class _RecordingWarehouse(Warehouse):
    """The open warehouse inside one `ShortWriteWarehouse.transaction()`, noting its audit rows."""

    def __init__(self, inner: Warehouse) -> None:
        super().__init__(inner.con, inner.path, inner.read_only)
        self.entries: list[Mapping[str, Any]] = []

    def append_audit(self, entry: Mapping[str, Any]) -> int:
        seq = super().append_audit(entry)
        self.entries.append(entry)
        return seq


class ShortWriteWarehouse:
    """A warehouse (`warehouse.plans.PlanWarehouse`) that holds the file only for each call:
    open, do one thing (or one transaction), close.

    It lets a long rollout record progress and audit entries without keeping the one writer
    lock, and reports every plan-status change and audit entry to `observer` for the live view.
    Because another process can write between two calls, every status change is the store's
    compare-and-set, never a read here and a blind write later.
    """

    def __init__(self, store: SnapshotStore, observer: Observer | None = None) -> None:
        self.path = str(store.source)
        self.read_only = False
        self._store = store
        self._observer = observer

    def _open(self) -> AbstractContextManager[Warehouse]:
        return self._store.writer(refresh=False)

    def query(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        with self._open() as wh:
            return wh.query(sql, params)

    def scalar(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> Any:
        with self._open() as wh:
            return wh.scalar(sql, params)

    def count(self, table: str) -> int:
        with self._open() as wh:
            return wh.count(table)

    def watermark(self, source: str) -> datetime | None:
        with self._open() as wh:
            return wh.watermark(source)

    def load(self, batch: LoadBatch) -> LoadStats:
        with self._open() as wh:
            stats = wh.load(batch)
        plans = batch.frames.get("plans")
        if self._observer is not None and plans is not None:
            for row in plans.iter_rows(named=True):
                self._observer("plan", row)
        return stats

    def append_audit(self, entry: Mapping[str, Any]) -> int:
        with self._open() as wh:
            seq = wh.append_audit(entry)
        if self._observer is not None:
            self._observer("audit", entry)
        return seq

    @contextmanager
    def transaction(self) -> Iterator[Warehouse]:
        """One open of the file for one transaction; observers hear of it after the commit."""
        from gpuledger.warehouse.queries.plans import plan_row

        with self._open() as wh:
            recording = _RecordingWarehouse(wh)
            with recording.transaction():
                yield recording
            if self._observer is None:
                return
            for entry in recording.entries:
                self._observer("audit", entry)
            for plan_id in dict.fromkeys(str(e["plan_id"]) for e in recording.entries if e.get("plan_id")):
                row = plan_row(wh, plan_id)
                if row is not None:
                    self._observer("plan", row)

    def close(self) -> None:
        """Nothing stays open."""


@dataclass
class Rollout:
    """A running (or finished) apply: what the Plans page polls."""

    plan_id: str
    user: str
    started_at: datetime
    status: str = "starting"
    progress: Any = None
    events: list[dict[str, Any]] = field(default_factory=list)
    finished_at: datetime | None = None
    message: str = ""
    thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.finished_at is None

    def observe(self, kind: str, row: Mapping[str, Any]) -> None:
        if kind == "plan" and row.get("plan_id") == self.plan_id:
            self.status = str(row.get("status"))
            raw = row.get("progress")
            self.progress = json.loads(raw) if isinstance(raw, str) and raw else raw
        elif kind == "audit":
            self.events.append({
                "at": row.get("occurred_at"), "action": row.get("action"), "object": row.get("object"),
                "result": row.get("result"), "detail": row.get("detail"),
            })
            del self.events[:-200]


@dataclass(frozen=True)
class Preview:
    plan_id: str
    user: str
    at: float
    result: dict[str, Any]


class PlanActions:
    """Server-side plan actions of one dashboard app."""

    def __init__(
        self, store: SnapshotStore, settings: Settings,
        cluster_factory: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.settings = settings
        self.cluster_factory = cluster_factory
        self._clock = clock
        self._previews: dict[str, Preview] = {}
        self.rollouts: dict[str, Rollout] = {}
        self._background: list[threading.Thread] = []
        self._lock = threading.Lock()

    # 1. Access -------------------------------------------------------------------------------
    def _require_admin(self, principal: Principal, action: str, plan_id: str) -> None:
        if principal.admin:
            return
        message = f"user {principal.user!r} may not {action} plan {plan_id}: needs the admin role"
        # the refusal is answered at once; its audit record is written in the background
        thread = threading.Thread(target=self._audit_denied, args=(principal, action, plan_id, message),
                                  name="gpuledger-audit-denied", daemon=True)
        thread.start()
        self._background.append(thread)
        raise AccessDeniedError(message)

    def _audit_denied(self, principal: Principal, action: str, plan_id: str, message: str) -> None:
        """Record a refused attempt; skipped (never waited for) when a collector holds the file."""
        try:
            with self.store.writer(refresh=False, retry=False) as wh:
                wh.append_audit({
                    "occurred_at": utcnow(), "actor": principal.user, "plan_id": plan_id,
                    "action": f"plan.{action.replace(' ', '_')}", "object": f"plan/{plan_id}",
                    "result": "denied", "detail": f"dashboard: {message}",
                })
        except GpuledgerError:
            return

    # 2. Approve / reject ---------------------------------------------------------------------
    def approve(self, principal: Principal, plan_id: str) -> str:
        from gpuledger.actuator.workflow import approve

        self._require_admin(principal, "approve", plan_id)
        with self.store.writer() as wh:
            record = approve(wh, plan_id, principal=principal, settings=self.settings)
        return f"plan {plan_id} approved by {principal.user}; status {record.status}"

    def reject(self, principal: Principal, plan_id: str, reason: str | None) -> str:
        from gpuledger.actuator.workflow import reject

        self._require_admin(principal, "reject", plan_id)
        text = (reason or "").strip()
        if not text:
            raise InputError(f"plan {plan_id}: give a reason to reject it")
        with self.store.writer() as wh:
            record = reject(wh, plan_id, principal=principal, settings=self.settings,
                            reason=text[:MAX_REASON])
        return f"plan {plan_id} rejected by {principal.user}; status {record.status}"

    # 3. Preview and apply --------------------------------------------------------------------
    def _cluster(self) -> Any:
        if self.cluster_factory is None:
            raise InputError(
                "no cluster configured for this dashboard: set kubernetes.kubeconfig (or run it "
                "in-cluster) to preview and apply plans; `gpuledger plans apply` works the same way"
            )
        return self.cluster_factory()

    def preview(self, principal: Principal, plan_id: str) -> dict[str, Any]:
        """Dry-run the plan against the API server (dryRun=All); nothing changes."""
        from gpuledger.actuator.workflow import apply

        self._require_admin(principal, "dry-run", plan_id)
        cluster = self._cluster()
        try:
            result = apply(ShortWriteWarehouse(self.store), plan_id, principal=principal,
                           settings=self.settings, cluster=cluster, dry_run=True)
        finally:
            _close(cluster)
        payload = result.to_dict()
        with self._lock:
            self._previews[plan_id] = Preview(plan_id, principal.user, self._clock(), payload)
        return payload

    def previewed(self, plan_id: str) -> Preview | None:
        with self._lock:
            preview = self._previews.get(plan_id)
        if preview is None or self._clock() - preview.at > PREVIEW_VALID_S:
            return None
        return preview

    def start_apply(self, principal: Principal, plan_id: str) -> Rollout:
        """Start the rollout in the background (refused at once without a fresh preview: the
        approval policy's rule, checked here too so the refusal is not lost in the thread)."""
        from gpuledger.actuator.approval import ApprovalPolicy
        from gpuledger.actuator.workflow import apply
        from gpuledger.optimizer.plan.store import load_record

        self._require_admin(principal, "apply", plan_id)
        checked = ShortWriteWarehouse(self.store)
        ApprovalPolicy.of(self.settings).require_preview(checked, load_record(checked, plan_id), now=None)
        with self._lock:
            existing = self.rollouts.get(plan_id)
            if existing is not None and existing.running:
                raise InputError(f"plan {plan_id}: a rollout started by {existing.user} is still running")
            rollout = Rollout(plan_id, principal.user, utcnow())
            self.rollouts[plan_id] = rollout
            self._previews.pop(plan_id, None)
        cluster = self._cluster()
        wh = ShortWriteWarehouse(self.store, observer=rollout.observe)

        def run() -> None:
            try:
                result = apply(wh, plan_id, principal=principal, settings=self.settings, cluster=cluster)
                rollout.status, rollout.message = result.status, result.message
            except GpuledgerError as exc:
                rollout.status, rollout.message = "failed", str(exc)
            except Exception as exc:  # a bug must not kill the server thread silently
                rollout.status, rollout.message = "failed", f"unexpected error: {exc!r}"
            finally:
                _close(cluster)
                rollout.finished_at = utcnow()
                self.store.refresh(force=True)

        rollout.thread = threading.Thread(target=run, name=f"gpuledger-apply-{plan_id}", daemon=True)
        rollout.thread.start()
        return rollout

    def wait(self, timeout_s: float = 30.0) -> None:
        """Wait for running rollouts and background audit writes (server stop, tests)."""
        deadline = time.monotonic() + timeout_s
        for thread in list(self._background):
            thread.join(max(0.0, deadline - time.monotonic()))
        self._background = [t for t in self._background if t.is_alive()]
        for rollout in list(self.rollouts.values()):
            if rollout.thread is not None:
                rollout.thread.join(max(0.0, deadline - time.monotonic()))


def _close(cluster: Any) -> None:
    close = getattr(cluster, "close", None)
    if callable(close):
        close()


def describe_error(exc: Exception) -> str:
    """One line for the page: our errors are already self-contained."""
    if isinstance(exc, WarehouseBusyError | AccessDeniedError | GpuledgerError):
        return str(exc)
    return f"unexpected error: {exc!r}"
