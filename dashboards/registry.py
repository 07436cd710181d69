"""The dashboard's pages, declared once: path, title, who may open it, how it is drawn.

Why a registry: the navigation, the URL → page lookup, the links hidden from leads and the
render callback all need the list of pages. Written as a dict of titles, an if-chain in the
callback and a hard-coded set of admin paths, a new page meant edits in three modules that
could disagree; now a page is one module under `pages/` and one `PAGES.add(Page(...))` line
here, and everything else reads `PAGES` (a `core.registry.Registry`, keyed by path).
"""

from __future__ import annotations

from gpuledger.core.access import Principal
from gpuledger.core.errors import InputError
from gpuledger.core.registry import Registry
from gpuledger.dashboards.access import EVERY_ROLE, FLEET_ROLES, has_role
from gpuledger.dashboards.pages import capacity, fleet, plans, queues, team, teams
from gpuledger.dashboards.pages.common import Page, PageContext

PAGES: Registry[Page[PageContext]] = Registry("page", error=InputError, key=lambda page: page.path)
"""In navigation order."""
PAGES.add(Page("/teams", "Teams", EVERY_ROLE, teams.show, what="the teams overview"))
PAGES.add(Page("/team", "My team", EVERY_ROLE, team.show, what="any team's page"))
PAGES.add(Page("/fleet", "Fleet", FLEET_ROLES, fleet.show, what="the fleet page"))
PAGES.add(Page("/queues", "Queues", EVERY_ROLE, queues.show, what="queues"))
PAGES.add(Page("/capacity", "Capacity now", EVERY_ROLE, capacity.show, what="capacity now"))
PAGES.add(Page("/plans", "Plans", FLEET_ROLES, plans.show, what="plans"))


def landing(principal: Principal | None) -> Page[PageContext]:
    """Where `/` and unknown paths land: Teams for admins, viewers and finance (all teams at
    once is what they come for), a lead's own team page for a lead."""
    if principal is not None and has_role(principal, FLEET_ROLES):
        return PAGES.get("/teams")
    return PAGES.get("/team")


def page_for(pathname: str | None, principal: Principal | None = None) -> Page[PageContext]:
    """The page at a path (a trailing slash is ignored; unknown paths → `landing`)."""
    path = (pathname or "/").rstrip("/") or "/"
    return PAGES.get(path) if path in PAGES else landing(principal)


def page_of(pathname: str | None, principal: Principal | None = None) -> str:
    """The path of `page_for(pathname, principal)`."""
    return page_for(pathname, principal).path
