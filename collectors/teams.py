"""Team resolution for the collectors: the rule itself lives in `core.teams`.

Kept as a name for importers outside the collectors' own modules (tests read
`collectors.teams.ksm_label` / `resolve_team`); the collectors import `core.teams` directly.
"""

from __future__ import annotations

from gpuledger.core.teams import ksm_label, resolve_team

__all__ = ["ksm_label", "resolve_team"]
