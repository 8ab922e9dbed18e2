"""``gpushare class export CLASS_DIR --canvas --moodle``: a class's grades in each LMS's import.

It reads a finished class folder (``class grade`` or ``class merge``; a regrade's too): the
per-learner ``results.json`` files every output of a class is made from, after checking that
``grades.csv`` lists the same learners, scores and snapshots (a grade still running, or a folder
copied in part, would not). A results.json that cannot be read stops the export: no learner is
left out in silence.

For each LMS it writes, by default into the class folder (``--to DIR`` elsewhere):

- the import file (:mod:`.canvas`, :mod:`.moodle`), a row per roster entry the LMS can identify
  (:mod:`.plan` says what each gets), readable by its owner only: it holds the roster's e-mail
  addresses and SIS IDs, which grades.csv does not;
- a side file, ``canvas-unmapped.csv`` or ``moodle-unmapped.csv``, of everyone the import does
  not carry, with their scores, so none is lost; written every time, empty or not, so a stale
  one never passes for this export's.

Exit status 0 when the files were written, 2 when nothing was.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from gpushare.classroom import gradebook
from gpushare.classroom.gradebook import Row
from gpushare.lms import canvas, moodle, plan
from gpushare.lms.plan import Entry, Plan, Unmapped
from gpushare.lms.roster import Roster, RosterError, read
from gpushare.reports import clean

UNMAPPED_HEADER = ["learner", "reason", "status", "score", "points", "snapshot", "folder"]


class ExportError(Exception):
    """Nothing can be exported; one line (exit 2)."""


@dataclass(frozen=True)
class Written:
    """One LMS's files and what went into them."""

    path: Path
    side: Path
    rows: list[Entry]
    unmapped: list[Unmapped]
    plan: Plan


def load(class_dir: Path) -> list[Row]:
    """The rows of a finished class folder; ExportError when it is not one."""
    if not class_dir.is_dir():
        raise ExportError(f"no such class folder: {class_dir}")
    try:
        rows = gradebook.load_rows(class_dir, strict=True)
    except ValueError as exc:
        raise ExportError(f"{exc}: nothing exported") from None
    if not rows:
        raise ExportError(f"{class_dir}: no <learner>/results.json (not a class grade's folder)")
    _same_as_csv(class_dir, rows)
    return rows


