"""Work a step needs started before its checks run, declared by the step, never named here.

A step module may declare ``BACKGROUND = {"name": start}``: a check with a parameter ``name``
gets what ``start(context)`` returned (a lab runs a learner's script on its cases this way),
started once per grade in the sandbox chosen for learners' code, closed when the grade ends
whatever happened. It is most of a grade's time, so ``gpushare grade`` starts it before anything
heavy is imported (:func:`declares` finds the step files unrun): this module imports only the
sandbox's levels.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gpushare.sandbox import levels
from gpushare.sandbox.isolation import IsolationUnavailable
from gpushare.sandbox.levels import Sandbox


class BackgroundError(Exception):
    """A step's background work cannot be had (no sandbox where one is required, the lab's
    fixtures missing): no grade can be taken, one line, exit status 2."""


class Closable(Protocol):
    def close(self) -> None: ...


@dataclass(frozen=True)
class Context:
    """What a step's background work is given."""

    workdir: Path  # the learner's work dir (a snapshot's unpacked copy when grading one)
    shown_workdir: str | None  # that work dir as the learner knows it (a snapshot's), else None
    fixtures: Path  # the lab's fixtures/ folder
    seed: int  # the grade's seed (recorded in the results, for a regrade)
    sandbox: Sandbox  # the isolation chosen for learners' code (its level may be ``none``)


Starter = Callable[[Context], Closable]


@dataclass(frozen=True)
class Setting:
    """The grade the work is for: what its :class:`Context` holds, and whose code it runs."""

    workdir: Path
    shown_workdir: str | None
    fixtures: Path
    seed: int
    strangers: bool  # a snapshot's work (:func:`gpushare.sandbox.levels.choose`)
    unsafe_no_sandbox: bool


def declared(module: object) -> dict[str, Starter]:
    """A grader module's ``BACKGROUND`` declaration ({} when it declares none)."""
    found = getattr(module, "BACKGROUND", None)
    return dict(found) if isinstance(found, dict) else {}


def wanted(pairs: Iterable[tuple[object, Iterable[str]]]) -> dict[str, Starter]:
    """The background work that checks ask for: (module, the check's parameter names) pairs."""
    out: dict[str, Starter] = {}
    for module, names in pairs:
        offered = declared(module)
        for name in names:
            if name in offered:
                out[name] = offered[name]
    return out


def declares(path: Path) -> bool:
    """Whether the step file at ``path`` assigns ``BACKGROUND`` at its top level (read, not run)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "BACKGROUND" not in text:  # most step files: no parse at all
        return False
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(
        isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "BACKGROUND"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
        for node in tree.body
    )


@dataclass
class Started:
    """The background work of one grade, and the isolation level learners' code got."""

    works: dict[str, Closable] = field(default_factory=dict)
    isolation: str | None = None  # bubblewrap, uid or none; None: nothing was started

    def close(self) -> None:
        works, self.works = self.works, {}
        for work in works.values():
            work.close()


def start_all(wanted: dict[str, Starter], setting: Setting) -> Started:
    """Start every piece of ``wanted`` in the sandbox chosen here, the one place that chooses
    it; BackgroundError when none can be had. Nothing wanted: nothing chosen, nothing started."""
    started = Started()
    if not wanted:
        return started
    try:
        sandbox = levels.choose(
            strangers=setting.strangers, unsafe_no_sandbox=setting.unsafe_no_sandbox
        )
    except IsolationUnavailable as exc:
        raise BackgroundError(str(exc)) from None
    started.isolation = sandbox.level
    context = Context(
        setting.workdir, setting.shown_workdir, setting.fixtures, setting.seed, sandbox
    )
    try:
        for name, start in wanted.items():
            started.works[name] = start(context)
    except BaseException:
        started.close()
        raise
    return started


def new_seed() -> int:
    """A fresh seed for a grade (recorded in the results for a regrade)."""
    return int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF
