"""Grading as a function: :func:`grade` takes :class:`Options` and gives an :class:`Outcome`;
``gpushare grade`` is :func:`run_cli` around it (summary, JSON, JUnit XML, exit status).

The check functions are those of ``graders/``, called by :mod:`gpushare.grading.runner` with
the same inputs and feedback as under ``pytest graders/`` (see :mod:`gpushare.grading.session`),
so both entry points give the same checks and the same score. pytest is not imported here: its
start-up and collection would be most of a one-second grade. Class grading and the Gradescope
autograder call :func:`grade` in-process, once per snapshot.

Exit status: 0 every check passed, 1 some failed, 2 could not grade (the cluster could not be
read, a bad snapshot, or the ``--timeout`` struck).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


class OptionError(Exception):
    """Options that cannot work together, or a missing part of the checkout: exit 2."""


@dataclass
class Options:
    """What to grade and how; the same as ``gpushare grade``'s options."""

    workdir: Path | None = None  # default: $GPUSHARE_WORKDIR or /root/gpushare
    kubeconfig: str | None = None
    context: str | None = None
    cluster: str | None = None
    snapshot: Path | None = None  # grade this file instead of a cluster
    lang: str | None = None  # default: GPUSHARE_LANG, the locale, zh
    seed: int | None = None  # default: a new one, recorded in the results
    steps: set[int] = field(default_factory=set)  # empty: every step
    timeout: float | None = None  # seconds for the whole grade; unfinished checks are errors
    unsafe_no_sandbox: bool = False  # grade a snapshot's script without bubblewrap
    policy: Any = None  # gpushare.reports.policy.Policy: what learners see of each check


@dataclass
class Outcome:
    """One grade: the report and what JUnit XML needs besides."""

    report: Any  # results.Report
    classnames: dict[str, str]  # nodeid -> module, as pytest's JUnit XML names them
    durations: dict[str, float]  # nodeid -> seconds
    headlines: dict[str, str]  # check number -> "number title"

    def write(self, json_path: Path | None = None, junit_path: Path | None = None) -> None:
        if json_path:
            self.report.write_json(Path(json_path))
        if junit_path:
            from gpushare.reports import junit

            junit.write(
                self.report,
                Path(junit_path),
                classnames=self.classnames,
                durations=self.durations,
                headline=self.headlines,
            )

    @property
    def exit_status(self) -> int:
        if not self.report.complete:
            return EXIT_ERROR
        return EXIT_OK if self.report.all_passed else EXIT_FAILED


