"""What ``gpushare watch`` shows: a compact screen on a terminal, lines on anything else.

The screen is every step with its state and points, then the failing checks of the step the
learner is on, in the very blocks ``gpushare grade`` prints (:func:`terminal.failure_lines`),
drawn on the terminal's alternate screen and cut to its size (80x24 holds the steps and the
start of the first block). Colour follows ``NO_COLOR`` as ``gpushare grade`` does.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unicodedata
from dataclasses import dataclass, field
from typing import IO, TextIO

from gpushare.reports import clean, messages, terminal
from gpushare.reports.results import CheckResult
from gpushare.reports.terminal import BOLD, DIM, GREEN, RED, RESET


@dataclass
class StepView:
    """One step as last graded (``ok`` None: not graded yet)."""

    step: int
    score: int = 0
    max_score: int = 0
    ok: bool | None = None
    failed: list[CheckResult] = field(default_factory=list)


@dataclass
class View:
    """Everything on the screen: the steps, the banner (a line about the watch itself: the
    apiserver lost, a grade that could not be taken) and when it was last graded."""

    lang: str
    steps: dict[int, StepView]
    banner: str = ""
    banner_bad: bool = False
    grading: bool = False
    updated: str = ""

    def focus(self) -> StepView | None:
        """The step the learner is on: the first that does not pass."""
        for step in sorted(self.steps):
            if self.steps[step].ok is False:
                return self.steps[step]
        return None

    def step_lines(self, color: bool) -> list[str]:
        ok_word, fail_word = messages.label("pass", self.lang), messages.label("fail", self.lang)
        out = []
        for step in sorted(self.steps):
            v = self.steps[step]
            name = _pad(messages.step_name(step, self.lang), 34)
            if v.ok is None:
                mark, points = "…", "   -/-  "
            else:
                mark = _paint(color, GREEN if v.ok else RED, ok_word if v.ok else fail_word)
                points = f"{v.score:>3}/{v.max_score:<3} "
            out.append(f"  {step}. {name} {points}{mark}")
        score = sum(v.score for v in self.steps.values())
        top = sum(v.max_score for v in self.steps.values())
        out.append(
            _paint(color, BOLD, "  " + messages.labelled("total", f"{score}/{top}", self.lang))
        )
        return out

    def focus_lines(self, color: bool) -> list[str]:
        focus = self.focus()
        if focus is None:
            done = all(v.ok for v in self.steps.values())
            return [_paint(color, GREEN, messages.label("watch_done", self.lang))] if done else []
        head = messages.label("watch_focus", self.lang).format(step=focus.step)
        return [_paint(color, BOLD, head), *terminal.failure_lines(focus.failed, color=color)]


def _paint(color: bool, code: str, text: str) -> str:
    return f"{code}{text}{RESET}" if color else text


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns; colour codes (ours alone: the feedback was cleaned)
    take none, and a cut line ends its colour."""
    out, used, i = [], 0, 0
    while i < len(text):
        if text[i] == "\x1b":
            end = text.find("m", i)
            end = len(text) - 1 if end < 0 else end
            out.append(text[i : end + 1])
            i = end + 1
            continue
        w = _width(text[i])
        if used + w > width:
            out.append(RESET if "\x1b[" in text else "")
            break
        out.append(text[i])
        used += w
        i += 1
    return "".join(out)


def _wrap(text: str, width: int) -> list[str]:
    """A feedback line folded to ``width`` columns at its spaces (a word longer than a line is
    cut where it must), its continuations indented under its text; a line with our colour
    codes, a heading, is cut instead: it is short."""
    if "\x1b" in text or _width(text) <= width:
        return [text]
    lead = len(text) - len(text.lstrip(" "))
    indent = " " * (lead + 4)
    out: list[str] = []
    current = " " * lead
    for word in text[lead:].split(" "):
        joined = f"{current} {word}" if current.strip() else current + word
        if _width(joined) <= width:
            current = joined
            continue
        if current.strip():
            out.append(current)
        current = indent + word
        while _width(current) > width:  # a word with no room to break in
            head = _cut(current, width)
            out.append(head)
            current = indent + current[len(head) :]
    out.append(current)
    return out


