"""Transitional alias: renamed to `actuator.rollout_context` (the name says which context).

Kept only until `actuator/quota_rollout.py` imports the new name; delete it then.
"""

from gpuledger.actuator.rollout_context import RolloutContext

__all__ = ["RolloutContext"]
