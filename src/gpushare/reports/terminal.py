"""The learner's terminal: a table per step, then each failure's feedback, nothing to scroll.

Colour only on a terminal (and never with ``NO_COLOR``); a pipe or a CI log gets plain text.
What a snapshot or a learner's files put into the report (feedback, learner, paths, times) is
passed through :mod:`gpushare.reports.clean` before it is painted: the only escape sequences
on the instructor's terminal are our own colours.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Callable

from gpushare.reports import clean, messages
from gpushare.reports.results import CheckResult, Report

GREEN, RED, BOLD, DIM, RESET = "\x1b[32m", "\x1b[31m", "\x1b[1m", "\x1b[2m", "\x1b[0m"


def want_color(choice: str = "auto") -> bool:
    if choice == "yes":
        return True
    if choice == "no" or os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(sys.stdout, "isatty", lambda: False)())


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def render(report: Report, *, color: bool, feedback: bool = True) -> str:
    lang = report.lang

    def paint(code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if color else text

    ok_word, fail_word = messages.label("pass", lang), messages.label("fail", lang)
    out: list[str] = []
    notice = report.workdir_notice()
    if notice:  # first: it explains every file check's failure below
        out.append(paint(RED, clean.line(notice)))
    out.append(paint(BOLD, messages.label("summary_title", lang)))
    # under an instructor's policy only the visible checks count here: the points of the
    # others would tell how they went (see gpushare.reports.policy)
    shown = report.visible()
    for step in sorted({c.step for c in shown}):
        mine = [c for c in shown if c.step == step]
        score, max_score = sum(c.score for c in mine), sum(c.max_score for c in mine)
        mark = paint(GREEN, ok_word) if all(c.passed for c in mine) else paint(RED, fail_word)
        name = _pad(messages.step_name(step, lang), 34)
        out.append(f"  {step}. {name} {score:>3}/{max_score:<3} {mark}")
    if len(shown) == len(report.checks):
        total = messages.labelled("total", f"{report.score}/{report.max_score}", lang)
        out.append(paint(BOLD, "  " + total))
    else:
        first, *rest = report.figures().splitlines()
        out.append(paint(BOLD, "  " + first))
        out.extend("  " + line for line in rest)
    verdict = report.verdict()
    if verdict:
        out.append(paint(GREEN, "  " + verdict))
    graded = {k: clean.line(v) for k, v in (report.cluster or {}).items() if v is not None}
    # a snapshot's work dir is a folder of the machine that captured it (often a temporary
    # one): the snapshot line below says what was graded
    place = "" if graded.get("snapshot") else f"  workdir={clean.line(report.workdir)}"
    footer = [f"seed={report.seed}  lang={lang}{place}"]
    if report.isolation:  # how the learner's script ran (gpushare.sandbox.levels)
        footer.append(f"isolation={report.isolation}")
    if graded.get("snapshot"):  # what was judged, so nobody grades the wrong one unseen
        footer.append(f"snapshot={graded['snapshot']}")
        footer.append(
            f"learner={graded.get('learner')}  captured_at={graded.get('captured_at')}"
            f"  sha256={str(graded.get('snapshot_sha256'))[:12]}"
        )
        if graded.get("runtime_note"):
            footer.append(f"note: {graded['runtime_note']}")
    elif graded:
        footer.append(
            f"kubeconfig={graded.get('kubeconfig')} ({graded.get('kubeconfig_source')})"
            f"  context={graded.get('context') or '-'}"
        )
        footer.append(f"server={graded.get('server')}  user={graded.get('user') or '-'}")
    out.extend(paint(DIM, f"  {line}") for line in footer)
    # the root causes first: a check that fails for the same cause as an earlier one only
    # points to it, so it comes after every root
    failed = sorted((c for c in shown if not c.passed), key=lambda c: report.root_of(c) is not None)
    if feedback and failed:
        out.append("")
        out.append(paint(BOLD, messages.label("failures_title", lang)))
        out.extend(failure_lines(failed, color=color, said=report.said))
    return "\n".join(out).rstrip() + "\n"


def failure_lines(
    failed: list[CheckResult],
    *,
    color: bool,
    said: Callable[[CheckResult], str] | None = None,
) -> list[str]:
    """Each failed check's block as ``gpushare grade`` prints it (``gpushare watch`` shows the
    same blocks for the step the learner is on). ``said``: a check's feedback as its report
    says it (Report.said); without it, the words the check holds (``output``)."""
    out: list[str] = []
    for c in failed:
        head = f"[{c.number}] {c.title}  (0/{c.max_score})"
        out.append(f"{RED}{head}{RESET}" if color else head)
        text = said(c) if said is not None else c.output
        out.extend("    " + line for line in clean.text(text).splitlines())
        out.append("")
    return out
