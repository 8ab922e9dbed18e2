"""What the class outputs show of a check's feedback: the one place that decides it.

The report quotes learners' feedback (the reasons of failed checks, example texts), and the
regrade diff names checks. Whatever policy limits what may be shown of a check (a visibility
policy hides expected values of hidden checks, say) is applied here, and only here, so every
page and line of a class grade follows it.
"""

from __future__ import annotations

import re

from gpushare.classroom.gradebook import Cell
from gpushare.reports import messages

_MAX_REASON = 240
_LONG_NUMBER = re.compile(r"\d{5,}")


def shown(cell: Cell) -> str:
    """The feedback of ``cell`` as the class outputs may show it."""
    return cell.output


def reason(cell: Cell) -> str:
    """What a failure is grouped by: the problem the feedback names first (a line without a
    label: "The file does not exist."), else what it says was found ("Found: replicas: 1"),
    else its first line. Never the expected value alone: every learner failing a check was
    told the same expected value, which says nothing of why they failed.

    Long numbers (each submission's own seed of the unseen cases) become "…", so the same
    problem of two learners is one reason, not two."""
    lines = [line.strip() for line in shown(cell).splitlines() if line.strip()]
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
