"""What an LMS import gets for each roster entry, and which graded learners it cannot place.

Made from a class folder's rows (:func:`gpushare.classroom.gradebook.load_rows`, the results.json
every other output is made from) and a roster (:mod:`.roster`):

- a roster entry with a graded row exports its score, scaled to the assignment's points;
- one whose row could not be graded exports no grade: a 0 would be recorded as the learner's;
- one with no row exports no grade, or 0 with ``--missing zero``;
- one whose files were graded apart (``<learner>/<snapshot>`` rows: manifests alone name the
  learner) exports no grade: which one counts is the instructor's call;
- a learner graded with ``--all``: the latest row (by capture time, then file name, as ``class
  grade`` chooses without ``--all``) is exported, and the plan says so.

Every graded learner no roster entry names is in :attr:`Plan.unmapped`, with why: the export
lists them on the screen and in a side file, never dropping one in silence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from gpushare.classroom.gradebook import Row
from gpushare.classroom.identity import folder_name
from gpushare.lms.roster import Person, Roster

GRADED, NOT_GRADED, NO_SUBMISSION, APART = "graded", "not graded", "no submission", "graded apart"
_CENT = Decimal("0.01")


@dataclass(frozen=True)
class Entry:
    """One line of an LMS import: who, the row its grade comes from, and the grade."""

    person: Person
    state: str  # GRADED, NOT_GRADED, NO_SUBMISSION, APART
    row: Row | None = None  # the row exported (None: no submission)
    points: Decimal | None = None  # the grade the LMS records; None: no grade (a blank cell)
    rows: int = 0  # how many rows the learner has (more than 1: graded with --all)


@dataclass(frozen=True)
class Unmapped:
    """A graded learner (or a roster entry) an import cannot carry, and why."""

    learner: str
    reason: str
    row: Row | None = None
    points: Decimal | None = None


@dataclass
class Plan:
    """Every roster entry's line, the graded learners no entry names, and what to tell of them."""

    entries: list[Entry]
    unmapped: list[Unmapped]
    points: Decimal  # the assignment's points possible
    notes: list[str]


def scaled(score: int, max_score: int, points: Decimal) -> Decimal:
    """``score`` of ``max_score`` in ``points``, to the cent, half up (11.375 is 11.38)."""
    if max_score <= 0:
        return Decimal(0)
    return (Decimal(score) * points / Decimal(max_score)).quantize(_CENT, ROUND_HALF_UP)


def number(value: Decimal) -> str:
    """A grade as both LMSs read it: ``92``, ``92.5``, ``33.33`` (a full stop, no exponent)."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.quantize(_CENT), "f").rstrip("0").rstrip(".")


def make(
    rows: list[Row],
    roster: Roster,
    *,
    points: Decimal | None = None,
    missing_zero: bool = False,
    derive: Callable[[Row], Person | None] | None = None,
) -> Plan:
    """The plan for ``rows``: each roster entry's grade, then the learners ``derive`` (an LMS
    download's own naming) identifies, then every graded learner left over, as unmapped."""
    max_score = max((r.max_score for r in rows), default=0)
    possible = points if points is not None else Decimal(max_score)
    by_learner: dict[str, list[Row]] = {}
    for row in rows:
        by_learner.setdefault(row.learner, []).append(row)
    claimed: set[str] = set()
    entries: list[Entry] = []
    for person in roster.people.values():
        key = person.learner if person.learner in by_learner else folder_name(person.learner)
        found = by_learner.get(key, [])
        if found:
            claimed.add(key)
            entries.append(_graded(person, found, possible))
            continue
        apart = sorted(k for k in by_learner if k.startswith(f"{key}/"))
        if apart:
            entries.append(Entry(person, APART, rows=len(apart)))
        else:
            zero = Decimal(0) if missing_zero else None
            entries.append(Entry(person, NO_SUBMISSION, points=zero))
    unmapped: list[Unmapped] = []
    for key in sorted(set(by_learner) - claimed):
        found = by_learner[key]
        derived = derive(found[0]) if derive else None
        if derived is not None:
            entries.append(_graded(derived, found, possible))
            continue
        entry = _graded(Person(key), found, possible)
        why = "graded apart: its manifest alone names the learner" if "/" in key else ""
        unmapped.append(Unmapped(key, why or "no roster entry", entry.row, entry.points))
    notes = [
        f"{e.person.learner}: {e.rows} graded snapshots (--all): the latest, "
        f"{e.row.snapshot}, is exported"
        for e in entries
        if e.rows > 1 and e.row is not None
    ]
    return Plan(entries, unmapped, possible, notes)


def _graded(person: Person, rows: list[Row], possible: Decimal) -> Entry:
    latest = max(rows, key=lambda r: (str(r.submission.get("captured_at") or ""), r.snapshot))
    if latest.status == "error" or latest.score is None:
        return Entry(person, NOT_GRADED, latest, rows=len(rows))
    points = scaled(latest.score, latest.max_score, possible)
    return Entry(person, GRADED, latest, points, rows=len(rows))


_CANVAS_LEARNER = re.compile(r"^(?P<name>.+)_(?P<id>\d+)$")


def from_canvas_download(row: Row) -> Person | None:
    """Who a learner of a Canvas bulk download is in Canvas: ``class grade`` names them
    ``<sortable name>_<Canvas user ID>`` from the file names Canvas gives
    (:mod:`gpushare.classroom.identity`), so no roster entry is needed for them."""
    if row.submission.get("source") != "canvas":
        return None
    match = _CANVAS_LEARNER.match(str(row.submission.get("learner") or ""))
    if match is None:
        return None
    return Person(row.learner, name=match["name"], canvas_id=match["id"])


def lacking(plan: Plan, has: Callable[[Person], str]) -> tuple[list[Entry], list[Unmapped]]:
    """The entries an import can carry, and the plan's unmapped with the entries it cannot:
    ``has(person)`` says why an entry cannot be carried ("" when it can)."""
    kept: list[Entry] = []
    left = list(plan.unmapped)
    for entry in plan.entries:
        why = has(entry.person)
        if why:
            left.append(Unmapped(entry.person.learner, why, entry.row, entry.points))
        else:
            kept.append(entry)
    return kept, left
