"""Laying out the PDF statements (issue 34 item 4, docs/decisions/0257).

Cases, on plain HTML candidates of known length (a line a paragraph; 40 lines take two A4
pages, 20 one):
- `fit_one_page` keeps the first candidate that fits one page; when the loosest does not fit it
  lays out the tightest second, and when that takes two pages too it stops there (two layouts,
  not one per candidate); counted by wrapping `layout`;
- `write_statements` in two processes (this one and one of `gpuledger.reports.pdf`) and in this
  process alone write the same files: the same candidates kept, the same page counts, the same
  text per statement (poppler's `pdftotext`), and a combined PDF whose pages are the
  statements' pages in order; the other process really took a share (counted);
- a caller's script without a `__main__` guard runs once (a multiprocessing worker would have
  imported it again: found by hand with the first, `ProcessPoolExecutor`, version);
- a layout process that fails (its PDF's folder is missing) is one line naming the folder.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuledger.reports import pdf


def _html(lines: int, title: str) -> str:
    body = "".join(f"<p>{title} line {i}</p>" for i in range(lines))
    return f"<html><body><h1>{title}</h1>{body}</body></html>"


def _text(path: Path, page: int | None = None) -> str:
    pages = ["-f", str(page), "-l", str(page)] if page else []
    out = subprocess.run(["pdftotext", *pages, str(path), "-"], capture_output=True, text=True, check=True)
    return " ".join(out.stdout.split())


@pytest.mark.parametrize(("lengths", "kept", "layouts"), [
    ((20, 15, 10, 5), 0, 1),          # the loosest fits: one layout
    ((40, 40, 20, 10), 2, 4),       # loosest, tightest (fits), then in order until one fits
    ((40, 40, 40, 40), 3, 2),     # the tightest takes two pages: none fits, two layouts
    ((40, 20, 10, 5), 1, 3),
])
def test_fit_one_page_keeps_the_loosest_that_fits(lengths: tuple[int, ...], kept: int, layouts: int,
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = pdf.layout

    def counted(html: str, where: Path, paper: str = "A4") -> object:
        calls.append(len(html))
        return real(html, where, paper)

    monkeypatch.setattr(pdf, "layout", counted)
    index, document = pdf.fit_one_page([_html(n, "s") for n in lengths], tmp_path / "s.pdf")
    assert index == kept and len(calls) == layouts
    assert (len(document.pages) == 1) == (min(lengths) <= 20)


def test_statements_in_processes_equal_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    statements = {"fleet": (40, 40), "team-a": (20, 10), "team-b": (40, 20), "team-c": (15, 10)}
    shares: list[int] = []
    real = pdf._in_process

    def counted(jobs: list[pdf.Job], paper: str) -> list[tuple[int, int]]:
        shares.append(len(jobs))
        return real(jobs, paper)

    monkeypatch.setattr(pdf, "_in_process", counted)
    written = {}
    for processes in (1, 2):
        folder = tmp_path / f"p{processes}"
        folder.mkdir()
        jobs = [(folder / f"{key}.pdf", [_html(n, key) for n in lengths]) for key, lengths in statements.items()]
        kept, counts = pdf.write_statements(jobs, folder / "statements.pdf", processes=processes)
        texts = {key: _text(folder / f"{key}.pdf") for key in statements}
        written[processes] = (kept, {p.name: n for p, n in counts.items()}, texts)
        combined = folder / "statements.pdf"
        page = 1
        for key in statements:  # the combined file: each statement's pages, in order
            for own in range(1, counts[folder / f"{key}.pdf"] + 1):
                assert _text(combined, page) == _text(folder / f"{key}.pdf", own)
                page += 1
        assert counts[combined] == page - 1
    assert len(shares) == 1 and 0 < shares[0] < len(statements)  # the other process took a share
    assert written[1] == written[2]
    assert written[1][0] == [1, 0, 1, 0]
    assert written[1][1] == {"fleet.pdf": 2, "team-a.pdf": 1, "team-b.pdf": 1, "team-c.pdf": 1,
                             "statements.pdf": 5}


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """The layout processes are fresh interpreters of `gpuledger.reports.pdf`: a caller's script
    without `if __name__ == "__main__"` is not imported again in them (a multiprocessing worker
    would run it a second time)."""
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "from pathlib import Path\n"
        "from gpuledger.reports.pdf import write_statements\n"
        f"here = Path({str(tmp_path)!r})\n"
        "with (here / 'runs').open('a') as runs:\n"
        "    runs.write('run\\n')\n"
        "html = '<html><body><p>x</p></body></html>'\n"
        "jobs = [(here / f'{k}.pdf', [html]) for k in ('a', 'b', 'c')]\n"
        "print(write_statements(jobs, here / 'all.pdf', processes=2)[1][here / 'all.pdf'])\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3"
    assert (tmp_path / "runs").read_text() == "run\n"


def test_a_failed_layout_process_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    html = "<html><body><p>x</p></body></html>"
    jobs = [(tmp_path / "a.pdf", [html * 50]), (missing / "b.pdf", [html])]  # b, the shorter: the other process's
    with pytest.raises(pdf.ReportError) as caught:
        pdf.write_statements(jobs, tmp_path / "all.pdf", processes=2)
    message = str(caught.value)
    assert "\n" not in message and "a PDF layout process failed" in message and "No such file" in message