def grade(options: Options, started: float | None = None) -> Outcome:
    """Grade a cluster and work dir, or a snapshot file.

    A snapshot is unpacked into a scratch folder that is removed afterwards, whatever
    happens. Raises OptionError, ``snapshot.SnapshotError`` or ``session.GradeError`` (one
    line each, exit 2 for a command) when no grade can be taken at all.
    """
    started = time.monotonic() if started is None else started
    if not options.snapshot:
        return _grade(options, started, None)
    if options.kubeconfig or options.context:
        raise OptionError("--snapshot grades the file alone: no --kubeconfig or --context with it")
    import shutil
    import tempfile

    from gpushare.submissions.snapshot import load

    scratch = Path(tempfile.mkdtemp(prefix="gpushare-grade-"))
    try:
        return _grade(options, started, load(Path(options.snapshot), scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _grade(options: Options, started: float, snap: Any) -> Outcome:
    """Grade; the learner's script runs start before anything heavy is even imported.

    Those runs are most of a grade's time and CPU; started first, they overlap our imports,
    the cluster read and every other check.
    """
    from gpushare.locations import default_fixtures, default_workdir, graders_dir

    steps = options.steps
    if not graders_dir().is_dir():
        raise OptionError(f"graders not found at {graders_dir()}")
    # The learner's runs start before the graders are even imported (they are most of a
    # grade); with --step, the graders are read first to see whether any selected check
    # judges those runs at all.
    wants_runs = True
    if steps:
        from gpushare.grading import runner

        found = runner.load_checks(graders_dir())
        known = sorted({c.meta["step"] for c in found})
        if not steps <= set(known):
            raise OptionError(f"--step takes the graders' step numbers: {known}")
        wants_runs = any("request_runs" in c.parameters() for c in found if c.meta["step"] in steps)
    from gpushare.reports import messages

    try:
        lang = messages.resolve_lang(options.lang)  # else GPUSHARE_LANG, the locale, zh
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    from gpushare.grading.requestruns import RequestRuns, new_seed

    if snap is not None:
        workdir = snap.work_root
    else:
        workdir = Path(options.workdir).expanduser() if options.workdir else default_workdir()
    seed = options.seed if options.seed is not None else new_seed()
    fixtures = default_fixtures()
    if wants_runs and not (fixtures / "check-request").is_dir():
        raise OptionError(f"the sample manifests of step 6 are not at {fixtures}/check-request")
    runs = None
    try:
        if wants_runs:
            from gpushare.sandbox import levels

            shown = snap.manifest.get("workdir") if snap is not None else None
            try:
                level = levels.choose(
                    strangers=snap is not None, unsafe_no_sandbox=options.unsafe_no_sandbox
                )
            except levels.IsolationUnavailable as exc:
                raise OptionError(str(exc)) from None
            runs = RequestRuns.start(workdir, fixtures, seed, shown, level)
        from gpushare.grading import runner
        from gpushare.grading.session import GradeSession

        session = GradeSession(
            workdir=workdir,
            kubeconfig=options.kubeconfig,
            cluster=options.cluster,
            context=options.context,
            lang=lang,
            seed=seed,
            fixtures=fixtures,
            runs=runs,
            started=started,
            snapshot=snap,
            unsafe_no_sandbox=options.unsafe_no_sandbox,
        )
    except BaseException:
        if runs is not None:
            runs.close()
        raise
    deadline = started + options.timeout if options.timeout else None
    finished = True
    try:
        checks = runner.load_checks(graders_dir(), steps or None)
        session.connect(runner.modules(checks))
        durations, finished = runner.run(session, checks, deadline=deadline)
    finally:
        session.close(wait=finished)
    report = session.report()
    if options.policy is not None:  # before any output is made from the report
        from gpushare.reports.policy import apply

        apply(report, options.policy)
    return Outcome(
        report=report,
        classnames={c.nodeid: c.classname for c in checks},
        durations=durations,
        headlines={c.meta["number"]: session.headline(c.meta["number"]) for c in checks},
    )


# --------------------------------------------------------------------------- the command


def _error(msg: str) -> int:
    from gpushare.reports.clean import line  # a snapshot's names and answers are in it

    print(line(msg if msg.startswith("gpushare:") else f"gpushare: {msg}"), file=sys.stderr)
    return EXIT_ERROR


def options_from(args: argparse.Namespace) -> Options:
    try:
        steps = {int(s) for s in args.step or []}
    except ValueError:
        steps = {0}
    return Options(
        workdir=Path(args.workdir).expanduser() if args.workdir else None,
        kubeconfig=args.kubeconfig,
        context=args.context,
        cluster=args.cluster,
        snapshot=Path(args.snapshot).expanduser() if args.snapshot else None,
        lang=args.lang,
        seed=args.seed,
        steps=steps,
        timeout=args.timeout,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
        policy=_policy(getattr(args, "policy", None)),
    )


def _policy(path: str | None) -> Any:
    """The ``--policy FILE`` of a command, loaded; OptionError (exit 2) when it cannot be."""
    if not path:
        return None
    from gpushare.reports.policy import PolicyError, load

    try:
        return load(Path(path).expanduser())
    except PolicyError as exc:
        raise OptionError(str(exc)) from None


def run_cli(args: argparse.Namespace) -> int:
    started = time.monotonic()
    if not args.snapshot:
        return _run_cli(args, started)
    # a stranger's file: its grade is bounded in memory and time (gpushare.grading.guard)
    from gpushare.grading import guard

    if args.timeout is None:
        args.timeout = guard.SNAPSHOT_TIMEOUT
    with guard.bounded(args.timeout, f"the grade of {args.snapshot}"):
        return _run_cli(args, started)


def _run_cli(args: argparse.Namespace, started: float) -> int:
    try:
        outcome = grade(options_from(args), started)
    except Exception as exc:
        # classified here, not imported up front: the learner's runs start before the session
        # and snapshot modules are even imported
        from gpushare.grading.session import GradeError
        from gpushare.submissions.snapshot import SnapshotError

        if isinstance(exc, SnapshotError):
            return _error(f"bad snapshot: {exc}")
        if isinstance(exc, OptionError | GradeError):
            return _error(str(exc))
        from gpushare.grading import guard

        if guard.out_of_memory(exc):
            return _error(f"could not grade: {guard.memory_message()}")
        raise
    outcome.write(args.json, args.junitxml)
    report = outcome.report
    if report.could_not_grade and not report.timed_out:  # no score to show: one line
        return _error(f"could not grade ({_graded(report)}): {report.could_not_grade}")
    from gpushare.reports import terminal

    color = terminal.want_color(getattr(args, "color", "auto"))
    sys.stdout.write(terminal.render(report, color=color))
    if args.json:
        print(f"results.json: {args.json}")
    if args.junitxml:
        print(f"JUnit XML:    {args.junitxml}")
    if report.timed_out:
        return _error(f"could not finish: {report.could_not_grade}")
    return outcome.exit_status


def _graded(report: Any) -> str:
    c = report.cluster or {}
    if c.get("snapshot"):
        return f"snapshot {c['snapshot']}"
    return f"context {c.get('context') or '-'} of {c.get('kubeconfig')}, server {report.server}"
