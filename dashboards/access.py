"""Who is asking, and which pages a role opens: the dashboard's side of access control.

Distinct from `core.access` (principals and the role map, shared with the CLI): this module
decides whom an HTTP request comes from, the user and groups an authenticating proxy vouches
for, or the dev user, and names the roles each page is for.

The dashboard sits behind an authenticating proxy (the oauth2-proxy pattern). The proxy sets
`X-Forwarded-User` / `X-Forwarded-Groups` (names from `Settings.access`); anyone can send those
headers, so they are believed only when the TCP peer is one of `access.proxy_addresses`
(addresses or CIDR networks). Roles come from config through `core.access.resolve_roles`.

Rules, in order:
1. a trusted peer with a non-empty user header → that user and groups;
2. otherwise, in dev mode (`--dev-user`, loopback only) → the dev user;
3. otherwise nobody → the app answers 401 (production mode never guesses).

A dev user in a config without any role bindings is made admin, so `gpuledger demo` is usable
out of the box; with role bindings configured the dev user gets exactly what config grants.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Protocol

from gpuledger.core.access import Principal, resolve_roles
from gpuledger.core.config import AccessSettings
from gpuledger.core.errors import AccessDeniedError, ConfigError, InputError


class Headers(Protocol):
    """What we need of request headers (a dict or werkzeug's `Headers`)."""

    def get(self, key: str, /) -> str | None: ...


LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def is_loopback_host(host: str) -> bool:
    """True when `host` (a bind address or name) only accepts connections from this machine."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_dev_bind(host: str, dev_user: str | None) -> None:
    """Refuse `--dev-user` on a non-loopback bind: it would hand out an identity to the network."""
    if dev_user is not None and not is_loopback_host(host):
        raise InputError(
            f"--dev-user {dev_user!r} is only allowed when serving on loopback "
            f"(127.0.0.1, ::1 or localhost), not on --host {host}; behind a proxy, drop --dev-user "
            "and let the proxy send the user header"
        )


def _networks(addresses: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    nets = []
    for text in addresses:
        try:
            nets.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError:
            raise ConfigError(
                f"access.proxy_addresses: {text!r} is not an IP address or CIDR network"
            ) from None
    return tuple(nets)


@dataclass(frozen=True)
class AccessPolicy:
    """Turns a request's peer address and headers into a `Principal` (or None: 401)."""

    access: AccessSettings
    dev_user: str | None = None
    dev_groups: tuple[str, ...] = ()
    _nets: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_nets", _networks(self.access.proxy_addresses))
        if self.dev_user is not None and not self.dev_user.strip():
            raise InputError("--dev-user: the user name must not be empty")

    @property
    def dev_mode(self) -> bool:
        return self.dev_user is not None

    def trusted_peer(self, remote_addr: str | None) -> bool:
        if not remote_addr:
            return False
        try:
            address = ipaddress.ip_address(remote_addr.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in net for net in self._nets)

    def principal_for(self, remote_addr: str | None, headers: Headers) -> Principal | None:
        """The requester (rules in the module docstring); None means unauthenticated."""
        if self.trusted_peer(remote_addr):
            user = (headers.get(self.access.user_header) or "").strip()
            if user:
                groups = (headers.get(self.access.groups_header) or "").split(",")
                return resolve_roles(user, groups, self.access)
        if self.dev_user is not None:
            return self.dev_principal()
        return None

    def dev_principal(self) -> Principal:
        assert self.dev_user is not None
        principal = resolve_roles(self.dev_user, self.dev_groups, self.access)
        if not self.access.roles:
            return Principal(principal.user, principal.groups, True, principal.lead_of, principal.viewer)
        return principal


def role_label(principal: Principal) -> str:
    """A short human description of what the principal may do, for the page header."""
    if principal.admin:
        return "admin"
    parts = []
    if principal.lead_of:
        parts.append("lead of " + ", ".join(sorted(principal.lead_of)))
    if principal.viewer:
        parts.append("viewer")
    return "; ".join(parts) or "no role"


FLEET_ROLES: frozenset[str] = frozenset({"admin", "viewer"})
"""Who sees fleet-wide pages and data (Fleet, all queues, all plans' details)."""
EVERY_ROLE: frozenset[str] = frozenset({"admin", "viewer", "lead"})
"""Pages every known user sees (each page still scopes a lead to their teams' data)."""


def has_role(principal: Principal, roles: frozenset[str]) -> bool:
    """True when the principal holds one of `roles` (`admin`, `viewer`, `lead`)."""
    return (
        ("admin" in roles and principal.admin)
        or ("viewer" in roles and principal.viewer)
        or ("lead" in roles and bool(principal.lead_of))
    )


def can_see_fleet(principal: Principal) -> bool:
    """Fleet-wide pages (Fleet, all queues, all plans' details) are for admins and viewers."""
    return has_role(principal, FLEET_ROLES)


def scope(principal: Principal, team: str | None) -> set[str] | None:
    """The teams a request may read (None: all), by the API's rule and the pages that answer as
    it does (the Capacity page); raises `AccessDeniedError` otherwise: `team` (the request's
    `?team=`) not the principal's to see, or a principal with no role that reads team data."""
    if team is not None:
        if not principal.can_see_team(team):
            raise AccessDeniedError(f"user {principal.user!r} may not read team {team!r}'s data "
                                    "(leads read only the teams they lead)")
        return {team}
    if principal.admin or principal.viewer:
        return None
    if principal.lead_of:
        return set(principal.lead_of)
    raise AccessDeniedError(f"user {principal.user!r} has no role that reads team data")
