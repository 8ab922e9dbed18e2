"""One submission's grade inside a worker process: :func:`gpushare.grading.grade.grade`, in-process.

The worker writes the learner's ``results.json`` and ``junit.xml`` itself and hands back the
JSON and what the grade cost: the worker's own CPU time (ours: unpacking, the cluster views,
the checks, the outputs) and its children's (the learner's scripts, run by a step's background
work in their sandbox). A grade that struck its time limit may leave a checks thread behind, so
that worker retires and a fresh one is forked for the next submission. Every worker grades under
the memory cap of :mod:`gpushare.grading.guard`: a grade past it is that learner's error row,
and the worker retires.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushare.classroom import gradebook
from gpushare.reports.messages import T


@dataclass(frozen=True)
class Task:
    """What a worker needs to grade one submission."""

    snapshot: Path
    folder: Path  # where results.json and junit.xml go
    lang: str
    seed: int
    timeout: float
    unsafe_no_sandbox: bool
    checks: tuple[gradebook.CheckInfo, ...]
    policy: Any = None  # gpushare.reports.policy.Policy: what learners see of each check


def preload() -> None:
    """Import everything a grade uses, once, in the parent: forked workers inherit it (the
    graders and their lab's modules included)."""
    import gpushare.grading.grade
    import gpushare.grading.labstate
    import gpushare.grading.session
    import gpushare.reports.junit
    import gpushare.submissions.snapshot  # noqa: F401
    from gpushare.grading import runner
    from gpushare.locations import graders_dir

    runner.load_checks(graders_dir())


def scratch_in(root: Path) -> Any:
    """A worker initializer: every scratch folder of its grades under ``root``, which the
    parent removes at the end (a killed worker cannot clean up after itself)."""

    def init() -> None:
        from gpushare.grading import guard

        tempfile.tempdir = str(root)
        guard.cap_memory()  # for the worker's life: it only grades strangers' snapshots

    return init


def grade_one(task: Task) -> tuple[dict[str, Any], bool]:
    """Grade ``task``; return (what the parent needs, whether this worker should retire)."""
    from gpushare.grading.grade import OptionError, Options, grade
    from gpushare.grading.session import GradeError
    from gpushare.submissions.snapshot import SnapshotError

    t0, c0 = time.monotonic(), os.times()
    retire = False
    if not task.unsafe_no_sandbox:  # the uid level: this submission's and results' folders
        from gpushare.sandbox import levels

        levels.protect_at_uid([task.snapshot.parent, task.folder.parent])
    try:
        outcome = grade(
            Options(
                snapshot=task.snapshot,
                lang=task.lang,
                seed=task.seed,
                timeout=task.timeout,
                unsafe_no_sandbox=task.unsafe_no_sandbox,
                policy=task.policy,
            )
        )
        outcome.write(task.folder / "results.json", task.folder / "junit.xml")
        results = json.loads((task.folder / "results.json").read_text(encoding="utf-8"))
        retire = bool(outcome.report.timed_out) or threading.active_count() > 1
    except SnapshotError as exc:
        results = _error(task, str(exc), "cluster", why=exc.kind, detail=exc.detail)
    except (OptionError, GradeError) as exc:
        results = _error(task, str(exc), "cluster")
    except Exception as exc:  # a bug of ours: this submission's row says so, the class goes on
        from gpushare.grading import guard

        if guard.out_of_memory(exc):
            error = guard.memory_message()
        else:
            error = f"{type(exc).__name__}: {exc}"
        results = _error(task, error, "grader", detail=T("grade_crashed", error=error[:300]))
        retire = True
    c1 = os.times()
    return {
        "results": results,
        "seconds": time.monotonic() - t0,
        "cpu_ours": (c1.user - c0.user) + (c1.system - c0.system),
        "cpu_learner": (c1.children_user - c0.children_user)
        + (c1.children_system - c0.children_system),
    }, retire


def _error(
    task: Task, reason: str, kind: str, why: str = "", detail: T | None = None
) -> dict[str, Any]:
    reason = reason.removeprefix("gpushare: ")
    return gradebook.write_error(
        task.folder,
        task.snapshot,
        reason,
        kind,
        lang=task.lang,
        seed=task.seed,
        checks=list(task.checks),
        why=why,
        detail=detail,
    )
