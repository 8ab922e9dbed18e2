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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpushare.classroom import gradebook
from gpushare.data import JsonObject
from gpushare.feedback import T
from gpushare.grading import guard
from gpushare.grading.errors import GradeError
from gpushare.grading.grade import OptionError, Options, grade
from gpushare.reports import junit
from gpushare.reports.policy import Policy
from gpushare.sandbox import levels
from gpushare.submissions.snapshot import SnapshotError


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
    record: dict[str, object]  # whose the submission is, from where (inputs.Submission.record)
    policy: Policy | None = None  # what learners see of each check


@dataclass(frozen=True)
class Graded:
    """What the parent needs of one grade: the results.json written, and what it cost."""

    results: JsonObject
    cost: dict[str, float]  # seconds, cpu_ours, cpu_learner


def scratch_in(root: Path) -> Callable[[], None]:
    """A worker initializer: every scratch folder of its grades under ``root``, which the
    parent removes at the end (a killed worker cannot clean up after itself)."""

    def init() -> None:
        tempfile.tempdir = str(root)
        guard.cap_memory()  # for the worker's life: it only grades strangers' snapshots

    return init


def grade_one(task: Task) -> tuple[Graded, bool]:
    """Grade ``task``; return (what the parent needs, whether this worker should retire)."""
    t0, c0 = time.monotonic(), os.times()
    retire = False
    if not task.unsafe_no_sandbox:  # the uid level: this submission's and results' folders
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
        outcome.write(junit_path=task.folder / "junit.xml")
        results = gradebook.write_results(task.folder, outcome.report.as_json(), task.record)
        retire = bool(outcome.report.timed_out) or threading.active_count() > 1
    except SnapshotError as exc:
        results = write_error(task, str(exc), "cluster", why=exc.kind, detail=exc.detail)
    except (OptionError, GradeError) as exc:
        results = write_error(task, str(exc), "cluster")
    except Exception as exc:  # a bug of ours: this submission's row says so, the class goes on
        oom = guard.out_of_memory(exc)
        error = guard.memory_message() if oom else f"{type(exc).__name__}: {exc}"
        results = write_error(task, error, "grader", detail=T("grade_crashed", error=error[:300]))
        retire = True
    c1 = os.times()
    cost = {
        "seconds": time.monotonic() - t0,
        "cpu_ours": (c1.user - c0.user) + (c1.system - c0.system),
        "cpu_learner": (c1.children_user - c0.children_user)
        + (c1.children_system - c0.children_system),
    }
    return Graded(results, cost), retire


def write_error(
    task: Task, reason: str, kind: str, why: str = "", detail: T | None = None
) -> JsonObject:
    """The error row of ``task`` (:func:`gradebook.error_results`): its junit.xml and
    results.json written as a grade's are, from this worker, or from the parent for a worker
    that died or hung."""
    checks = list(task.checks)
    report = gradebook.error_results(
        task.snapshot,
        reason.removeprefix("gpushare: "),
        kind,
        lang=task.lang,
        seed=task.seed,
        checks=checks,
        why=why,
        detail=detail,
    )
    try:
        junit.write(
            report,
            task.folder / "junit.xml",
            classnames={c.nodeid or c.number: c.classname or "graders" for c in checks},
            durations={},
            headline={c.number: c.number for c in checks},
        )
        return gradebook.write_results(task.folder, report.as_json(), task.record)
    except OSError as exc:  # its folder cannot be written: the row is still an error row
        data = report.as_json()
        extra = data["extra_data"]
        extra["submission"] = task.record
        extra["could_not_grade"] = f"{extra['could_not_grade']}; not written: {exc}"[:800]
        kept: JsonObject = json.loads(json.dumps(data, ensure_ascii=False))  # as if read back
        return kept