def _same_as_csv(class_dir: Path, rows: list[Row]) -> None:
    """grades.csv must list what the results hold: learner, score, status, snapshot per row."""
    path = class_dir / gradebook.CSV_NAME
    try:
        listed = _key_columns(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ExportError(
            f"{path}: cannot be read ({exc}); is {class_dir} a finished class grade?"
        ) from None
    if listed != _key_columns(gradebook.csv_text(rows, [])):
        raise ExportError(
            f"{path} does not list what the results.json files beside it hold (a grade still "
            "running, or a folder copied in part?): run class grade or class merge again"
        )


def _key_columns(text: str) -> list[tuple[str, ...]]:
    keys = ("learner", "score", "status", "snapshot")
    return [tuple(r.get(k) or "" for k in keys) for r in csv.DictReader(io.StringIO(text))]


def points_of(text: str | None) -> Decimal | None:
    """``--points``: a positive number of points (to the cent), or None (the lab's maximum)."""
    if text is None:
        return None
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = Decimal(0)
    if not value.is_finite() or value <= 0 or value != value.quantize(Decimal("0.01")):
        raise ExportError(f"--points {text!r}: a number of points above 0 (e.g. 100 or 12.5)")
    return value


@dataclass(frozen=True)
class ExportOptions:
    """What ``class export`` writes: which LMS's import, for which assignment, how."""

    lms: list[str]  # "canvas", "moodle" or both
    roster: Path | None
    assignment: str
    assignment_id: str | None = None  # Canvas
    points: str | None = None  # default: the lab's maximum score
    moodle_id: str = "email"
    with_feedback: bool = False  # Moodle: a column saying the points lost
    missing_zero: bool = False  # a roster learner with no submission gets 0, not blank
    lang: str | None = None  # offered, as the command line checks it; None: each learner's
    fallback_lang: str = "en"  # a learner's own is unknown: the command's (cli.choose_lang)
    to: Path | None = None  # default: the class folder


def export(class_dir: Path, opts: ExportOptions) -> tuple[list[Written], Roster]:
    """Write each LMS's import and side file; ExportError (one line) when nothing can be."""
    _checked(opts)
    possible = points_of(opts.points)
    try:
        column = canvas.column(opts.assignment, opts.assignment_id) if "canvas" in opts.lms else ""
        people = read(opts.roster) if opts.roster is not None else Roster({})
    except (canvas.AssignmentError, RosterError) as exc:
        raise ExportError(str(exc)) from None
    rows = load(class_dir)
    folder = opts.to if opts.to is not None else class_dir
    files = {"canvas": (canvas.FILE, canvas.UNMAPPED), "moodle": (moodle.FILE, moodle.UNMAPPED)}
    targets = {name: [_target(folder, f) for f in files[name]] for name in opts.lms}  # all, first
    written = []
    for name in opts.lms:
        derive = plan.from_canvas_download if name == "canvas" else None
        made = plan.make(
            rows, people, points=possible, missing_zero=opts.missing_zero, derive=derive
        )
        if name == "canvas":
            kept, left = canvas.entries(made)
            body = canvas.text(kept, made, column)
        else:
            kept, left = moodle.entries(made, opts.moodle_id)
            body = moodle.text(
                kept,
                opts.moodle_id,
                opts.assignment.strip(),
                with_feedback=opts.with_feedback,
                lang=opts.lang,
                fallback_lang=opts.fallback_lang,
            )
        path, side = targets[name]
        gradebook.write_text(path, body, private=True)  # the roster's e-mails and SIS IDs
        gradebook.write_text(side, _unmapped_text(left))
        written.append(Written(path, side, kept, left, made))
    return written, people


def _checked(opts: ExportOptions) -> None:
    """Refuse options that do not go together, before anything is read."""
    if not opts.lms:
        raise ExportError("say which LMS to export for: --canvas, --moodle or both")
    if opts.with_feedback and "moodle" not in opts.lms:
        raise ExportError("--feedback is a column of the Moodle import: add --moodle")
    if "moodle" in opts.lms and opts.roster is None:
        raise ExportError(
            "--moodle needs --roster: Moodle identifies users by e-mail, "
            "username or ID number, which only the roster knows"
        )
    if not opts.assignment.strip():
        raise ExportError("--assignment: the assignment's name is empty")


def _target(folder: Path, name: str) -> Path:
    path = folder / name
    if path.is_dir():  # a learner folder of that name: never written over
        raise ExportError(f"{path} is a folder (a learner's?): give --to another folder")
    return path


def _unmapped_text(left: list[Unmapped]) -> str:
    buf = io.StringIO()
    out = clean.csv_writer(buf, lineterminator="\r\n")
    out.writerow(UNMAPPED_HEADER)
    for u in left:
        row = u.row
        out.writerow(
            [
                u.learner,
                u.reason,
                row.status if row else "",
                "" if row is None or row.score is None else row.score,
                "" if u.points is None else plan.number(u.points),
                row.snapshot if row else "",
                row.folder if row else "",
            ]
        )
    return "\ufeff" + buf.getvalue()


def summary(written: list[Written], roster: Roster) -> str:
    """What each file holds and everyone it does not, for the terminal."""
    lines = []
    if roster.skipped:
        lines.append(f"roster: {roster.skipped} rows without a learner were not read")
    for w in written:
        counts = {
            state: [e for e in w.rows if e.state == state]
            for state in (plan.GRADED, plan.NOT_GRADED, plan.NO_SUBMISSION, plan.APART)
        }
        said = ", ".join(f"{len(v)} {k}" for k, v in counts.items() if v) or "no rows"
        lines.append(
            f"{w.path.name}: {len(w.rows)} learners ({said}), out of "
            f"{plan.number(w.plan.points)} points"
        )
        blank = "0" if any(e.points is not None for e in counts[plan.NO_SUBMISSION]) else "blank"
        for e in counts[plan.NOT_GRADED]:
            why = e.row.reason if e.row else ""
            lines.append(f"  not graded (blank): {e.person.learner}: {why}")
        for e in counts[plan.APART]:
            lines.append(
                f"  graded apart (blank, decide which counts): {e.person.learner}: "
                f"{e.rows} snapshots whose manifests alone name them"
            )
        if counts[plan.NO_SUBMISSION]:
            names = ", ".join(e.person.learner for e in counts[plan.NO_SUBMISSION])
            lines.append(f"  no submission ({blank}): {names}")
        lines.extend(f"  {note}" for note in w.plan.notes)
        if w.unmapped:
            lines.append(f"  {len(w.unmapped)} not in {w.path.name} (listed in {w.side.name}):")
            for u in w.unmapped:
                score = "" if u.row is None or u.row.score is None else f" (score {u.row.score})"
                lines.append(f"    {u.learner}{score}: {u.reason}")
        lines.append(f"  {w.path}")
    # learner names and roster values are strangers' text: shown, never obeyed by the terminal
    return clean.text("\n".join(lines)) + "\n"


def run_cli(args: argparse.Namespace) -> int:
    lms = [name for name in ("canvas", "moodle") if getattr(args, name)]
    try:
        opts = ExportOptions(
            lms=lms,
            roster=Path(args.roster).expanduser() if args.roster else None,
            assignment=args.assignment,
            assignment_id=args.assignment_id,
            points=args.points,
            moodle_id=args.moodle_id,
            with_feedback=args.feedback,
            missing_zero=args.missing == "zero",
            lang=args.lang,
            fallback_lang=args.fallback_lang,
            to=Path(args.to).expanduser() if args.to else None,
        )
        written, roster = export(Path(args.class_dir).expanduser(), opts)
    except ExportError as exc:
        print(f"gpushare: {clean.line(exc)}", file=sys.stderr)
        return 2
    sys.stdout.write(summary(written, roster))
    return 0
