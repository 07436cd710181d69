"""Who may do what: roles from config (users and proxy groups → admin, lead of team X, viewer).

The dashboard and the CLI both call `resolve_roles`; the checks (`require_admin`,
`can_see_team`) are enforced where the action happens, on the server side.

Who the user *is* comes from a source that vouches for it, never from the user's own say-so:
the authenticating proxy (dashboard), the Kubernetes credentials in use (CLI in a cluster,
`actuator.identity`), or the operating system's account (`os_identity`, CLI elsewhere). A name
given by `--as` is recorded as `declared_by` the real account, so the audit log shows both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace

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
    declared_by: str | None = None
    """Set when `user` was self-declared (`--as`, development only): who really declared it."""

    @property
    def actor(self) -> str:
        """The name the audit log records: the real principal, and a self-declared name only
        next to the account that declared it."""
        if self.declared_by is None:
            return self.user
        return f"{self.user} (self-declared by {self.declared_by})"

    def self_declared(self, by: str) -> Principal:
        return replace(self, declared_by=by)

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


def os_identity() -> tuple[str, list[str]]:
    """The operating-system account running this process, and its groups.

    Why not `getpass.getuser()` alone: it reads `$LOGNAME`/`$USER` first, which anyone can set
    (`USER=alice gpuledger plans approve`); the account of the real user id cannot be chosen.
    `getpass` is the fallback where there is no `pwd` (Windows).
    """
    try:
        import grp
        import pwd
    except ImportError:
        import getpass

        return getpass.getuser(), []
    user = pwd.getpwuid(os.getuid()).pw_name
    groups = []
    for gid in dict.fromkeys([os.getgid(), *os.getgroups()]):
        try:
            groups.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return user, groups
