"""`gpuledger why` as people read it in a terminal (issue 32: the detail column ran to ~300
characters, or was cut to 17 at 120 columns).

Cases, on the dashboards' small simulated fleet with the demo's waiting workloads
(`commands._demo_waiting.add_waiting`: the simulator's pending scenario, classified against the
fleet):
- at COLUMNS=80 and 120 no line is wider than the terminal; each workload's detail follows the
  table wrapped at spaces: its lines joined again are the JSON's detail exactly, so no number,
  card or node name is split or cut (numbers: every number of the detail is on one line whole);
- `-o wide` prints each detail whole on its workload's line; `-o json` keeps every field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.commands._demo_waiting import add_waiting
from gpuledger.warehouse import Warehouse
from tests.dashboards.conftest import build_demo_warehouse


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = build_demo_warehouse(tmp_path_factory.mktemp("why-table") / "demo.duckdb", gpus=32)
    with Warehouse.open(path) as wh:
        assert add_waiting(wh) > 0
    return path


def _why(capsys: pytest.CaptureFixture[str], warehouse: Path, *args: str) -> str:
    code = main(["--warehouse", str(warehouse), "why", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _entries(text: str) -> dict[str, str]:
    """The lines under "Why each waits", each entry's wrapped lines joined by one space."""
    below = text.split("Why each waits", 1)[1].split("\n\nCost of waiting", 1)[0].splitlines()[1:]
    found: dict[str, list[str]] = {}
    key = ""
    for line in below:
        if line.startswith("    "):
            found[key].append(line.strip())
        else:
            key, _, first = line.partition(": ")
            found[key] = [first]
    return {k: " ".join(v) for k, v in found.items()}


@pytest.mark.parametrize("width", [80, 120])
def test_details_wrap_to_the_terminal_never_inside_a_number(
    warehouse: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int,
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    document = json.loads(_why(capsys, warehouse, "-o", "json"))
    details = {f"{r['namespace']}/{r['name']}": r["detail"] for r in document["waiting"] if r["detail"]}
    assert max(len(d) for d in details.values()) > 200  # the fixture has the long ones
    text = _why(capsys, warehouse)
    assert max(len(line) for line in text.splitlines()) <= width
    assert _entries(text) == details  # every word, in order: nothing split, nothing cut
    lines = text.splitlines()
    for detail in details.values():
        for number in re.findall(r"\d[\d,.]*\d|\d", detail):
            assert any(number in line for line in lines), number


def test_wide_prints_each_detail_on_its_line(warehouse: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    document = json.loads(_why(capsys, warehouse, "-o", "json"))
    lines = _why(capsys, warehouse, "-o", "wide").splitlines()
    for r in document["waiting"]:
        assert any(r["name"] in line and (r["detail"] or "-") in line for line in lines), r["name"]
    assert "Why each waits" not in "\n".join(lines)
