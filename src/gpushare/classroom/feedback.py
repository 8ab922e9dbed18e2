"""The reason a check failed, as the class report groups its failures.

The report quotes learners' feedback as their results.json holds it: what learners may see of
a check (the visibility policy) was applied when that file was written, so every page and line
of a class grade follows it.
"""

from __future__ import annotations

import re

from gpushare.classroom.gradebook import Cell
from gpushare.reports import messages

_MAX_REASON = 240
_LONG_NUMBER = re.compile(r"\d{5,}")


def reason(cell: Cell) -> str:
    """What a failure is grouped by: the problem the feedback names first (a line without a
    label: "The file does not exist."), else what it says was found ("Found: replicas: 1"),
    else its first line. Never the expected value alone: every learner failing a check was
    told the same expected value, which says nothing of why they failed.

    Long numbers (each submission's own seed of the unseen cases) become "…", so the same
    problem of two learners is one reason, not two."""
    lines = [line.strip() for line in cell.output.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(_labels("hint"))]
    if not lines:
        return "-"
    first = lines[0]
    labelled = first.startswith(_labels("expected", "found", "where"))
    found = next((line for line in lines if line.startswith(_labels("found"))), None)
    line = _LONG_NUMBER.sub("…", found if labelled and found else first)
    return line if len(line) <= _MAX_REASON else line[: _MAX_REASON - 1] + "…"


def _labels(*keys: str) -> tuple[str, ...]:
    """The line starts of the feedback's labelled lines, in every language ("实际：", "Found: ")."""
    return tuple(messages.labelled(key, "", lang) for key in keys for lang in messages.langs())
