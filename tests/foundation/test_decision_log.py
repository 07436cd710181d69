"""The decision log can be trusted: every note says whether its choice still holds, and the index agrees.

docs/decisions/ holds one note per decision (`NNNN-<slug>.md`) and README.md, the index. Cases:
- every note opens with `# NNNN — title`, a blank line, `Date: YYYY-MM-DD.` and a status line of
  one fixed form: `Status: Accepted.`, `Status: Superseded by [NNNN](file).` or
  `Status: Amended by [NNNN](file), [MMMM](file).`; another wording, a missing line or a stray
  line under it is a fault;
- a status names only notes that exist, each link's number is its file's, and the notes it names
  are later ones, in number order, each once;
- a note "Superseded by N" / "Amended by N" is named back by N on a line of its own under N's
  status (`Supersedes [..](..): ...` / `Amends [..](..): ...`), with the matching kind; and every
  such back-reference is matched by the earlier note's status, so neither side can be forgotten;
- back-references name existing, earlier notes;
- the index has exactly one row per note file and no row without a file (a number listed twice,
  a missing row and a row for a note that does not exist are all faults), rows in number order,
  and each row's link, title, date and status are the note's;
- on the real log there is no fault at all; and the checker, run on a small in-memory log, finds
  nothing in the clean log and the expected fault in each broken copy, so no check passes
  vacuously.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

DECISIONS = Path(__file__).resolve().parents[2] / "docs" / "decisions"

NOTE_FILE = re.compile(r"^(\d{4})-[a-z0-9-]+\.md$")
LINK = r"\[(\d{4})\]\(([^)\s]+)\)"
LINKS = rf"{LINK}(?:, {LINK})*"
TITLE = re.compile(r"^# (\d{4}) — (.+)$")
DATE = re.compile(r"^Date: (\d{4}-\d{2}-\d{2})\.$")
STATUS_BODY = re.compile(rf"^(?:Accepted|(Superseded by|Amended by) {LINKS})$")
BACKREF = re.compile(rf"^(Supersedes|Amends) ({LINKS})(?:: .+)?\.$")
ROW = re.compile(r"^\| (\d{4}) \| \[(.+)\]\(([^)\s]+)\) \| (\d{4}-\d{2}-\d{2}) \| (.+) \|$")

# The status a later note's back-reference implies for the note it names.
STATUS_OF_BACKREF = {"Supersedes": "Superseded by", "Amends": "Amended by"}


@dataclass(frozen=True)
class Status:
    kind: str  # "Accepted", "Superseded by" or "Amended by"
    links: tuple[tuple[str, str], ...]  # (number, file) of each note named

    def text(self) -> str:
        if not self.links:
            return self.kind
        return f"{self.kind} " + ", ".join(f"[{n}]({f})" for n, f in self.links)


def _links(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(re.findall(LINK, text))


def _parse_status(body: str) -> Status | None:
    """`body` is the status without `Status: ` and the final period (the index cell's form)."""
    m = STATUS_BODY.match(body)
    if m is None:
        return None
    return Status(m.group(1) or "Accepted", _links(body))


def _check_links(where: str, links: tuple[tuple[str, str], ...], notes: dict[str, str],
                 own: str, later: bool) -> list[str]:
    """Faults of the links a note's status (`later`) or back-references name."""
    problems = []
    numbers = [n for n, _ in links]
    if numbers != sorted(set(numbers)):
        problems.append(f"{where}: the notes it names are not in number order, each once: {numbers}")
    for number, target in links:
        if not target.startswith(f"{number}-"):
            problems.append(f"{where}: link [{number}]({target}) points to another note's file")
        if target not in notes:
            problems.append(f"{where}: names {target}, which does not exist")
        if later and number <= own:
            problems.append(f"{where}: names {number}, which is not a later note")
        if not later and number >= own:
            problems.append(f"{where}: names {number}, which is not an earlier note")
    return problems


def check_log(notes: dict[str, str], index: str) -> list[str]:
    """Every fault of a decision log: `notes` maps a note's file name to its text."""
    problems: list[str] = []
    statuses: dict[str, Status] = {}  # by number
    backrefs: dict[str, list[tuple[str, str, str]]] = {}  # number -> (kind, earlier number, file)
    heads: dict[str, tuple[str, str, str]] = {}  # number -> (file, title, date)

    for name, text in sorted(notes.items()):
        m = NOTE_FILE.match(name)
        if not m:
            problems.append(f"{name}: not a note file name (NNNN-slug.md)")
            continue
        number = m.group(1)
        lines = text.split("\n")
        title = TITLE.match(lines[0]) if lines else None
        if title is None or title.group(1) != number:
            problems.append(f"{name}: the first line is not '# {number} — title'")
            continue
        date = DATE.match(lines[2]) if len(lines) > 2 and lines[1] == "" else None
        if date is None:
            problems.append(f"{name}: no 'Date: YYYY-MM-DD.' line after the title and a blank line")
            continue
        heads[number] = (name, title.group(2), date.group(1))
        line = lines[3] if len(lines) > 3 else ""
        status = None
        if line.startswith("Status: ") and line.endswith("."):
            status = _parse_status(line[len("Status: "):-1])
        if status is None:
            problems.append(f"{name}: no status line of the fixed form under the date (found {line!r})")
            continue
        statuses[number] = status
        problems += _check_links(f"{name} status", status.links, notes, number, later=True)
        refs = backrefs.setdefault(number, [])
        for extra in lines[4:]:
            if extra == "":
                break
            ref = BACKREF.match(extra)
            if ref is None:
                problems.append(f"{name}: {extra!r} under the status is neither 'Supersedes' nor 'Amends'")
                continue
            links = _links(ref.group(2))
            problems += _check_links(f"{name} {ref.group(1)}", links, notes, number, later=False)
            refs += [(ref.group(1), n, f) for n, f in links]

    # Both sides of every relation name each other, with the same kind.
    for number, status in statuses.items():
        for later, _ in status.links:
            named = [kind for kind, earlier, _ in backrefs.get(later, []) if earlier == number]
            if later in statuses and [STATUS_OF_BACKREF[k] for k in named] != [status.kind]:
                problems.append(f"{number} is '{status.kind} {later}' but {later} does not name it back "
                                f"as such (it says {named or 'nothing'})")
    for number, refs in backrefs.items():
        for kind, earlier, _ in refs:
            status = statuses.get(earlier)
            if status is None:
                continue
            if status.kind != STATUS_OF_BACKREF[kind] or number not in [n for n, _ in status.links]:
                problems.append(f"{number} says '{kind} {earlier}' but {earlier}'s status is "
                                f"'{status.text()}'")

    # The index: one row per note, each row the note's own link, title, date and status.
    rows: list[tuple[str, str, str, str, str]] = []
    for line in index.split("\n"):
        if re.match(r"^\| \d", line):
            row = ROW.match(line)
            if row is None:
                problems.append(f"index: malformed row {line!r}")
            else:
                rows.append((row[1], row[2], row[3], row[4], row[5]))
    numbers = [r[0] for r in rows]
    for number, count in Counter(numbers).items():
        if count > 1:
            problems.append(f"index: {number} has {count} rows")
    if numbers != sorted(numbers):
        problems.append("index: rows are not in number order")
    for number in sorted(set(heads) - set(numbers)):
        problems.append(f"index: has no row for {heads[number][0]}")
    for number, row_title, target, row_date, cell in rows:
        if number not in heads:
            problems.append(f"index: row {number} ({target}) names no such note")
            continue
        name, note_title, note_date = heads[number]
        if target != name:
            problems.append(f"index: row {number} links {target}, not {name}")
        if row_title != note_title:
            problems.append(f"index: row {number} title {row_title!r} is not the note's {note_title!r}")
        if row_date != note_date:
            problems.append(f"index: row {number} date {row_date} is not the note's {note_date}")
        shown = _parse_status(cell)
        if number in statuses and shown != statuses[number]:
            problems.append(f"index: row {number} shows status {cell!r}, the note says "
                            f"{statuses[number].text()!r}")
    return problems


def _real_log() -> tuple[dict[str, str], str]:
    notes = {p.name: p.read_text(encoding="utf-8") for p in DECISIONS.glob("*.md") if p.name != "README.md"}
    return notes, (DECISIONS / "README.md").read_text(encoding="utf-8")


def test_the_real_log_has_no_fault():
    notes, index = _real_log()
    assert len(notes) > 100  # the glob found the log
    problems = check_log(notes, index)
    assert problems == [], "\n".join(problems)


def test_the_real_log_marks_replaced_notes():
    """The relations that motivated the statuses stay recorded (issue 28 item 5)."""
    notes, _ = _real_log()
    by_number = {name[:4]: text.split("\n")[3] for name, text in notes.items()}
    assert by_number["0040"] == "Status: Superseded by [0120](0120-serving-store.md)."
    assert by_number["0035"] == "Status: Amended by [0060](0060-collectors-centred-minute-read.md)."
    assert by_number["0051"].startswith("Status: Amended by [0122](")


# A small log whose every relation is named on both sides.
CLEAN_NOTES = {
    "0001-a.md": "# 0001 — A\n\nDate: 2026-01-01.\nStatus: Superseded by [0003](0003-c.md).\n\nBody.\n",
    "0002-b.md": "# 0002 — B\n\nDate: 2026-01-02.\nStatus: Amended by [0003](0003-c.md).\n\nBody.\n",
    "0003-c.md": (
        "# 0003 — C\n\nDate: 2026-01-03.\nStatus: Accepted.\n"
        "Supersedes [0001](0001-a.md): all of it.\nAmends [0002](0002-b.md): its second half.\n\nBody.\n"
    ),
}
CLEAN_INDEX = """# Decisions

| # | decision | date | status |
|---|---|---|---|
| 0001 | [A](0001-a.md) | 2026-01-01 | Superseded by [0003](0003-c.md) |
| 0002 | [B](0002-b.md) | 2026-01-02 | Amended by [0003](0003-c.md) |
| 0003 | [C](0003-c.md) | 2026-01-03 | Accepted |
"""


def _note_edit(name: str, old: str, new: str) -> Callable[[dict[str, str], str], tuple[dict[str, str], str]]:
    def edit(notes: dict[str, str], index: str) -> tuple[dict[str, str], str]:
        assert old in notes[name]
        return {**notes, name: notes[name].replace(old, new)}, index
    return edit


def _index_edit(old: str, new: str) -> Callable[[dict[str, str], str], tuple[dict[str, str], str]]:
    def edit(notes: dict[str, str], index: str) -> tuple[dict[str, str], str]:
        assert old in index
        return notes, index.replace(old, new)
    return edit


def test_the_checker_finds_nothing_in_a_clean_log():
    assert check_log(CLEAN_NOTES, CLEAN_INDEX) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(_note_edit("0002-b.md", "Status: Amended by [0003](0003-c.md).\n", ""),
                     "0002-b.md: no status line", id="status-line-missing"),
        pytest.param(_note_edit("0002-b.md", "Status: Amended by", "Status: Changed by"),
                     "0002-b.md: no status line", id="status-of-another-form"),
        pytest.param(_note_edit("0003-c.md", "Status: Accepted.", "Status: accepted"),
                     "0003-c.md: no status line", id="status-without-its-period"),
        pytest.param(_note_edit("0002-b.md", "[0003](0003-c.md).\n", "[0004](0004-d.md).\n"),
                     "names 0004-d.md, which does not exist", id="status-names-a-missing-note"),
        pytest.param(_note_edit("0002-b.md", "[0003](0003-c.md).\n", "[0003](0001-a.md).\n"),
                     "points to another note's file", id="status-link-to-another-file"),
        pytest.param(_note_edit("0003-c.md", "Status: Accepted.", "Status: Amended by [0001](0001-a.md)."),
                     "which is not a later note", id="status-names-an-earlier-note"),
        pytest.param(_note_edit("0003-c.md", "Supersedes [0001](0001-a.md): all of it.\n", ""),
                     "0001 is 'Superseded by 0003' but 0003 does not name it back", id="superseded-not-named-back"),
        pytest.param(_note_edit("0003-c.md", "Amends [0002](0002-b.md): its second half.\n", ""),
                     "0002 is 'Amended by 0003' but 0003 does not name it back", id="amended-not-named-back"),
        pytest.param(_note_edit("0003-c.md", "Supersedes [0001]", "Amends [0001]"),
                     "0001 is 'Superseded by 0003' but 0003 does not name it back", id="named-back-as-the-other-kind"),
        pytest.param(_note_edit("0002-b.md", "Status: Amended by [0003](0003-c.md).", "Status: Accepted."),
                     "0003 says 'Amends 0002' but 0002's status is 'Accepted'", id="back-reference-without-status"),
        pytest.param(_note_edit("0003-c.md", "Amends [0002](0002-b.md)", "Amends [0005](0005-e.md)"),
                     "names 0005-e.md, which does not exist", id="back-reference-to-a-missing-note"),
        pytest.param(_note_edit("0003-c.md", "its second half.\n", "its second half.\nSee also 0002.\n"),
                     "is neither 'Supersedes' nor 'Amends'", id="stray-line-under-the-status"),
        pytest.param(_index_edit("| 0002 | [B](0002-b.md) | 2026-01-02 | Amended by [0003](0003-c.md) |\n", ""),
                     "index: has no row for 0002-b.md", id="index-misses-a-note"),
        pytest.param(_index_edit("| 0003 | [C](0003-c.md) | 2026-01-03 | Accepted |\n",
                                 "| 0003 | [C](0003-c.md) | 2026-01-03 | Accepted |\n"
                                 "| 0004 | [D](0004-d.md) | 2026-01-04 | Accepted |\n"),
                     "index: row 0004 (0004-d.md) names no such note", id="index-lists-a-missing-note"),
        pytest.param(_index_edit("| 0003 | [C](0003-c.md) | 2026-01-03 | Accepted |\n",
                                 "| 0003 | [C](0003-c.md) | 2026-01-03 | Accepted |\n" * 2),
                     "index: 0003 has 2 rows", id="index-lists-a-note-twice"),
        pytest.param(_index_edit("2026-01-02 | Amended by [0003](0003-c.md) |", "2026-01-02 | Accepted |"),
                     "index: row 0002 shows status 'Accepted'", id="index-status-differs"),
        pytest.param(_index_edit("2026-01-03 | Accepted |", "2026-01-03 | Superseded by [0001](0001-a.md) |"),
                     "index: row 0003 shows status", id="index-status-names-another-note"),
        pytest.param(_index_edit("| 0003 | [C](0003-c.md) | 2026-01-03 |", "| 0003 | [C](0003-c.md) | 2026-02-03 |"),
                     "index: row 0003 date 2026-02-03", id="index-date-differs"),
        pytest.param(_index_edit("| 0001 | [A](0001-a.md) | 2026-01-01 | Superseded by [0003](0003-c.md) |",
                                 "| 0001 | [A](0001-a.md) | Superseded |"),
                     "index: malformed row", id="index-row-without-status-column"),
    ],
)
def test_the_checker_finds_each_fault(
    edit: Callable[[dict[str, str], str], tuple[dict[str, str], str]], expected: str,
) -> None:
    notes, index = edit(CLEAN_NOTES, CLEAN_INDEX)
    problems = check_log(notes, index)
    assert any(expected in p for p in problems), problems
