"""PDF statements with WeasyPrint (rendered by the system's Pango; no browser).

Each statement is laid out with the loosest table limits that still fit one page (A4 or
Letter, `reports.paper`); its pages are written to its own PDF and appended to the combined
`statements.pdf` (fleet first, then teams), so the combined file has exactly the statements' pages in order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpuledger.core.errors import ReportError
from gpuledger.reports.statement import LIMITS, Limits


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


def fit_one_page(render: Callable[[Limits], str], where: Path, paper: str = "A4") -> tuple[str, Any]:
    """The HTML and layout of the first limits in `LIMITS` that fit one page (else the last)."""
    html, document = "", None
    for limits in LIMITS:
        html = render(limits)
        document = layout(html, where, paper)
        if len(document.pages) == 1:
            break
    return html, document


def write_pdfs(documents: Sequence[tuple[Path, Any]], combined: Path | None = None) -> dict[Path, int]:
    """Write each laid-out statement, then all of them into `combined`; return page counts."""
    counts: dict[Path, int] = {}
    for path, document in documents:
        document.write_pdf(path)
        counts[path] = len(document.pages)
    if combined is not None and documents:
        pages = [page for _, document in documents for page in document.pages]
        documents[0][1].copy(pages).write_pdf(combined)
        counts[combined] = len(pages)
    return counts
