"""PDF statements with WeasyPrint (rendered by the system's Pango; no browser).

Each statement is laid out with the loosest table limits that still fit one page (A4 or
Letter, `reports.paper`); its pages are written to its own PDF, and the statements' PDFs are
joined into the combined `statements.pdf` (fleet first, then teams) with pypdf, so the combined
file has exactly the statements' pages in order.

Why processes (issue 34 item 4, docs/decisions/0257): laying out is pure Python under the GIL,
about 0.3–1.5 s a statement, the fleet statement's two pages the longest; a report's dozen-odd
statements are independent, so `reports.pdf_processes` spawned processes lay them out at once
(spawned, not forked: the report's process holds DuckDB's and Polars' threads). A process gets
the statement's HTML already rendered under each limit and returns which one it kept.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from gpuledger.core.errors import ReportError


def _quiet() -> None:
    # WeasyPrint logs every unsupported CSS property at WARNING; keep the CLI output clean.
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)


PAPERS = ("A4", "Letter")


def layout(html: str, where: Path, paper: str = "A4") -> Any:
    """Lay out one HTML statement (a WeasyPrint Document) on `paper` (`reports.paper`): a
    stylesheet after the statement's own sets the page size, so one HTML serves both."""
    from weasyprint import CSS, HTML

    _quiet()
    try:
        return HTML(string=html, base_url=str(where.parent)).render(
            stylesheets=[CSS(string=f"@page {{ size: {paper} !important; }}")])  # over the statement's A4
    except Exception as exc:  # WeasyPrint raises many kinds; say which statement failed
        raise ReportError(f"{where}: PDF rendering failed ({type(exc).__name__}: {exc})") from None


def fit_one_page(candidates: Sequence[str], where: Path, paper: str = "A4") -> tuple[int, Any]:
    """Which of `candidates` (a statement's HTML under each limit, loosest first) to keep, and
    its layout: the first that fits one page, else the last. The last is tried second: a
    tighter limit only drops rows, so when the tightest takes two pages none fits (the fleet
    statement's usual case: two layouts, not one per limit)."""
    first = layout(candidates[0], where, paper)
    last = len(candidates) - 1
    if len(first.pages) == 1 or last == 0:
        return 0, first
    tightest = layout(candidates[last], where, paper)
    if len(tightest.pages) > 1:
        return last, tightest
    for index in range(1, last):
        document = layout(candidates[index], where, paper)
        if len(document.pages) == 1:
            return index, document
    return last, tightest


def _write_statement(pdf: Path, candidates: Sequence[str], paper: str) -> tuple[int, int]:
    """Lay out one statement (`fit_one_page`) and write its PDF: (kept candidate, pages)."""
    index, document = fit_one_page(candidates, pdf, paper)
    document.write_pdf(pdf)
    return index, len(document.pages)


def write_statements(statements: Sequence[tuple[Path, Sequence[str]]], combined: Path, paper: str = "A4",
                     processes: int = 1) -> tuple[list[int], dict[Path, int]]:
    """Write each statement's PDF (per statement: its path and its HTML under each limit,
    loosest first; `fit_one_page`) in up to `processes` processes (no more than the statements
    or the CPUs this process may use; one: in this process), then all of them, in order, into
    `combined`. Returns the candidate kept per statement and the page counts of every file."""
    workers = min(processes, len(statements), len(os.sched_getaffinity(0)))
    if workers <= 1:
        kept = [_write_statement(pdf, candidates, paper) for pdf, candidates in statements]
    else:
        try:
            with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
                kept = list(pool.map(_write_statement, *zip(*statements, strict=True),
                                     [paper] * len(statements)))
        except BrokenProcessPool as exc:  # a layout process killed (out of memory)
            raise ReportError(f"{combined.parent}: a PDF layout process died ({exc})") from None
    counts = {pdf: pages for (pdf, _), (_, pages) in zip(statements, kept, strict=True)}
    if statements:
        from pypdf import PdfWriter

        joined = PdfWriter()
        for pdf, _ in statements:
            joined.append(pdf)
        with combined.open("wb") as out:
            joined.write(out)
        counts[combined] = sum(pages for _, pages in kept)
    return [index for index, _ in kept], counts
