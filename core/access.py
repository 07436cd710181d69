"""Who may do what: roles from config (users and proxy groups → admin, lead of team X, viewer).

The dashboard and the CLI both call `resolve_roles`; the checks (`require_admin`,
`can_see_team`) are enforced where the action happens, on the server side.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuledger.core.config import AccessSettings
from gpuledger.core.errors import AccessDeniedError


@dataclass(frozen=True, slots=True)
class Principal:
    """A user with the roles config grants them."""

    user: str
    groups: frozenset[str]
    admin: bool
    lead_of: frozenset[str]
    viewer: bool

    @property
    def known(self) -> bool:
        return self.admin or self.viewer or bool(self.lead_of)

    def can_see_team(self, team: str) -> bool:
        """Admins and viewers see every team; a lead sees only the teams they lead."""
        return self.admin or self.viewer or team in self.lead_of

    def visible_teams(self, teams: Iterable[str]) -> list[str]:
        return [t for t in teams if self.can_see_team(t)]


def resolve_roles(user: str, groups: Iterable[str], access: AccessSettings) -> Principal:
    group_set = frozenset(g.strip() for g in groups if g.strip())
    admin = viewer = False
    lead_of: set[str] = set()
    for binding in access.roles:
        subject_matches = (binding.kind == "user" and binding.subject == user) or (
            binding.kind == "group" and binding.subject in group_set
        )
        if not subject_matches:
            continue
        if binding.role == "admin":
            admin = True
        elif binding.role == "viewer":
            viewer = True
        elif binding.team:
            lead_of.add(binding.team)
    return Principal(user, group_set, admin, frozenset(lead_of), viewer)


def require_admin(principal: Principal, action: str) -> None:
    if not principal.admin:
        raise AccessDeniedError(f"user {principal.user!r} may not {action}: needs the admin role")