class Screen:
    """The alternate screen of a terminal, drawn whole at each change."""

    def __init__(self, stream: TextIO, color: bool, title: str, hold_stderr: bool = True) -> None:
        self.stream = stream
        self.color = color
        self.title = title
        # what anything writes to stderr meanwhile (a warning, a child's line) would land in the
        # middle of the screen and scroll it: it is kept, and said after the screen is gone
        self._stderr: tuple[int, IO[bytes]] | None = None
        if hold_stderr:
            sys.stderr.flush()
            held = tempfile.TemporaryFile()  # noqa: SIM115 (open until close(), below)
            self._stderr = (os.dup(2), held)
            os.dup2(held.fileno(), 2)
        stream.write("\x1b[?1049h\x1b[?25l")  # alternate screen, cursor hidden
        stream.flush()

    def draw(self, view: View) -> None:
        cols, rows = self._size()
        # the last column is never written: a line that fills it leaves the terminal waiting to
        # wrap, and one glyph it counts wider than we do (a non-UTF-8 locale) scrolls the screen
        cols = max(20, cols - 1)
        right = ""
        if view.grading:
            right = messages.label("watch_grading", view.lang)
        elif view.updated:
            right = messages.label("watch_updated", view.lang).format(time=view.updated)
        title = _cut(self.title, max(0, cols - _width(right) - 1))  # the time comes first
        gap = max(1, cols - _width(title) - _width(right))
        top = _paint(self.color, BOLD, title) + " " * gap + _paint(self.color, DIM, right)
        lines = [top, *view.step_lines(self.color)]
        if view.banner:
            code = RED if view.banner_bad else GREEN
            lines += ["", _paint(self.color, code, clean.line(view.banner))]
        lines.append("")
        room = rows - len(lines) - 1
        focus = [part for text in view.focus_lines(self.color) for part in _wrap(text, cols)]
        if len(focus) > room:
            focus = [*focus[: max(0, room - 1)], "    …"]
        lines += focus
        lines += [""] * max(0, rows - 1 - len(lines))
        lines.append(_paint(self.color, DIM, messages.label("watch_quit", view.lang)))
        body = "\x1b[K\r\n".join(_cut(text, cols) for text in lines[:rows])
        self.stream.write("\x1b[H" + body + "\x1b[K\x1b[J")
        self.stream.flush()

    def _size(self) -> tuple[int, int]:
        """The terminal's own size, asked of the terminal: ``COLUMNS`` and ``LINES`` in the
        environment (which shutil reads first) may be another program's, and a screen drawn
        wider than the terminal wraps and scrolls."""
        try:
            size = os.get_terminal_size(self.stream.fileno())
        except (AttributeError, OSError, ValueError):
            size = shutil.get_terminal_size((80, 24))
        return size.columns, size.lines

    def close(self) -> None:
        """The terminal as it was: the main screen back, the cursor shown; then what was
        written to stderr meanwhile (its last 64 KiB)."""
        self.stream.write("\x1b[?25h\x1b[?1049l")
        self.stream.flush()
        if self._stderr is not None:
            saved, held = self._stderr
            self._stderr = None
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            size = held.seek(0, os.SEEK_END)
            held.seek(max(0, size - 65536))
            said = held.read()
            held.close()
            if said:
                os.write(2, said)


class Lines:
    """Line output, for a stdout that is not a terminal: what changed, once."""

    def __init__(self, stream: TextIO, title: str) -> None:
        self.stream = stream
        self.shown: dict[int, tuple[int, int, bool | None]] = {}
        self.focus: tuple[object, ...] = ()
        self.banner = ""
        stream.write(title + "\n")
        stream.flush()

    def draw(self, view: View) -> None:
        if view.grading:
            return  # the lines of a grade come when it is done
        out: list[str] = []
        if view.banner != self.banner:
            self.banner = view.banner
            if view.banner:
                out.append(f"{view.updated}  {clean.line(view.banner)}")
        step_lines = view.step_lines(color=False)
        for step, text in zip(sorted(view.steps), step_lines, strict=False):
            v = view.steps[step]
            now = (v.score, v.max_score, v.ok)
            if v.ok is not None and self.shown.get(step) != now:
                self.shown[step] = now
                out.append(f"{view.updated} {text}")
        focus = view.focus()
        key = (focus.step, *((c.number, c.output) for c in focus.failed)) if focus else ()
        if key != self.focus and all(v.ok is not None for v in view.steps.values()):
            self.focus = key
            out += ["", *view.focus_lines(color=False)]
        if out:
            self.stream.write("\n".join(out).rstrip("\n") + "\n")
            self.stream.flush()

    def close(self) -> None:
        pass
