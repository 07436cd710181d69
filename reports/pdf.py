"""PDF statements with WeasyPrint (rendered by the system's Pango; no browser).

Each statement is laid out with the loosest table limits that still fit one page (A4 or
Letter, `reports.paper`); its pages are written to its own PDF, and the statements' PDFs are
joined into the combined `statements.pdf` (fleet first, then teams) with pypdf, so the combined
file has exactly the statements' pages in order.

Why processes (issue 34 item 4, docs/decisions/0257): laying out is pure Python under the GIL,
about 0.3–1.5 s a statement, the fleet statement's two pages the longest; a report's dozen-odd
statements are independent, so with `reports.pdf_processes` = N the report's process lays out
a share and N - 1 processes of this module (`python -m gpuledger.reports.pdf`, which reads its
share as JSON on stdin) the others at once. A fresh interpreter of this module, not a
multiprocessing worker: a spawned worker imports the caller's main script again (a script
without a `__main__` guard would run itself again), a forked one inherits DuckDB's and
Polars' threads mid-state. A process gets each statement's HTML already rendered under each
limit and answers which one it kept and its pages.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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


Job = tuple[Path, Sequence[str]]
"""One statement to write: its PDF's path and its HTML under each limit, loosest first."""


def write_statements(statements: Sequence[Job], combined: Path, paper: str = "A4",
                     processes: int = 1) -> tuple[list[int], dict[Path, int]]:
    """Write each statement's PDF (`fit_one_page`) in up to `processes` processes (this one and
    processes of this module; no more than the statements or the CPUs this process may use),
    then all of them, in order, into `combined`. Returns the candidate kept per statement and
    the page counts of every file."""
    workers = max(1, min(processes, len(statements), len(os.sched_getaffinity(0))))
    shares = _shares(statements, workers)
    kept: dict[int, tuple[int, int]] = {}
    with ThreadPoolExecutor(max(workers - 1, 1)) as waiting:  # threads only wait on the processes
        others = [(share, waiting.submit(_in_process, [statements[i] for i in share], paper))
                  for share in shares[1:]]
        kept.update((i, _write_statement(*statements[i], paper)) for i in shares[0])
        for share, answer in others:
            kept.update(zip(share, answer.result(), strict=True))
    ordered = [kept[i] for i in range(len(statements))]
    counts = {pdf: pages for (pdf, _), (_, pages) in zip(statements, ordered, strict=True)}
    if statements:
        from pypdf import PdfWriter

        joined = PdfWriter()
        for pdf, _ in statements:
            joined.append(pdf)
        with combined.open("wb") as out:
            joined.write(out)
        counts[combined] = sum(pages for _, pages in ordered)
    return [index for index, _ in ordered], counts


def _shares(statements: Sequence[Job], workers: int) -> list[list[int]]:
    """The statements' indices in `workers` shares of about equal work, the longest HTML first
    to the lightest share (the fleet statement alone, where it outweighs the rest); each share
    in statement order."""
    shares: list[list[int]] = [[] for _ in range(workers)]
    load = [0] * workers
    for i in sorted(range(len(statements)), key=lambda i: -len(statements[i][1][0])):
        lightest = load.index(min(load))
        shares[lightest].append(i)
        load[lightest] += len(statements[i][1][0])
    return [sorted(share) for share in shares]


def _in_process(jobs: Sequence[Job], paper: str) -> list[tuple[int, int]]:
    """`_write_statement` of each job in a process of this module: (kept candidate, pages) each."""
    request = json.dumps({"paper": paper, "statements": [[str(pdf), list(htmls)] for pdf, htmls in jobs]})
    done = subprocess.run([sys.executable, "-m", "gpuledger.reports.pdf"], input=request,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ReportError(f"{jobs[0][0].parent}: a PDF layout process failed: {said}")
    return [(int(index), int(pages)) for index, pages in json.loads(done.stdout)]


def _main() -> int:
    """`python -m gpuledger.reports.pdf`: write the statements of the JSON request on stdin
    (`_in_process`), answer [kept candidate, pages] per statement as JSON on stdout."""
    request = json.load(sys.stdin)
    paper = request["paper"]
    try:
        answer = [_write_statement(Path(pdf), htmls, paper) for pdf, htmls in request["statements"]]
    except ReportError as exc:
        print(exc, file=sys.stderr)
        return 1
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
