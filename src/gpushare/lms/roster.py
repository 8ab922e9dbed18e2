"""Who each graded learner is in the LMS: the roster CSV of ``gpushare class export``.

A class grade names each learner by the ``learner`` column of its ``grades.csv``; an LMS knows
them by its own identities. The roster is a CSV (UTF-8, with or without the BOM Excel writes)
with a header row and a ``learner`` column; of the others, the ones an export needs are read:
Canvas's ``canvas_id`` (numeric), ``sis_user_id``, ``sis_login_id``, ``name``, ``section``;
Moodle's ``email``, ``username`` or ``idnumber``.

Headers are matched without case, spaces or hyphens counting as ``_``, so the LMS's own exports
(Canvas's "Student", "ID", "SIS User ID", ...; Moodle's "Email address", "Username", "ID
number") need only a ``learner`` column added. The roster of ``class grade --roster`` (``file,
learner``, a row per file) is the same file: other columns are ignored, and the rows of one
learner are one entry.

A ``learner`` is matched to grades.csv's, else to the learner before it became a folder name
(:func:`gpushare.classroom.identity.folder_name`). A row with no learner is skipped and counted
(an LMS export lists every enrolled student, mapped or not). Two learners given one LMS identity
are refused: one person's grade would be imported twice, or over another.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, fields
from pathlib import Path

MAX_BYTES = 16 * 1024 * 1024
# header aliases: the LMS's own export headers, normalized (see the module's docstring)
_ALIASES = {
    "student": "name",
    "id": "canvas_id",
    "canvas_user_id": "canvas_id",
    "email_address": "email",
    "id_number": "idnumber",
}
# identities one person only may hold (compared without case for e-mail addresses)
UNIQUE = ("canvas_id", "sis_user_id", "sis_login_id", "email", "username", "idnumber")


class RosterError(Exception):
    """The roster cannot be used; one line naming the file (and row) and why (exit 2)."""


@dataclass(frozen=True)
class Person:
    """One learner of the roster and who they are in each LMS ("" where the roster says
    nothing)."""

    learner: str
    name: str = ""
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    email: str = ""
    username: str = ""
    idnumber: str = ""
    line: int = 0  # the roster row it was first read from (1 is the header)


@dataclass(frozen=True)
class Roster:
    people: dict[str, Person]  # learner -> person, in the roster's order
    skipped: int = 0  # rows without a learner


_FIELDS = [f.name for f in fields(Person) if f.name not in ("learner", "line")]


def _column(header: str) -> str:
    key = re.sub(r"[\s\-]+", "_", header.strip().lower())
    return _ALIASES.get(key, key)


def read(path: Path) -> Roster:
    """The roster at ``path``; RosterError when it cannot be used."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise RosterError(f"--roster {path}: over {MAX_BYTES} bytes")
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(f"--roster {path}: cannot be read as UTF-8 ({exc})") from None
    try:
        table = list(csv.reader(io.StringIO(raw, newline="")))
    except csv.Error as exc:
        raise RosterError(f"--roster {path}: not a CSV file ({exc})") from None
    if not table:
        raise RosterError(f"--roster {path}: empty (a header row with a learner column first)")
    header = [_column(h) for h in table[0]]
    if "learner" not in header:
        raise RosterError(f"--roster {path}: its header row has no learner column")
    people: dict[str, Person] = {}
    skipped = 0
    for number, cells in enumerate(table[1:], start=2):
        values: dict[str, str] = {}
        for key, cell in zip(header, cells, strict=False):
            if key in _FIELDS or key == "learner":
                values[key] = values.get(key) or cell.strip()  # a column named twice: the first
        learner = values.pop("learner", "")
        if not learner:
            if any(c.strip() for c in cells):
                skipped += 1
            continue
        person = Person(learner, line=number, **values)
        if person.canvas_id and not person.canvas_id.isdecimal():
            raise RosterError(
                f"--roster {path}:{number}: canvas_id {person.canvas_id!r} is not a Canvas user "
                "ID (digits: the ID column of Canvas's gradebook export)"
            )
        held = people.get(learner)
        people[learner] = person if held is None else _merge(held, person, path, number)
    _unique(people, path)
    return Roster(people, skipped)


def _merge(held: Person, more: Person, path: Path, number: int) -> Person:
    """Two rows of one learner (a ``class grade`` roster has one per file): one entry, unless
    they give the learner two different identities."""
    merged: dict[str, str] = {}
    for key in _FIELDS:
        old, new = getattr(held, key), getattr(more, key)
        if old and new and old != new:
            raise RosterError(
                f"--roster {path}:{number}: {held.learner} has {key} {old!r} on row "
                f"{held.line} and {new!r} here"
            )
        merged[key] = old or new
    return Person(held.learner, line=held.line, **merged)


def _unique(people: dict[str, Person], path: Path) -> None:
    for key in UNIQUE:
        seen: dict[str, Person] = {}
        for person in people.values():
            value = getattr(person, key)
            if not value:
                continue
            folded = value.casefold() if key == "email" else value
            other = seen.setdefault(folded, person)
            if other is not person:
                raise RosterError(
                    f"--roster {path}:{person.line}: {key} {value!r} is given to both "
                    f"{other.learner} (row {other.line}) and {person.learner}"
                )
