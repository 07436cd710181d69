"""The package installs and imports under one name: `gpuledger`.

Cases: a wheel built from the tree has `gpuledger` as its only top-level package and carries
every stage (and the MIG profile data) inside it, with no `tests`, `tools` or `bench`; importing
the whole product never loads a module under a bare stage name (`core`, `collectors`, ...), so
no module lives twice in `sys.modules`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("core", "collectors", "warehouse", "analytics", "optimizer", "actuator", "dashboards",
          "reports", "simulator")


def _copy_tree(target: Path) -> None:
    """Copy the checkout (links kept as links) so the build leaves nothing in the repository."""
    ignore = shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", "tests", "bench")
    shutil.copytree(ROOT, target, symlinks=True, ignore=ignore)


@pytest.mark.slow
def test_wheel_has_one_top_level_package(tmp_path: Path):
    source = tmp_path / "src"
    _copy_tree(source)
    out = tmp_path / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
         str(source)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    wheel = next(out.glob("gpuledger-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"gpuledger"}
    for stage in STAGES:
        assert f"gpuledger/{stage}/__init__.py" in names, stage
    assert "gpuledger/core/data/mig_profiles.yaml" in names
    dist_info = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(dist_info).decode().split() == ["gpuledger"]


def test_no_module_is_imported_under_a_bare_stage_name():
    code = (
        "import pkgutil, importlib, sys, gpuledger\n"
        "for info in pkgutil.walk_packages(gpuledger.__path__, 'gpuledger.'):\n"
        "    if info.name.endswith('__main__'):\n"
        "        continue\n"
        "    importlib.import_module(info.name)\n"
        f"bare = sorted(m for m in sys.modules if m.split('.')[0] in {STAGES!r})\n"
        "print(len([m for m in sys.modules if m.startswith('gpuledger.')]), bare)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    count, bare = result.stdout.split(" ", 1)
    assert int(count) > 100
    assert bare.strip() == "[]"
