"""The generic plug-in registry (`core.registry.Registry`), on its own.

Cases:
- order: iteration, `names()` and `items()` follow registration order; `before=` puts a name
  just ahead of another (a device source ahead of the fallback); `add` takes the name the
  implementation carries (`key`), and refuses without one;
- strictness: a name registered twice is refused (even the same object), and so is a `before=`
  naming nothing; `unregister` withdraws a name (and refuses an unknown one);
- unknown names: `get` raises the point's own error class, in one line, with the point's
  wording and every known name (`known: none` when there is none);
- lazy declarations: `register_lazy` lists the name in its declared place without importing its
  module; `get` imports it and hands out the attribute; a target that is not `module:attribute`
  is refused;
- discovery: with `package`, `names()` lists the package's modules without importing them
  (helpers starting with `_` are not listed, and are never imported by name); `get` imports
  `<package>.<name>`, which registers itself or exposes `attribute`; a discovered registry is
  ordered by name; a name with no module is unknown, while a module that exists but needs a
  missing one raises that `ModuleNotFoundError` (not "unknown");
- `find` gives the first implementation, in order, that a predicate accepts.
"""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.core.errors import InputError, PlanError
from gpuledger.core.registry import Registry


def _registry(**kwargs) -> Registry[str]:
    return Registry("widget", error=InputError, **kwargs)


# 1. Order -------------------------------------------------------------------------------------
def test_order_is_registration_order_and_before_places_ahead():
    r = _registry()
    r.register("b", "B")
    r.register("a", "A")
    r.register("fallback", "F")
    r.register("c", "C", before="fallback")
    r.register("first", "1", before="b")
    assert r.names() == ("first", "b", "a", "c", "fallback")
    assert list(r) == ["1", "B", "A", "C", "F"]
    assert r.items() == (("first", "1"), ("b", "B"), ("a", "A"), ("c", "C"), ("fallback", "F"))
    assert len(r) == 5 and "c" in r and "z" not in r and 3 not in r


def test_add_uses_the_key_the_implementation_carries():
    r: Registry[str] = Registry("page", error=InputError, key=lambda path: path.strip("/"))
    assert r.add("/teams") == "/teams"
    r.add("/fleet", before="teams")
    assert r.names() == ("fleet", "teams") and r.get("teams") == "/teams"
    with pytest.raises(ValueError, match="needs a `key`"):
        _registry().add("x")


# 2. Strictness --------------------------------------------------------------------------------
def test_a_name_is_registered_once():
    r = _registry()
    r.register("a", "A")
    with pytest.raises(ValueError, match="widget 'a' is registered twice"):
        r.register("a", "A")  # even the same object: a second registration is a bug
    with pytest.raises(ValueError, match="registered twice"):
        r.register_lazy("a", "json:dumps")
    with pytest.raises(ValueError, match="cannot go before 'nope'"):
        r.register("b", "B", before="nope")
    with pytest.raises(ValueError, match="non-empty string"):
        r.register("", "E")
    assert r.names() == ("a",)


def test_unregister_withdraws_a_name():
    r = _registry()
    r.register("a", "A")
    r.register("b", "B")
    r.unregister("a")
    assert r.names() == ("b",)
    r.register("a", "A2")  # free again, now at the end
    assert r.names() == ("b", "a") and r.get("a") == "A2"
    with pytest.raises(InputError, match="widget 'zz': unknown"):
        r.unregister("zz")


# 3. Unknown names -----------------------------------------------------------------------------
def test_unknown_name_is_one_line_of_the_points_own_error_with_the_known_names():
    r: Registry[str] = Registry("plan kind", error=PlanError, missing="no rollout")
    r.register("mig", "M")
    r.register("quota", "Q")
    with pytest.raises(PlanError) as info:
        r.get("autoscale")
    assert str(info.value) == "plan kind 'autoscale': no rollout (known: mig, quota)"
    assert "\n" not in str(info.value)
    with pytest.raises(InputError) as empty:
        _registry().get("x")
    assert str(empty.value) == "widget 'x': unknown (known: none)"


