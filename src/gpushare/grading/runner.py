"""``gpushare grade``'s own runner: the graders' ``@check`` functions, called directly.

pytest collects the same functions for ``pytest graders/``; here they get the same inputs from
the :class:`~gpushare.grading.session.GradeSession` without pytest's import and collection (a
test of ours grades through both and compares every result).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from gpushare.data import CheckFunction
from gpushare.grading.background import Starter, declares, wanted
from gpushare.grading.checks import CheckMeta
from gpushare.grading.errors import GradeError
from gpushare.reports import messages
from gpushare.reports.results import number_key

if TYPE_CHECKING:  # not imported: the step files with background work load before it
    from gpushare.grading.session import GradeSession


@dataclass
class Check:
    """One ``@check`` function of the graders, named as pytest names it."""

    meta: CheckMeta
    function: CheckFunction
    nodeid: str
    classname: str
    module: ModuleType

    def parameters(self) -> tuple[str, ...]:
        """The inputs the check asks for, by name (what pytest would inject as fixtures)."""
        code = self.function.__code__
        return code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]


def load_checks(
    graders: Path, steps: set[int] | None = None, *, with_background_only: bool = False
) -> list[Check]:
    """Every ``@check`` function of ``graders/test_step*.py``, in check-number order.

    The graders folder is put first on ``sys.path``, as pytest's default import mode puts it,
    so that the step files import their lab's own support modules the same way under both.
    ``with_background_only``: only the step files that declare background work (the others
    are not even imported), so a grade can start that work first.
    """
    found: list[Check] = []
    folder = str(graders.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    for path in sorted(graders.glob("test_step*.py")):
        if with_background_only and not declares(path):
            continue
        name = f"graders.{path.stem}"
        module = sys.modules.get(name)
        if module is None or Path(module.__file__ or "").resolve() != path.resolve():
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise GradeError(f"gpushare: cannot load grader {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        for attr, fn in vars(module).items():
            meta = getattr(fn, "gpushare_check", None)
            if attr.startswith("test_") and meta and (not steps or meta["step"] in steps):
                found.append(Check(meta, fn, f"graders/{path.name}::{attr}", name, module))
    numbers = [c.meta["number"] for c in found]
    duplicated = sorted({n for n in numbers if numbers.count(n) > 1})
    if duplicated:
        raise GradeError(f"gpushare: checks defined twice: {', '.join(duplicated)}")
    messages.warn_untitled(numbers)  # a check with no title or hint in the lab's texts
    return sorted(found, key=lambda c: number_key(c.meta["number"]))


def run(
    session: GradeSession, checks: list[Check], *, deadline: float | None = None
) -> dict[str, float]:
    """Call each check with the inputs it names; record its outcome.

    Returns nodeid -> seconds. With a ``deadline`` (``time.monotonic()``), the checks run in a
    thread of their own; when the deadline strikes, the checks that finished keep their
    results and each unfinished one becomes an error that says what was still running.
    """
    durations: dict[str, float] = {}
    current: list[Check] = []
    if deadline is None:
        _run_all(session, checks, durations, current)
        return durations
    worker = threading.Thread(
        target=_run_all, args=(session, checks, durations, current), name="checks", daemon=True
    )
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if worker.is_alive():
        running = current[-1].meta["number"] if current else None
        session.time_out([c.meta for c in checks], [c.nodeid for c in checks], running)
    return durations


def _run_all(
    session: GradeSession, checks: list[Check], durations: dict[str, float], current: list[Check]
) -> None:
    inputs = session.inputs()
    for check in checks:
        current.append(check)
        t0 = time.perf_counter()
        try:
            kwargs = {p: session.lab() if p == "lab" else inputs[p] for p in check.parameters()}
            check.function(**kwargs)
        except Exception as exc:
            failure, error = session.feedback(exc)
            session.record(check.meta, check.nodeid, False, failure, error)
        else:
            session.record(check.meta, check.nodeid, True, None, "")
        durations[check.nodeid] = time.perf_counter() - t0


def modules(checks: list[Check]) -> list[ModuleType]:
    """The grader modules of ``checks`` (where a step declares its reads and dry-runs)."""
    return list({c.classname: c.module for c in checks}.values())


def background(checks: list[Check]) -> dict[str, Starter]:
    """The background work (a step's ``BACKGROUND``) that ``checks`` ask for by name."""
    return wanted((c.module, c.parameters()) for c in checks)
