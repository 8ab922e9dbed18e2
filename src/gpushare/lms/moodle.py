"""The Moodle grade import CSV (gradeimport_csv) of one grade item, as Moodle parses it.

Moodle documents the import in "Grade import" (docs.moodle.org/en/Grade_import): a CSV with a
header row, one column that identifies the user (mapped under "Identify user by"), and a
column per grade item, optionally a feedback column per item. What the file must be is what
moodle/moodle reads, in ``lib/csvlib.class.php`` (``csv_import_reader::load_csv_content``,
commit cf29c007d253) and ``grade/import/csv/classes/load_data.php``
(``gradeimport_csv_load_data``, commit 0289d8c7665458):

- ``load_csv_content``: a UTF-8 BOM is removed (``core_text::trim_utf8_bom``), CR LF becomes
  LF; PHP's ``fgetcsv`` splits cells (comma by default, ``"`` the enclosure, RFC 4180 quoting)
  and treats a backslash before a quote as an escape, so an identifier with a backslash is
  refused here. Every row has as many cells as the header ("csvweirdcolumns" otherwise).
- ``grade_import_mapping_form`` (``grade/import/grade_import_form.php``): "Identify user by" maps
  one column to the user's ``email``, ``username`` or ``idnumber``; each other column to a
  grade item, "Feedback for <item>" or nothing.
- ``prepare_import_grade_data``, ``check_user_exists``: an identifier that finds no user (or two)
  aborts the whole import; a row with a blank identifier keeps the user of the row before it
  (``$this->studentid`` is not reset), so every row written here has one.
- ``update_grade_item``: a grade of ``''`` or ``-`` is no grade, else ``unformat_float`` reads a
  number (a full stop is always the decimal point), in the item's points.
- ``create_feedback``: a feedback cell is stored as FORMAT_MOODLE text (``grade_import_commit``
  in ``grade/import/lib.php``), so ``&``, ``<`` and ``>`` are written as HTML entities.

UTF-8 with a BOM (Moodle removes it; Excel needs it to show CJK names), CRLF line ends. Every
cell goes through :func:`gpushare.reports.clean.csv_writer`; an identifier the guard would
change is refused rather than written changed.
"""

from __future__ import annotations

import html
import io

from gpushare.classroom import texts
from gpushare.classroom.gradebook import Row
from gpushare.lms.plan import GRADED, Entry, Plan, Unmapped, lacking, number
from gpushare.lms.roster import Person
from gpushare.reports import clean, messages

FILE = "moodle-import.csv"
UNMAPPED = "moodle-unmapped.csv"
BOM = "\ufeff"
# --moodle-id (the roster column) -> the column's header: Moodle's own name of the field
KINDS = {"email": "Email address", "username": "Username", "idnumber": "ID number"}
FEEDBACK = "Feedback"
MAX_ITEMS = 8  # lost checks named in a feedback cell; the rest are counted


def entries(plan: Plan, kind: str) -> tuple[list[Entry], list[Unmapped]]:
    """The rows of the import, and the entries it cannot carry with the plan's unmapped."""

    def why_not(person: Person) -> str:
        value = getattr(person, kind)
        if not value:
            return f"no {kind} in the roster"
        if clean.csv_cell(value) != value or "\\" in value:
            return f"the {kind} {clean.line(value)!r} cannot be written as Moodle reads it"
        return ""

    return lacking(plan, why_not)


def feedback(row: Row, lang: str) -> str:
    """A short summary of the points ``row`` lost, check by check, in ``lang``. Only a check
    learners may see now is named; what the others lost is one sum, so the summary still adds
    up to the grade beside it and names no hidden check."""
    if row.score is None:
        return ""
    word = texts.text
    lost = [c for c in row.cells.values() if c.score is None or c.score < c.max_score]
    if not lost:
        return word("lms_all_passed", lang, score=row.score, max=row.max_score)
    shown = [c for c in lost if c.visibility == "visible"]
    items = [
        word(
            "lms_unjudged" if c.score is None else "lms_item",
            lang,
            number=c.number,
            title=messages.title(c.number, lang),
            points=c.max_score - (c.score or 0),  # lms_unjudged says no points
        )
        for c in shown[:MAX_ITEMS]
    ]
    if len(shown) > MAX_ITEMS:
        items.append(word("lms_more", lang, n=len(shown) - MAX_ITEMS))
    unseen = sum(c.max_score - (c.score or 0) for c in lost if c.visibility != "visible")
    if unseen:
        items.append(word("lms_not_shown", lang, points=unseen))
    listed = messages.label("list_sep", lang).join(items)
    return word("lms_lost", lang, score=row.score, max=row.max_score, lost=listed)


def text(
    rows: list[Entry],
    kind: str,
    name: str,
    *,
    with_feedback: bool,
    lang: str | None,
    fallback_lang: str = messages.REFERENCE,
) -> str:
    """The import file: the identifier column, the grade column, the feedback column if asked
    (in ``lang``, else in the language each learner's own feedback was written in)."""
    buf = io.StringIO()
    out = clean.csv_writer(buf, lineterminator="\r\n")
    out.writerow([KINDS[kind], name, *([FEEDBACK] if with_feedback else [])])
    for entry in rows:
        grade = "" if entry.points is None else number(entry.points)
        cells = [getattr(entry.person, kind), grade]
        if with_feedback:
            said = ""
            if entry.state == GRADED and entry.row is not None:
                # in the row's own language, else the command's (chosen by gpushare.cli)
                own = entry.row.lang if entry.row.lang in messages.langs() else fallback_lang
                said = html.escape(feedback(entry.row, lang or own), quote=False)
            cells.append(said)
        out.writerow(cells)
    return BOM + buf.getvalue()