# 4. Lazy declarations -------------------------------------------------------------------------
@pytest.fixture
def tmp_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A folder on sys.path and a unique name prefix; every module under it is forgotten after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    prefix = f"regtest_{uuid.uuid4().hex[:8]}"
    yield tmp_path, prefix
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_lazy_declaration_is_listed_in_place_and_imported_on_first_use(tmp_modules):
    root, prefix = tmp_modules
    _write(root / f"{prefix}_heavy.py", """
        IMPORTS = []
        IMPORTS.append("imported")

        def implementation():
            return "heavy result"
    """)
    r: Registry[object] = Registry("advice kind", error=InputError)
    r.register("early", "E")
    r.register_lazy("heavy", f"{prefix}_heavy:implementation")
    r.register("late", "L")
    assert r.names() == ("early", "heavy", "late")
    assert f"{prefix}_heavy" not in sys.modules  # naming it imported nothing
    fn = r.get("heavy")
    assert callable(fn) and fn() == "heavy result"
    assert sys.modules[f"{prefix}_heavy"].IMPORTS == ["imported"]
    assert r.get("heavy") is fn and list(r)[1] is fn  # resolved once, kept in its place
    with pytest.raises(ValueError, match="is not 'module:attribute'"):
        r.register_lazy("bad", f"{prefix}_heavy.implementation")


# 5. Discovery ---------------------------------------------------------------------------------
def _package(root: Path, name: str) -> None:
    """A package whose modules register into `registry.R` (a), expose `PART` (b), are helpers
    (_helper), or exist but import something missing (broken)."""
    _write(root / name / "__init__.py", '"""A plug-in package."""\n')
    _write(root / name / "registry.py", f"""
        from gpuledger.core.errors import InputError
        from gpuledger.core.registry import Registry

        R = Registry("queue system", error=InputError, missing="no toy support",
                     package="{name}.parts", attribute="PART")
    """)
    _write(root / name / "parts" / "__init__.py", "")
    _write(root / name / "parts" / "zeta.py", f"""
        from {name}.registry import R

        R.register("zeta", "zeta registered itself")
    """)
    _write(root / name / "parts" / "alpha.py", 'PART = "alpha by attribute"\n')
    _write(root / name / "parts" / "_helper.py", 'PART = "never discovered"\n')
    _write(root / name / "parts" / "broken.py", "import regtest_no_such_module_anywhere\n")


def test_discovery_lists_modules_without_importing_and_imports_on_get(tmp_modules):
    root, prefix = tmp_modules
    _package(root, prefix)
    registry = __import__(f"{prefix}.registry", fromlist=["R"]).R
    assert registry.names() == ("alpha", "broken", "zeta")  # by name; _helper is not one
    assert not [m for m in sys.modules if m.startswith(f"{prefix}.parts.")]
    assert registry.get("zeta") == "zeta registered itself"
    assert registry.get("alpha") == "alpha by attribute"
    assert f"{prefix}.parts.zeta" in sys.modules and f"{prefix}.parts.alpha" in sys.modules
    with pytest.raises(InputError) as info:
        registry.get("_helper")
    assert str(info.value) == "queue system '_helper': no toy support (known: alpha, broken, zeta)"
    assert f"{prefix}.parts._helper" not in sys.modules
    with pytest.raises(InputError, match=r"queue system 'slurm': no toy support \(known: alpha, broken, zeta\)"):
        registry.get("slurm")
    with pytest.raises(InputError, match="no toy support"):
        registry.get("not-a-module")  # not an identifier: never imported
    with pytest.raises(ModuleNotFoundError, match="regtest_no_such_module_anywhere"):
        registry.get("broken")  # exists, but needs what is missing: that error, not "unknown"


def test_discovered_names_and_explicit_ones_merge_by_name(tmp_modules):
    root, prefix = tmp_modules
    _package(root, prefix)
    registry = __import__(f"{prefix}.registry", fromlist=["R"]).R
    registry.register("beta", "beta by hand")
    assert registry.names() == ("alpha", "beta", "broken", "zeta")
    registry.unregister("beta")
    with pytest.raises(ValueError, match="needs a `package`"):
        Registry("x", error=InputError, attribute="PART")


def test_find_gives_the_first_accepted_in_order():
    r = _registry()
    for name in ("a", "bb", "cc", "ddd"):
        r.register(name, name.upper())
    assert r.find(lambda impl: len(impl) == 2) == "BB"
    assert r.find(lambda impl: len(impl) == 9) is None
