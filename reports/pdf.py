"""PDF statements with WeasyPrint (rendered by the system's Pango; no browser).

Each statement is laid out with the loosest table limits that still fit one A4 page; its
pages are written to its own PDF and appended to the combined `statements.pdf` (fleet first,
then teams), so the combined file has exactly the statements' pages in order.
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


def layout(html: str, where: Path) -> Any:
    """Lay out one HTML statement (a WeasyPrint Document)."""
    from weasyprint import HTML

    _quiet()
    try:
        return HTML(string=html, base_url=str(where.parent)).render()
    except Exception as exc:  # WeasyPrint raises many kinds; say which statement failed
        raise ReportError(f"{where}: PDF rendering failed ({type(exc).__name__}: {exc})") from None


def fit_one_page(render: Callable[[Limits], str], where: Path) -> tuple[str, Any]:
    """The HTML and layout of the first limits in `LIMITS` that fit one page (else the last)."""
    html, document = "", None
    for limits in LIMITS:
        html = render(limits)
        document = layout(html, where)
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
