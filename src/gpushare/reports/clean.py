"""Text from a snapshot, made harmless where people and programs read it: a terminal, XML,
CSV, HTML.

Everything in a snapshot is the learner's to choose: script output, files, the manifest's
learner, workdir, capture time, file names. On an instructor's terminal an escape sequence in
any of them can write the clipboard (OSC 52), plant a link (OSC 8), retitle the window, or move
the cursor up and paint "All checks passed. Total: 100/100" over the real result; a control
character makes XML malformed; a CSV cell that starts with ``=`` is a formula to a spreadsheet.
So every writer for those places passes such text through here:

- :func:`text` (several lines) and :func:`line` (one field) show each control character as its
  escape, ``\\x1b``, ``\\u202e``: C0 but newline and tab (those too in :func:`line`), DEL, C1,
  the bidirectional overrides and isolates that reorder what is shown, and code points no UTF-8
  or XML can carry. The attempt stays visible, and inert.
- :func:`csv_cell` is :func:`line`, and a cell that a spreadsheet would run (starting with
  ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, after spaces too) gets a leading
  ``'``, as OWASP's "CSV injection" advice says.

results.json keeps the text as it was: JSON escapes control characters itself, and the learner
is owed their own output, byte for byte.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import TextIO

# Bidirectional controls: ALM, LRM, RLM, LRE..RLO, LRI..PDI.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 but \t and \n, DEL and C1, bidi, surrogates, and the two non-characters XML refuses.
_IN_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff\ufffe\uffff]")
_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff\ufffe\uffff]")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text(value: object) -> str:
    """``value`` as text for a terminal, XML or HTML: lines and tabs kept, no control."""
    return _IN_TEXT.sub(_escape, str(value))


def line(value: object) -> str:
    """``value`` as one line of such text: newlines and tabs escaped too."""
    return _IN_LINE.sub(_escape, str(value))


def csv_cell(value: object) -> object:
    """A CSV cell: numbers as they are; text as :func:`line`, never a formula."""
    if value is None or isinstance(value, bool | int | float):
        return value
    cell = line(value)
    if str(value).lstrip(" ").startswith(_FORMULA):  # tab and CR too, escaped or not
        cell = "'" + cell
    return cell


class _CsvWriter:
    """``csv.writer`` whose every cell goes through :func:`csv_cell`."""

    def __init__(self, stream: TextIO, lineterminator: str) -> None:
        self._writer = csv.writer(stream, lineterminator=lineterminator)

    def writerow(self, row: Iterable[object]) -> None:
        self._writer.writerow([csv_cell(v) for v in row])


def csv_writer(stream: TextIO, *, lineterminator: str = "\r\n") -> _CsvWriter:
    """A CSV writer for a table that holds learners' text (grades.csv)."""
    return _CsvWriter(stream, lineterminator)
