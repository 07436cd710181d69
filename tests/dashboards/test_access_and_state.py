"""Access rules and URL state, as plain functions.

Cases:
- loopback detection: 127.0.0.1, ::1, localhost, 127.5.5.5 are loopback; 0.0.0.0, a LAN address
  and a host name are not;
- `--dev-user` is refused on a non-loopback bind with a message naming the host, accepted on
  loopback, and irrelevant without a dev user;
- headers are believed only from a proxy address (exact address, CIDR, IPv4-mapped IPv6);
  from anyone else they are ignored: no principal in production mode, the dev user in dev mode;
- an empty user header is no user; groups are split on commas and trimmed;
- roles come from config: group admin, user lead of one team, viewer; an unknown user has none;
- the dev user is admin only when no roles are configured at all;
- a bad proxy address in config is a ConfigError naming the key;
- URL state: parses period/team/model/node/plan, drops malformed values (bad month, SQL-ish
  text, over-long names), falls back to the default period, round-trips through the query;
- page_of maps unknown paths to /team; the month before crosses the year (`core.period`).
"""

from __future__ import annotations

import pytest

from gpuledger.core.config import AccessSettings, RoleBinding
from gpuledger.core.errors import ConfigError, InputError
from gpuledger.core.period import Period
from gpuledger.dashboards.access import AccessPolicy, check_dev_bind, is_loopback_host
from gpuledger.dashboards.registry import page_of
from gpuledger.dashboards.state import ViewState

ROLES = (
    RoleBinding(subject="platform-admins", kind="group", role="admin"),
    RoleBinding(subject="leo", kind="user", role="lead", team="nlp"),
    RoleBinding(subject="vic", kind="user", role="viewer"),
)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "[::1]", "localhost", "127.5.5.5"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "dash.example.com"])
def test_non_loopback_hosts(host: str) -> None:
    assert not is_loopback_host(host)


def test_dev_user_refused_off_loopback() -> None:
    with pytest.raises(InputError, match=r"--dev-user 'bob'.*0\.0\.0\.0"):
        check_dev_bind("0.0.0.0", "bob")
    check_dev_bind("127.0.0.1", "bob")
    check_dev_bind("0.0.0.0", None)


def test_headers_trusted_only_from_proxy() -> None:
    policy = AccessPolicy(AccessSettings(proxy_addresses=("127.0.0.1", "10.0.0.0/8"), roles=ROLES))
    headers = {"X-Forwarded-User": "ada", "X-Forwarded-Groups": " platform-admins , x ,"}
    p = policy.principal_for("127.0.0.1", headers)
    assert p is not None and p.user == "ada" and p.admin and p.groups == frozenset({"platform-admins", "x"})
    assert policy.principal_for("10.20.30.40", headers) is not None
    assert policy.principal_for("::ffff:10.1.1.1", headers) is not None
    assert policy.principal_for("192.168.1.5", headers) is None
    assert policy.principal_for(None, headers) is None
    assert policy.principal_for("127.0.0.1", {}) is None
    assert policy.principal_for("127.0.0.1", {"X-Forwarded-User": "  "}) is None


def test_custom_header_names() -> None:
    access = AccessSettings(user_header="X-Auth-Request-User", groups_header="X-Auth-Request-Groups",
                            roles=ROLES)
    policy = AccessPolicy(access)
    assert policy.principal_for("127.0.0.1", {"X-Forwarded-User": "ada"}) is None
    p = policy.principal_for("127.0.0.1", {"X-Auth-Request-User": "ada",
                                            "X-Auth-Request-Groups": "platform-admins"})
    assert p is not None and p.admin


def test_roles_from_config() -> None:
    policy = AccessPolicy(AccessSettings(roles=ROLES))
    lead = policy.principal_for("127.0.0.1", {"X-Forwarded-User": "leo"})
    assert lead is not None and not lead.admin and lead.lead_of == frozenset({"nlp"})
    assert lead.can_see_team("nlp") and not lead.can_see_team("vision")
    viewer = policy.principal_for("127.0.0.1", {"X-Forwarded-User": "vic"})
    assert viewer is not None and viewer.viewer and viewer.can_see_team("vision") and not viewer.admin
    stranger = policy.principal_for("127.0.0.1", {"X-Forwarded-User": "sam"})
    assert stranger is not None and not stranger.known


def test_dev_user_when_no_trusted_header() -> None:
    policy = AccessPolicy(AccessSettings(proxy_addresses=("10.9.9.9",), roles=ROLES), dev_user="leo")
    # headers from a non-proxy peer are ignored: the dev user (a lead by config) is used
    p = policy.principal_for("127.0.0.1", {"X-Forwarded-User": "ada", "X-Forwarded-Groups": "platform-admins"})
    assert p is not None and p.user == "leo" and not p.admin


def test_dev_user_admin_only_without_role_config() -> None:
    open_policy = AccessPolicy(AccessSettings(), dev_user="demo")
    assert open_policy.dev_principal().admin
    strict = AccessPolicy(AccessSettings(roles=ROLES), dev_user="demo")
    assert not strict.dev_principal().known


def test_bad_proxy_address_is_config_error() -> None:
    with pytest.raises(ConfigError, match=r"access\.proxy_addresses: 'not-an-ip'"):
        AccessPolicy(AccessSettings(proxy_addresses=("not-an-ip",)))


def test_view_state_parsing() -> None:
    s = ViewState.from_query("?period=2026-10&team=nlp&model=H100-80GB&node=a100-mig-000&plan=mig-1", "2026-11")
    assert s == ViewState("2026-10", "nlp", "H100-80GB", "a100-mig-000", "mig-1")
    assert ViewState.from_query(s.to_query(), "2000-01") == s
    bad = ViewState.from_query("period=2026-13&team=x'%20OR%201=1--&model=" + "a" * 300, "2026-11")
    assert bad == ViewState("2026-11")
    assert ViewState.from_query(None, "2026-11") == ViewState("2026-11")
    assert ViewState("2026-11", team="nlp").href("/fleet") == "/fleet?period=2026-11&team=nlp"


def test_pages_and_periods() -> None:
    assert page_of("/fleet/") == "/fleet"
    assert page_of("/nope") == "/team"
    assert page_of(None) == "/team"
    assert str(Period.exact("2026-01").shift(-1)) == "2025-12"
    assert str(Period.exact("2026-11").shift(-1)) == "2026-10"
