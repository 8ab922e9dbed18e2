"""The reason a check failed, as the class report groups its failures.

A results.json holds each failure as data (``extra_data.feedback``, gpushare.feedback): the
class groups failures by their problem's catalog key, and says each group in the report's own
language, whatever language each learner read it in. What learners may see of a check (the
visibility policy) was applied when that file was written: a withheld failure carries no data,
so every page and line of a class grade follows it.

A results.json written before it held the data (an older ``--previous`` folder, a shard of an
older gpushare) is grouped as it always was, by its prose (:func:`prose_reason`).
"""

from __future__ import annotations

import re

from gpushare.classroom.gradebook import Cell
from gpushare.feedback import T
from gpushare.reports import messages

_MAX_REASON = 240
_LONG_NUMBER = re.compile(r"\d{5,}")
_ANY = "…"  # a placeholder's value in a group's reason: each learner's own differs


def reason(cell: Cell, lang: str | None = None) -> str:
    """What a failure is grouped by, as the report shows it in ``lang``.

    From the data: a failure that follows from another check is grouped as pointing there; else
    by the key of its problem, else of what it found, else of what it expected, each said with
    "…" for its values (which are each learner's own: their key names, their seed's cases).
    Without data (an older results.json, or no ``lang``): :func:`prose_reason`."""
    failure = cell.failure
    if failure is None or lang is None:
        return prose_reason(cell)
    if cell.follows:
        title = messages.title(cell.follows, lang)
        return messages.render_value(T("follows_check", check=cell.follows, title=title), lang)
    for label, value in (("", failure.problem), ("found", failure.found)):
        if isinstance(value, T):
            # the problem, not one learner's instance: every placeholder "…"
            said = messages.render_value(T(value.key, **dict.fromkeys(value.params, _ANY)), lang)
            return _short(messages.labelled(label, said, lang) if label else said)
    return prose_reason(cell)


def prose_reason(cell: Cell) -> str:
    """The reason read from the feedback's words: the problem the feedback names first (a line
    without a label: "The file does not exist."), else what it says was found ("Found:
    replicas: 1"), else its first line. Never the expected value alone: every learner failing a
    check was told the same expected value, which says nothing of why they failed.

    Long numbers (each submission's own seed of the unseen cases) become "…", so the same
    problem of two learners is one reason, not two."""
    lines = [line.strip() for line in cell.output.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(_labels("hint"))]
    if not lines:
        return "-"
    first = lines[0]
    labelled = first.startswith(_labels("expected", "found", "where"))
    found = next((line for line in lines if line.startswith(_labels("found"))), None)
    return _short(_LONG_NUMBER.sub(_ANY, found if labelled and found else first))


def _short(line: str) -> str:
    return line if len(line) <= _MAX_REASON else line[: _MAX_REASON - 1] + _ANY


def _labels(*keys: str) -> tuple[str, ...]:
    """The line starts of the feedback's labelled lines, in every language ("实际：", "Found: ")."""
    return tuple(messages.labelled(key, "", lang) for key in keys for lang in messages.langs())
