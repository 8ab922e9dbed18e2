"""What the class outputs show of a check's feedback: the one place that decides it.

The report quotes learners' feedback (the reasons of failed checks, example texts), and the
regrade diff names checks. Whatever policy limits what may be shown of a check (a visibility
policy hides expected values of hidden checks, say) is applied here, and only here, so every
page and line of a class grade follows it.
"""

from __future__ import annotations

import re

from gpushare.classroom.gradebook import Cell

_MAX_REASON = 240
_LONG_NUMBER = re.compile(r"\d{5,}")


def shown(cell: Cell) -> str:
    """The feedback of ``cell`` as the class outputs may show it."""
    return cell.output


def reason(cell: Cell) -> str:
    """What a failure is grouped by: the first line of the shown feedback (the problem, as
    the learner read it), without the learner-specific expected/found/where lines below it.

    Long numbers (each submission's own seed of the unseen cases) become "…", so the same
    problem of two learners is one reason, not two."""
    for line in shown(cell).splitlines():
        line = _LONG_NUMBER.sub("…", line.strip())
        if line:
            return line if len(line) <= _MAX_REASON else line[: _MAX_REASON - 1] + "…"
    return "-"
