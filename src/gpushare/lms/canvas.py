"""The Canvas gradebook import CSV of one assignment, as Canvas's own importer parses it.

Canvas documents the file in the Instructure Community guide "How do I import grades in the
Gradebook?" (community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook
/ta-p/807): the columns Student, ID, SIS User ID, SIS Login ID and Section, then a column per
assignment named ``<assignment> (<assignment id>)``, and a "Points Possible" row. What the file
must be is what the importer does with it, in instructure/canvas-lms
``lib/gradebook_importer.rb`` (class GradebookImporter, commit 00b222d77ee4):

- ``csv_stream``: Ruby's CSV; a cell that looks like a number with a decimal comma
  (``/^-?[0-9.,]+%?$/``) has it turned into a full stop (``decimal_comma_to_period``), so grades
  are written with a full stop and an identity this converter would change is refused (it would
  no longer match anyone).
- ``row_has_student_headers?``, ``update_column_count``: the header is the row whose first cells
  contain "Student" and "ID", then "SIS User ID", "SIS Login ID", "Section" (else "Invalid header
  row"); matched by ``include?``, so the UTF-8 BOM Canvas's own export writes (``CSVWithI18n``,
  ``include_bom``) does not hide it.
- ``strip_non_assignment_columns``: a column whose name contains "Current Score", "Final
  Grade" and the like (``NON_ASSIGNMENT_COLUMN_HEADERS``) is dropped without a word: such an
  assignment name is refused here.
- ``parse_assignments`` with ``Assignment.title_and_id`` (``/\\A(.*)\\s\\((\\d+)\\)\\z/``):
  ``Lab (1234)`` is assignment 1234 whatever its title; without an ID, the assignment of that
  title, else a new one.
- ``check_for_non_student_row``: a row whose first cell contains "Points Possible" sets the
  assignment's points possible (so the points must be the assignment's); a student whose name
  contains it is written without a name (the ID finds them).
- ``process_student``: the student is the user of the ID column, else of the SIS User ID, else
  SIS Login ID, else one whose name is the Student cell. Names are not unique, so an entry needs
  one of the three identities. A blank grade cell is no grade (``no_score?``).

UTF-8 with a BOM (as Canvas exports, and as Excel needs to show CJK names), CRLF line ends (RFC
4180). Every cell goes through :func:`gpushare.reports.clean.csv_writer` (no control character,
no formula); an identity the guard would change is refused rather than written changed.
"""

from __future__ import annotations

import io
import re

from gpushare.lms.plan import Entry, Plan, Unmapped, lacking, number
from gpushare.lms.roster import Person
from gpushare.reports import clean

FILE = "canvas-import.csv"
UNMAPPED = "canvas-unmapped.csv"
HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_ROW = "Points Possible"
BOM = "\ufeff"
# GradebookImporter::NON_ASSIGNMENT_COLUMN_HEADERS (matched as substrings of a column name)
_NOT_ASSIGNMENTS = (
    "Current Score",
    "Current Points",
    "Current Grade",
    "Final Score",
    "Final Points",
    "Final Grade",
    "Override Score",
    "Override Grade",
    "Override Status",
)
# GradebookImporter::GRADEBOOK_IMPORTER_RESERVED_NAMES
_RESERVED = {*HEADER, "LastName", "FirstName", "Integration ID", "Root Account"}
_DECIMAL_COMMA = re.compile(r"^-?[0-9.,]+%?$")  # the decimal_comma_to_period converter's test


class AssignmentError(ValueError):
    """The assignment as given cannot be a Canvas import column; one line."""


def column(assignment: str, assignment_id: str | None) -> str:
    """The assignment's column name: ``<assignment> (<id>)``, or the title alone."""
    title = assignment.strip()  # never empty: the export refuses that first
    if assignment_id is not None and not assignment_id.isdecimal():
        raise AssignmentError(
            f"--assignment-id {assignment_id!r}: a Canvas assignment ID is digits "
            "(the number after /assignments/ in the assignment's address)"
        )
    taken = next((n for n in _NOT_ASSIGNMENTS if n in title), None)
    if taken or title in _RESERVED:
        raise AssignmentError(
            f"--assignment {title!r}: Canvas takes a column named so for "
            f"{'a total' if taken else 'a student column'}, not an assignment"
        )
    if assignment_id is None and re.search(r"\s\(\d+\)$", title):
        raise AssignmentError(
            f"--assignment {title!r}: Canvas reads the number in brackets as an assignment ID; "
            "give the ID with --assignment-id"
        )
    name = f"{title} ({assignment_id})" if assignment_id is not None else title
    if clean.csv_cell(name) != name:
        raise AssignmentError(f"--assignment {title!r}: starts like a spreadsheet formula")
    return name


def _identities(person: Person) -> dict[str, str]:
    return {
        "ID": person.canvas_id,
        "SIS User ID": person.sis_user_id,
        "SIS Login ID": person.sis_login_id,
    }


def _why_not(person: Person) -> str:
    """Why ``person`` cannot be a row of the import ("" when they can)."""
    ids = [value for value in _identities(person).values() if value]
    if not ids:
        return "no canvas_id, sis_user_id or sis_login_id in the roster"
    for value in ids:
        if clean.csv_cell(value) != value or _as_read(value) != value:
            return f"the identity {clean.line(value)!r} cannot be written as Canvas reads it"
    return ""


def _as_read(cell: str) -> str:
    """``cell`` as the importer's ``decimal_comma_to_period`` converter turns it: a cell of only
    digits, commas and full stops (and a % at the end) keeps its last separator as a full stop
    and loses the others (``1.234,5`` is ``1234.5``)."""
    if not _DECIMAL_COMMA.match(cell):
        return cell
    *parts, last = re.split(r"[,.]", cell)
    return f"{''.join(parts)}.{last}" if parts else last


def entries(plan: Plan) -> tuple[list[Entry], list[Unmapped]]:
    """The rows of the import, and the entries it cannot carry (no identity, an identity two
    entries share) with the plan's unmapped learners."""
    kept, left = lacking(plan, _why_not)
    taken: dict[tuple[str, str], str] = {}
    rows: list[Entry] = []
    for entry in kept:
        keys = [(k, v) for k, v in _identities(entry.person).items() if v]
        other = next((taken[k] for k in keys if k in taken), None)
        if other is not None:
            why = f"its Canvas identity is also {other}'s"
            left.append(Unmapped(entry.person.learner, why, entry.row, entry.points))
            continue
        taken.update(dict.fromkeys(keys, entry.person.learner))
        rows.append(entry)
    return rows, left


def text(rows: list[Entry], plan: Plan, name: str) -> str:
    """The import file: the header, the Points Possible row, one row per entry."""
    buf = io.StringIO()
    out = clean.csv_writer(buf, lineterminator="\r\n")
    out.writerow([*HEADER, name])
    out.writerow([POINTS_ROW, "", "", "", "", number(plan.points)])
    for entry in rows:
        p = entry.person
        shown = p.name or p.learner
        if POINTS_ROW in shown:  # the importer would take the row for the points
            shown = ""
        grade = "" if entry.points is None else number(entry.points)
        out.writerow([shown, p.canvas_id, p.sis_user_id, p.sis_login_id, p.section, grade])
    return BOM + buf.getvalue()
