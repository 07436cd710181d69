"""Transitional alias: the snapshot store lives in `gpuledger.warehouse.snapshot_store`.

Why it still exists: `dashboards/actions.py` (another owner's file) imports the old path; delete
this module as soon as it imports `gpuledger.warehouse.snapshot_store` instead.
"""

from gpuledger.warehouse.snapshot_store import Snapshot, SnapshotStore, WarehouseBusyError

__all__ = ["Snapshot", "SnapshotStore", "WarehouseBusyError"]
