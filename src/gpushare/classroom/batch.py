"""``gpushare class grade``: every learner's latest snapshot, graded in parallel, into one folder.

The folder holds ``<learner>/results.json`` and ``junit.xml``, ``grades.csv`` and
``report.html``. A bad snapshot, a grade past its time limit or a grading process that dies
is an error row of its own; the others are graded as if nothing happened. The seed of each
submission's unseen cases comes from ``--seed`` and the snapshot's content hash, so grading
the same files again with the same graders writes the same ``grades.csv``, and so do N shards
merged (``class merge``).

Exit status: 0 the class folder was written (error rows included: they are listed, and have
no score), 2 nothing could be graded at all (no snapshot found, bad options, no sandbox).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpushare.classroom import diff as regrade
from gpushare.classroom import flags, gradebook, identity, inputs, pool, report, worker
from gpushare.classroom.gradebook import CheckInfo, Row
from gpushare.classroom.inputs import InputError
from gpushare.classroom.progress import Progress
from gpushare.classroom.texts import text
from gpushare.data import JsonObject
from gpushare.feedback import T
from gpushare.reports import clean, messages
from gpushare.reports.policy import Policy, PolicyError
from gpushare.reports.policy import load as load_policy
from gpushare.sandbox import levels

DEFAULT_TIMEOUT = 60.0
# What a class (or shard) folder was graded with, for ``class merge``: the ``--seed`` above all,
# which no results.json holds (each holds its submission's seed, derived from it).
CLASS_FILE = "class.json"
_GRACE = 15.0  # past --timeout, the worker is killed: the soft limit writes partial results first


def _ended_detail(ended: str, why: str, limit: float) -> T:
    """What :func:`pool.run` said of a worker that gave no result, as a translatable value:
    past the hard limit, killed by a signal, or ended with an exit status."""
    if ended == pool.HUNG:
        return T("grade_hung", limit=f"{limit:g}")
    killed = re.search(r"killed \(([^)]+)\)", why)
    if killed:
        return T("grade_killed", signal=killed[1])
    status = re.search(r"exit status (\S+)\)", why)
    return T("grade_exited", status=status[1] if status else why[:100])


@dataclass
class ClassRun:
    """What a class grade wrote and measured."""

    out: Path
    rows: list[Row]
    checks: list[CheckInfo]
    lang: str
    seed: int
    diff: regrade.Diff | None
    seconds: float
    costs: list[dict[str, float]] = field(default_factory=list)  # per graded submission
    superseded: int = 0  # files not graded: older snapshots of learners graded
    notes: list[str] = field(default_factory=list)  # what the layout ignored (identity.Layout)

    @property
    def errors(self) -> list[Row]:
        return [r for r in self.rows if r.status == "error"]


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def offered(lang: str) -> str:
    """The chosen language (the command chose it: gpushare.cli), checked; InputError if not."""
    try:
        return messages.offered(lang)
    except ValueError as exc:
        raise InputError(str(exc)) from None


@dataclass(frozen=True)
class ClassOptions:
    """How a class is graded: ``class grade``'s options, one object from the command line (or
    a benchmark) to :func:`grade_class`."""

    jobs: int | None = None  # grading processes (default: the cores)
    every: bool = False  # every snapshot, not only each learner's latest
    previous: Path | None = None  # an earlier class folder: show what changed
    seed: int = 0
    lang: str = "en"  # chosen by the command line (gpushare.cli.choose_lang)
    timeout: float = DEFAULT_TIMEOUT  # one submission's grade
    shard: tuple[int, int] = (0, 1)
    unsafe_no_sandbox: bool = False
    policy: Path | None = None
    roster: Path | None = None
    deadline: str | None = None


def grade_class(
    paths: list[Path],
    out: Path,
    opts: ClassOptions = ClassOptions(),
    progress: Callable[[int], Progress] | None = None,
) -> ClassRun:
    """Grade the class; raises :class:`InputError` (one line) when nothing can be graded.

    ``progress(total)`` makes the progress display once the submissions are chosen.
    """
    started = time.monotonic()
    lang = offered(opts.lang)
    if opts.timeout <= 0:
        raise InputError("--timeout must be more than 0 seconds")
    due = parse_deadline(opts.deadline)
    layout, superseded, chosen = _choose(paths, opts)
    before = previous_rows(opts.previous)
    visibility = _policy(opts.policy)
    _require_sandbox(opts.unsafe_no_sandbox)
    if not opts.unsafe_no_sandbox:  # the uid level: no learner's script may read the class's files
        policy = [opts.policy] if opts.policy else []
        _refuse_unprotected(levels.protect_at_uid([*paths, out, *policy]))
    checks = gradebook.catalog(visibility)  # worth the policy's points, where it sets any
    out.mkdir(parents=True, exist_ok=True)
    folders = [s.folder(opts.every) for s in chosen]
    _drop_stale(out, set(folders))
    tasks, blocked = _tasks(chosen, out, folders, lang, opts, checks, visibility)
    rows, costs = _grade_all(tasks, blocked, folders, opts, progress)
    rows = gradebook.ordered(rows)
    seed, (index, count) = opts.seed, opts.shard
    run = finish(
        out,
        rows,
        checks,
        lang,
        seed,
        before=before,
        started=started,
        partial=count > 1,
        deadline=due,
    )
    run.costs, run.superseded, run.notes = costs, superseded, list(layout.notes)
    extra = {"deadline": opts.deadline.strip()} if opts.deadline else {}
    write_class_file(out, seed=seed, lang=lang, shard=f"{index}/{count}", **extra)
    return run


def _choose(
    paths: list[Path], opts: ClassOptions
) -> tuple[identity.Layout, int, list[inputs.Submission]]:
    """Whose each snapshot is (the layout), how many files are older snapshots of learners
    graded (superseded), and those this run grades: each learner's latest (or every one), of
    this shard."""
    found = inputs.locate(paths)
    if not found:
        raise InputError(f"no snapshot (*.gpushare.tgz) in {', '.join(map(str, paths))}")
    try:
        layout = identity.Layout(opts.roster)
        layout.survey(found)
        described = [inputs.describe(p, root, layout) for p, root in found]
    except identity.LayoutError as exc:
        raise InputError(str(exc)) from None
    selected = inputs.select(described, opts.every)
    chosen = [replace(s, shipped=flags.shipped_name(s.path)) for s in selected]
    superseded = len(described) - len(selected)
    return layout, superseded, inputs.shard(chosen, *opts.shard)


def _tasks(
    chosen: list[inputs.Submission],
    out: Path,
    folders: list[str],
    lang: str,
    opts: ClassOptions,
    checks: list[CheckInfo],
    visibility: Policy | None,
) -> tuple[list[worker.Task], dict[int, str]]:
    """One worker task a submission, and those whose folder cannot be made (an error row each,
    not graded). ``visibility``: the policy that says what learners see of the checks."""
    tasks: list[worker.Task] = []
    blocked: dict[int, str] = {}
    for sub, folder in zip(chosen, folders, strict=True):
        try:
            (out / folder).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            blocked[len(tasks)] = f"its folder {out / folder} cannot be made: {exc}"
        tasks.append(
            worker.Task(
                snapshot=sub.path.resolve(),
                folder=out / folder,
                lang=lang,
                seed=inputs.seed_for(opts.seed, sub.digest),
                timeout=opts.timeout,
                unsafe_no_sandbox=opts.unsafe_no_sandbox,
                checks=tuple(checks),
                record=sub.record(),
                policy=visibility,
            )
        )
    return tasks, blocked


def _grade_all(
    tasks: list[worker.Task],
    blocked: dict[int, str],
    folders: list[str],
    opts: ClassOptions,
    progress: Callable[[int], Progress] | None,
) -> tuple[list[Row], list[dict[str, float]]]:
    """The tasks graded in the pool: a row each (an error row for a blocked folder, a worker
    that died or hung), and the cost of each graded one."""
    rows: list[Row] = []
    costs: list[dict[str, float]] = []
    shown = progress(len(tasks)) if progress else None

    def done(index: int, graded: worker.Graded, seconds: float) -> None:
        row = gradebook.row_from_results(folders[index], graded.results)
        rows.append(row)
        if row.status != "error":
            costs.append(graded.cost)
        if shown:
            shown.update(row.folder, row.status, row.score, seconds)

    def failed(index: int, ended: str, why: str, seconds: float) -> None:
        """A worker that died or hung: its task's error row, written here."""
        hung = ended == pool.HUNG
        detail = _ended_detail(ended, why, opts.timeout + _GRACE)
        kind, sort = ("timeout", "timeout") if hung else ("grader", "died")
        results = worker.write_error(tasks[index], why, kind, why=sort, detail=detail)
        done(index, worker.Graded(results, cost={}), seconds)

    for index, why in blocked.items():
        done(index, worker.Graded(worker.write_error(tasks[index], why, "grader"), {}), 0.0)
    graded = [i for i in range(len(tasks)) if i not in blocked]
    scratch = Path(tempfile.mkdtemp(prefix="gpushare-class-"))
    try:
        pool.run(
            [tasks[i] for i in graded],
            worker.grade_one,
            jobs=max(1, opts.jobs or default_jobs()),
            limit=opts.timeout + _GRACE,
            on_result=lambda i, result, seconds: done(graded[i], result, seconds),
            on_failure=lambda i, ended, why, seconds: failed(graded[i], ended, why, seconds),
            init=worker.scratch_in(scratch),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows, costs


def parse_deadline(text: str | None) -> dt.datetime | None:
    """``--deadline`` as a time (UTC when it names no offset), or None."""
    if not text:
        return None
    when = flags.parse_time(text)
    if when is None:
        raise InputError(
            f"--deadline takes an ISO 8601 time, e.g. 2026-12-01T23:59:00Z (got {text!r})"
        )
    return when


def write_class_file(out: Path, **fields: object) -> None:
    """``class.json``: how this folder was graded (see :data:`CLASS_FILE`)."""
    text = json.dumps({"format": 1, **fields}, indent=2, sort_keys=True) + "\n"
    (out / CLASS_FILE).write_text(text, encoding="utf-8")


def read_class_file(folder: Path) -> JsonObject:
    """A folder's ``class.json``, or {} when it has none (or not one we can read)."""
    try:
        data = json.loads((folder / CLASS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def finish(
    out: Path,
    rows: list[Row],
    checks: list[CheckInfo],
    lang: str,
    seed: int,
    *,
    before: tuple[str, list[Row]] | None,
    started: float,
    partial: bool = False,
    deadline: dt.datetime | None = None,
) -> ClassRun:
    """Write grades.csv and report.html of ``rows`` (a run's, or merged shards'), with the
    suspicion flags of the whole class (:func:`flags.mark`). ``before``: the earlier class
    folder and its rows (:func:`previous_rows`), to show what changed; ``partial``: ``rows``
    are one shard's."""
    flags.mark(rows, deadline=deadline)
    checks = gradebook.with_points(checks, rows)
    changes = regrade.compare(*before, rows, partial=partial) if before else None
    gradebook.write_text(out / gradebook.CSV_NAME, gradebook.csv_text(rows, checks))
    report.write(out / report.REPORT_NAME, rows, checks, lang, seed=seed, diff=changes)
    seconds = time.monotonic() - started
    return ClassRun(out, rows, checks, lang, seed, changes, seconds)


def previous_rows(previous: Path | None) -> tuple[str, list[Row]] | None:
    """``--previous`` as named and its rows, read before anything is written (``--out`` may be
    the same folder)."""
    if previous is None:
        return None
    if not previous.is_dir():
        raise InputError(f"--previous {previous}: no such class folder")
    rows = gradebook.load_rows(previous)
    if not rows:
        raise InputError(f"--previous {previous}: no <learner>/results.json in it")
    return str(previous), rows


def _policy(path: Path | None) -> Policy | None:
    """The instructor's visibility policy: applied to every results.json, so the report, made
    from them, shows only what learners may see."""
    if path is None:
        return None
    try:
        return load_policy(path.expanduser())
    except PolicyError as exc:
        raise InputError(str(exc)) from None


def _refuse_unprotected(paths: list[str]) -> None:
    """The class's folders that other users may read and the grader cannot protect (not its
    own): graded as they are, every learner's results and snapshot would stay readable by the
    host's other users while the class is graded, beside the learners' own runs' uids."""
    if paths:
        owners = ", ".join(f"{p} (owner uid {os.stat(p).st_uid})" for p in paths)
        raise InputError(
            f"refusing to grade: {owners} can be read by other users, and this grader (uid "
            f"{os.geteuid()}) does not own it, so it will not change its mode; make it "
            f"private first (`chmod o-rwx {' '.join(shlex.quote(p) for p in paths)}`), or "
            "grade as its owner, or install bubblewrap"
        )


def _require_sandbox(unsafe: bool) -> None:
    """Refuse once, up front, rather than fail every submission the same way."""
    try:
        levels.choose(strangers=True, unsafe_no_sandbox=unsafe)
    except levels.IsolationUnavailable as exc:
        raise InputError(str(exc)) from None


def expect_exactly(paths: list[Path], expect: int | None) -> None:
    """``--expect N``: the paths hold exactly N snapshot files, or nothing is graded (a copy
    cut short or still running, another class's files among them)."""
    if expect is None:
        return
    found = len(inputs.locate(paths))
    if found != expect:
        why = "a copy cut short or still running?" if found < expect else "whose are the rest?"
        raise InputError(
            f"--expect {expect}: {', '.join(map(str, paths))} holds {found} snapshot files "
            f"({why}); nothing graded"
        )


def _drop_stale(out: Path, keep: set[str]) -> None:
    """Results of another run in the same folder would pass for this run's (the CSV, a merge):
    remove those of submissions this run does not grade."""
    for path in list(out.glob("*/results.json")) + list(out.glob("*/*/results.json")):
        folder = path.parent.relative_to(out).as_posix()
        if folder in keep or not path.is_file() or path.is_symlink():
            continue  # a folder of that name is another row's (or a learner's file name's)
        try:
            for name in ("results.json", "junit.xml"):
                stale = path.parent / name
                if stale.is_file() and not stale.is_symlink():
                    stale.unlink()
            path.parent.rmdir()
            if path.parent.parent != out:
                path.parent.parent.rmdir()
        except OSError:
            pass


# --------------------------------------------------------------------------- the command


def summary(run: ClassRun) -> str:
    """The terminal's summary: counts, scores, errors, the regrade diff, where things are."""
    lang = run.lang
    graded = [r for r in run.rows if r.status != "error"]
    scores = [r.score for r in graded if r.score is not None]
    lines = [
        text("summary", lang, n=len(run.rows), graded=len(graded), errors=len(run.errors))
        + f" ({run.seconds:.1f}s)"
    ]
    if scores:
        lines.append(text("stats", lang, **report.stats(scores)))
    lines.append(gradebook.total_line(run.checks, lang))
    for r in run.errors:
        lines.append(f"  {r.folder}: {text('error', lang)}: {report.reason_said(r, lang)}")
    if run.superseded:
        lines.append(text("superseded", lang, n=run.superseded))
    lines.extend(run.notes)
    flagged = [r for r in run.rows if r.flags]
    if flagged:
        lines.append(text("flagged_summary", lang, n=len(flagged)))
        lines.extend(f"  {r.folder}: {' '.join(gradebook.flag_tokens(r.flags))}" for r in flagged)
        groups = flags.grouped(run.rows)
        if groups:
            lines.append(text("flag_groups", lang, n=len(groups)))
            for key, detail, members in groups:
                number, _, what = detail.partition(": ")
                names = ", ".join(sorted(r.folder for r in members))
                lines.append(f"  {number} {key}: {what}: {names}")
    if run.diff is not None:
        if run.diff.changes:
            lines.append(text("changed", lang, n=len(run.diff.changes), previous=run.diff.previous))
            words = {"new": text("new", lang), "gone": text("gone", lang)}
            lines.extend(regrade.lines(run.diff, words))
        else:
            lines.append(text("unchanged", lang, previous=run.diff.previous, n=run.diff.compared))
    lines.append(f"grades.csv:  {run.out / gradebook.CSV_NAME}")
    lines.append(f"report.html: {run.out / report.REPORT_NAME}")
    # folder names and reasons are the learners': shown, never obeyed by the terminal
    return clean.text("\n".join(lines)) + "\n"


def run_cli(args: argparse.Namespace) -> int:
    try:
        shard = inputs.parse_shard(args.shard) if args.shard else (0, 1)
        paths = [Path(p).expanduser() for p in args.paths]
        expect_exactly(paths, args.expect)
        opts = ClassOptions(
            jobs=args.jobs,
            every=args.all,
            previous=Path(args.previous).expanduser() if args.previous else None,
            seed=args.seed,
            lang=args.lang,
            timeout=args.timeout,
            shard=shard,
            unsafe_no_sandbox=args.unsafe_no_sandbox,
            policy=Path(args.policy).expanduser() if args.policy else None,
            roster=Path(args.roster).expanduser() if args.roster else None,
            deadline=args.deadline,
        )
        run = grade_class(paths, Path(args.out).expanduser(), opts, progress=Progress)
    except InputError as exc:
        print(f"gpushare: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(summary(run))
    return 0
