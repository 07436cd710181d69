"""Statements finance signs (issue 32): every element inside the page, on A4 and on Letter; the
sharing discount as the platform's funding, not a charge; money CSVs at the currency's decimals.

Cases:
- the month's statements rendered under `reports.paper` A4 and Letter: each PDF page has the
  paper's size (A4 210 x 297 mm, Letter 8.5 x 11 in, in points, computed here), and every word
  poppler's `pdftotext -bbox` finds lies inside the page, left and right inside the 12 mm side
  margins (the summary strip once ran off the page: "... 3,067.0 · 5,52…");
- the pages rasterise (poppler's `pdftoppm`) to PNGs of the paper's size at 50 dpi;
- the fleet statement names the sharing discount as funding by the platform, on a line with no
  GPU-hours of its own (no "0.0"), and no line reads `sharing_discount`; the unallocated line's
  idle GPU-hours and idle cost read "–", not 0;
- summary.csv's money columns have at most 2 decimals (USD), counted on the text.
"""

from __future__ import annotations

import csv
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.reports.monthly import issue_monthly
from gpuledger.warehouse import LoadBatch, Warehouse

PERIOD = "2024-11"
POINTS_PER_MM = 72 / 25.4
PAPER = {"A4": (210 * POINTS_PER_MM, 297 * POINTS_PER_MM), "Letter": (8.5 * 72, 11 * 72)}
SIDE_MARGIN = 12 * POINTS_PER_MM  # reports/html.py's @page margin


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    path = tmp_path_factory.mktemp("paper") / "w.duckdb"
    window = Window(datetime(2024, 11, 3, tzinfo=UTC), datetime(2024, 11, 5, tzinfo=UTC), timedelta(minutes=5))
    sim = Simulation(FleetSpec.default(gpus=48), window, seed=5)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(sim.inventory()))
        for sub, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames, window=sub))
    return path


@pytest.fixture(scope="module", params=["A4", "Letter"])
def report(request: pytest.FixtureRequest, warehouse: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[str, Path]:
    paper = str(request.param)
    out = tmp_path_factory.mktemp(f"paper-{paper}")
    with Warehouse.open(warehouse, read_only=True) as wh:
        result = issue_monthly(wh, Settings(reports={"paper": paper}), PERIOD, out,
                               now=datetime(2024, 12, 2, tzinfo=UTC))
    return paper, result.folder


_PAGE = re.compile(r'<page width="([\d.]+)" height="([\d.]+)">')
_WORD = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>')


def _pages(pdf: Path) -> list[tuple[float, float, list[tuple[float, float, float, float, str]]]]:
    text = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    pages = []
    for chunk in text.split("<page ")[1:]:
        size = _PAGE.match("<page " + chunk)
        assert size
        words = [(float(a), float(b), float(c), float(d), w) for a, b, c, d, w in _WORD.findall(chunk)]
        pages.append((float(size.group(1)), float(size.group(2)), words))
    return pages


def test_every_word_inside_the_page(report: tuple[str, Path]) -> None:
    paper, folder = report
    width, height = PAPER[paper]
    pdfs = sorted((folder / "statements").glob("*.pdf"))
    assert any(p.name == "fleet.pdf" for p in pdfs) and len(pdfs) > 2
    for pdf in pdfs:
        for w, h, words in _pages(pdf):
            assert (w, h) == (pytest.approx(width, abs=0.5), pytest.approx(height, abs=0.5)), pdf.name
            assert words, pdf.name
            outside = [word for word in words
                       if word[0] < SIDE_MARGIN - 1 or word[2] > width - SIDE_MARGIN + 1
                       or word[1] < 0 or word[3] > height]
            assert not outside, (pdf.name, paper, outside[:5])


def test_pages_rasterise_at_the_paper_size(report: tuple[str, Path], tmp_path: Path) -> None:
    paper, folder = report
    width, height = PAPER[paper]
    subprocess.run(["pdftoppm", "-r", "50", "-png", "-f", "1", "-l", "1", str(folder / "statements" / "fleet.pdf"),
                    str(tmp_path / "fleet")], check=True, timeout=120)
    png = next(tmp_path.glob("fleet*.png")).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    px_w, px_h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (px_w, px_h) == (pytest.approx(width / 72 * 50, abs=1), pytest.approx(height / 72 * 50, abs=1))


def test_sharing_discount_reads_as_funding(report: tuple[str, Path]) -> None:
    _, folder = report
    text = subprocess.run(["pdftotext", "-layout", str(folder / "statements" / "fleet.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    flat = " ".join(text.split())
    assert "funded by the platform" in flat and "sharing_discount" not in flat
    line = next(line for line in text.splitlines() if "funded by the platform" in line or "funding" in line)
    assert " 0.0 " not in f" {line} ", line


def test_unallocated_line_idles_nothing(report: tuple[str, Path]) -> None:
    """Capacity nobody held has no "allocated but idle" time: its idle cells read "–", not 0."""
    _, folder = report
    text = subprocess.run(["pdftotext", "-layout", str(folder / "statements" / "fleet.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    line = next(line for line in text.splitlines() if line.split()[:1] == ["unallocated"])
    cells = line.split()
    assert cells.count("–") == 2 and "0.00" not in cells and "0.0" not in cells, line


def test_summary_csv_money_at_two_decimals(report: tuple[str, Path]) -> None:
    _, folder = report
    money = ("list_cost", "sharing_discount", "utilization_adjustment", "redistributed_cost", "cost", "idle_cost")
    with (folder / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows
    for row in rows:
        for column in money:
            value = row[column]
            assert re.fullmatch(r"-?\d+(\.\d{1,2})?", value), (column, value)
