"""Transitional alias: renamed to `actuator.rollout_progress` (the name says which progress).

Kept only until `actuator/quota_rollout.py` imports the new name; delete it then.
"""

from gpuledger.actuator.rollout_progress import QuotaProgress, QuotaStep

__all__ = ["QuotaProgress", "QuotaStep"]
