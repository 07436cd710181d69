"""The page registry is the one list of pages: navigation, URL lookup, roles and rendering.

Cases:
- every registered page has its link in the layout (in registry order) and its href and
  style among the sync callback's outputs; nothing else is a navigation link;
- `page_for` finds a page by path (trailing slash ignored) and sends unknown paths to the principal's landing page (Teams for fleet roles);
- a lead sees the links of exactly the pages whose roles include `lead`, an admin all of them;
- for every page a lead may not open, `render_page` refuses it with the page's `what`, and a
  viewer gets the page itself (its registered render, not a refusal);
- the app and the callbacks do not import each other (the cycle is broken).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from gpuledger.core.access import resolve_roles
from gpuledger.dashboards import shell
from gpuledger.dashboards.callbacks import render_page
from gpuledger.dashboards.registry import PAGES, page_for
from tests.dashboards.conftest import ADMIN, LEAD, PERIOD, VIEWER, settings_with_roles

SETTINGS = settings_with_roles()
ADMIN_P = resolve_roles(ADMIN, ("platform-admins",), SETTINGS.access)
LEAD_P = resolve_roles(LEAD, (), SETTINGS.access)
VIEWER_P = resolve_roles(VIEWER, (), SETTINGS.access)
DASHBOARDS = Path(__file__).parents[2] / "dashboards"


def _ids(component: Any) -> list[str]:
    out = []
    props = component.to_plotly_json()
    if props.get("type") == "Link" and props["props"].get("className") == "nav-link":
        out.append(props["props"]["id"])
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children]:
        if hasattr(child, "to_plotly_json"):
            out += _ids(child)
    return out


def test_nav_is_the_registry(shared_app: Any) -> None:
    assert _ids(shell.layout(60)) == [p.nav_id for p in PAGES]
    key = next(k for k in shared_app.dash.callback_map if "whoami.children" in k)
    for page in PAGES:  # the key names every output: `..url.search...nav-team.href..`
        assert f"{page.nav_id}.href" in key and f"{page.nav_id}.style" in key
    assert key.count(".href") == len(PAGES)


def test_page_lookup() -> None:
    assert page_for("/fleet/").path == "/fleet"
    # unknown paths land on Teams for admins and viewers (finance), on My team for a lead
    assert page_for("/nope").path == "/team" and page_for(None).path == "/team"
    assert page_for("/", ADMIN_P).path == "/teams" and page_for(None, LEAD_P).path == "/team"


def test_nav_follows_roles() -> None:
    lead = shell.nav_visible(LEAD_P)
    assert [style == {} for style in lead] == ["lead" in p.roles for p in PAGES]
    assert not all(style == {} for style in lead)  # some page is closed to leads
    assert all(style == {} for style in shell.nav_visible(ADMIN_P))


@pytest.mark.parametrize("page", [p for p in PAGES if "lead" not in p.roles], ids=lambda p: p.path)
def test_closed_pages_refused_by_registry(shared_app: Any, page: Any) -> None:
    refused = render_page(shared_app, LEAD_P, {"page": page.path, "period": PERIOD})
    assert refused.id == "refusal" and page.what in str(refused.to_plotly_json())
    shown = render_page(shared_app, VIEWER_P, {"page": page.path, "period": PERIOD})
    assert getattr(shown, "id", None) != "refusal"


def test_app_and_callbacks_import_no_cycle() -> None:
    def imports(name: str) -> set[str]:
        tree = ast.parse((DASHBOARDS / name).read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "gpuledger.dashboards.app" not in imports("callbacks.py")
    assert "gpuledger.dashboards.callbacks" not in imports("wiring.py")
    assert "gpuledger.dashboards.app" not in imports("wiring.py")
