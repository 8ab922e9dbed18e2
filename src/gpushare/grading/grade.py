"""Grading as a function: :func:`grade` takes :class:`Options` and gives an :class:`Outcome`;
``gpushare grade`` is :func:`run_cli` around it. Class grading and the Gradescope autograder
call :func:`grade` in-process.

The checks get the inputs and feedback of ``pytest graders/`` (:mod:`gpushare.grading.session`)
without pytest, whose import alone (about 0.1 s) would be half of a grade (about 0.22 s).
Exit status: 0 every check passed, 1 some failed, 2 could not grade (the cluster could not be
read, a bad snapshot, or the ``--timeout`` struck).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict

from gpushare.grading import background, guard, runner
from gpushare.grading.errors import GradeError
from gpushare.grading.runner import Check
from gpushare.locations import default_fixtures, default_workdir, graders_dir
from gpushare.reports import junit, messages, terminal
from gpushare.reports.clean import line
from gpushare.reports.policy import Policy, PolicyError, total_warning
from gpushare.reports.policy import apply as apply_policy
from gpushare.reports.policy import load as load_policy
from gpushare.reports.results import Report

if TYPE_CHECKING:  # imported where it is used, below: the line there says why
    from gpushare.grading.session import GradeSession

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
    lang: str | None = None  # chosen by the entry point (messages.resolve_lang); required
    seed: int | None = None  # default: a new one, recorded in the results
    steps: set[int] = field(default_factory=set)  # empty: every step
    timeout: float | None = None  # seconds for the whole grade; unfinished checks are errors
    unsafe_no_sandbox: bool = False  # grade a snapshot's script without bubblewrap
    policy: Policy | None = None  # what learners see of each check


@dataclass
class Outcome:
    """One grade: the report and what JUnit XML needs besides."""

    report: Report
    classnames: dict[str, str]  # nodeid -> module, as pytest's JUnit XML names them
    durations: dict[str, float]  # nodeid -> seconds
    headlines: dict[str, str]  # check number -> "number title"
    # what the checks read: cluster-read keys and work-dir paths (``gpushare watch`` grades a
    # step again only when one of these changes)
    read_keys: frozenset[str] = frozenset()
    read_files: frozenset[str] = frozenset()

    def write(self, json_path: Path | None = None, junit_path: Path | None = None) -> None:
        if json_path:
            self.report.write_json(Path(json_path))
        if junit_path:
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

    Raises OptionError, ``snapshot.SnapshotError`` or ``session.GradeError`` (one line each,
    exit 2 for a command) when no grade can be taken at all.
    """
    started = time.monotonic() if started is None else started
    deadline = started + options.timeout if options.timeout else None
    with open_session(options, started, background_first=True) as session:
        checks, known = _select(options.steps)
        session.start_background(runner.background(checks))  # what they ask for, not yet going
        session.connect(runner.modules(checks))  # the cluster read starts
        durations = runner.run(session, checks, deadline=deadline)
    report = session.report()
    if options.policy is not None:  # before any output is made from the report
        apply_policy(report, options.policy)
    report.steps_not_graded = len(set(known) - {c.meta["step"] for c in checks})
    return Outcome(
        report=report,
        classnames={c.nodeid: c.classname for c in checks},
        durations=durations,
        headlines={c.meta["number"]: session.headline(c.meta["number"]) for c in checks},
        read_keys=frozenset(session.state.touched if session.state else ()),
        read_files=frozenset(session.work.touched),
    )


def _select(steps: set[int]) -> tuple[list[Check], list[int]]:
    """The checks of the chosen steps (all with no ``--step``), and every step the graders
    have; OptionError for a step that is not one of the graders'."""
    if not graders_dir().is_dir():
        raise OptionError(f"graders not found at {graders_dir()}")
    found = runner.load_checks(graders_dir())
    known = sorted({c.meta["step"] for c in found})
    if steps and not steps <= set(known):
        raise OptionError(f"--step takes the graders' step numbers: {known}")
    return [c for c in found if not steps or c.meta["step"] in steps], known


def parse_steps(values: list[str] | None) -> set[int]:
    """The step numbers of a repeatable ``--step`` whose values may be comma lists: ``--step
    1,2``, ``--step 1 --step 2`` and ``--steps 1,2`` are the same (``grade`` and ``solve`` take
    both forms); ValueError for anything that is not a number."""
    return {int(part) for value in values or () for part in value.split(",") if part.strip()}


@contextlib.contextmanager
def open_session(
    options: Options, started: float | None = None, *, background_first: bool = False
) -> Iterator[GradeSession]:
    """The one way to a :class:`GradeSession` (``gpushare grade``, ``pytest graders/``,
    ``gpushare snapshot``): the language resolved, a snapshot verified and unpacked into a
    scratch folder (removed afterwards, whatever happens), the work dir, fixtures and seed as
    the options and :mod:`gpushare.locations` say; the session closed on the way out.

    ``background_first`` (``gpushare grade``): the steps' background work, most of a grade,
    starts before the session and the other graders are imported, so it overlaps them and the
    cluster read; pytest collects first and starts it from ``start_background``.
    """
    if options.snapshot and (options.kubeconfig or options.context):
        raise OptionError("--snapshot grades the file alone: no --kubeconfig or --context with it")
    if not options.lang:  # a bug of the caller's: the entry point chooses it
        raise OptionError("no language chosen (the command resolves --lang)")
    try:
        lang = messages.offered(options.lang)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    with contextlib.ExitStack() as stack:
        snap = None
        workdir = Path(options.workdir).expanduser() if options.workdir else default_workdir()
        if options.snapshot:
            # lazy: 17 ms (5 ms once the session is imported) that a live grade never needs
            from gpushare.submissions.snapshot import load

            scratch = Path(tempfile.mkdtemp(prefix="gpushare-grade-"))
            stack.callback(shutil.rmtree, scratch, ignore_errors=True)
            snap = load(Path(options.snapshot).expanduser(), scratch)
            workdir = snap.work_root
        setting = background.Setting(
            workdir=workdir,
            # a snapshot's work dir as the learner had it, not our scratch copy of it
            shown_workdir=snap.manifest.get("workdir") if snap is not None else None,
            fixtures=default_fixtures(),
            seed=options.seed if options.seed is not None else background.new_seed(),
            strangers=snap is not None,
            unsafe_no_sandbox=options.unsafe_no_sandbox,
        )
        early = background.Started()
        if background_first:
            first = runner.load_checks(
                graders_dir(), options.steps or None, with_background_only=True
            )
            try:
                early = background.start_all(runner.background(first), setting)
            except background.BackgroundError as exc:
                raise OptionError(str(exc)) from None
            stack.callback(early.close)  # until the session has it
        # lazy: 30 ms of imports (the session, the cluster read, kubeconfigs, TLS, YAML) that
        # here overlap the learner's runs instead of delaying their start
        from gpushare.grading.session import GradeSession

        session = GradeSession(
            setting=setting,
            kubeconfig=options.kubeconfig,
            cluster=options.cluster,
            context=options.context,
            lang=lang,
            started=started,
            snapshot=snap,
        )
        session.adopt(early)
        stack.callback(lambda: session.close(wait=not session.timed_out))
        yield session


# --------------------------------------------------------------------------- the command


def _error(msg: str) -> int:
    # cleaned: a snapshot's names and answers are in it
    print(line(msg if msg.startswith("gpushare:") else f"gpushare: {msg}"), file=sys.stderr)
    return EXIT_ERROR


class OptionSpec(TypedDict, total=False):
    """What :data:`SHARED_OPTIONS` says of an option (argparse's and pytest's keywords)."""

    help: str
    metavar: str
    action: Literal["store_true"]
    type: type[int]


# The options both entry points take, declared once: ``gpushare grade`` adds them to its
# parser, the pytest plugin to pytest's (under ``gpushare_`` names), and both make their
# :class:`Options` with :func:`options_from`.
SHARED_OPTIONS: tuple[tuple[str, OptionSpec], ...] = (
    (
        "--workdir",
        {"help": "the learner's work directory (default: $GPUSHARE_WORKDIR or /root/gpushare)"},
    ),
    (
        "--kubeconfig",
        {
            "help": "grade this cluster as given, never start anything (default: $KUBECONFIG, "
            "a list of files merged as kubectl merges them; else the lab cluster)"
        },
    ),
    ("--context", {"help": "kubeconfig context to grade (default: current-context)"}),
    ("--cluster", {"help": "lab cluster name (default: $GPUSHARE_CLUSTER or 'gpushare')"}),
    (
        "--snapshot",
        {
            "metavar": "FILE",
            "help": "grade this snapshot (.gpushare.tgz) offline: no cluster, no control plane",
        },
    ),
    (
        "--unsafe-no-sandbox",
        {
            "action": "store_true",
            "help": "run the learner's code without the bubblewrap sandbox even when grading a "
            "snapshot (only for trusted work)",
        },
    ),
    (
        "--lang",
        {
            "help": "feedback language, one the lab has (zh, ko, en here); default: "
            "$GPUSHARE_LANG, else the locale's, else the lab's default_lang (lab.toml)"
        },
    ),
    ("--json", {"metavar": "FILE", "help": "write Gradescope-style results.json"}),
    ("--seed", {"type": int, "help": "seed of the grade's generated cases (default: random)"}),
)


class AddOption(Protocol):
    """argparse's ``add_argument`` or pytest's ``addoption``, as :func:`add_options` calls it."""

    def __call__(
        self,
        flag: str,
        /,
        *,
        dest: str,
        help: str = ...,
        metavar: str = ...,
        action: Literal["store_true"] = ...,
        type: type[int] = ...,
    ) -> object: ...


def add_options(add: AddOption, prefix: str = "") -> None:
    """Declare :data:`SHARED_OPTIONS` with ``add`` (argparse's ``add_argument``, pytest's
    ``addoption``); each one's dest is its name with ``prefix``."""
    for flag, spec in SHARED_OPTIONS:
        add(flag, dest=prefix + flag[2:].replace("-", "_"), **spec)


def options_from(args: object, prefix: str = "") -> Options:
    """The :class:`Options` of a parsed command line (argparse's, or pytest's ``config.option``
    with ``prefix``); the options only ``gpushare grade`` has are taken where present."""

    def get(name: str) -> object:
        return getattr(args, prefix + name, None)

    def text(name: str) -> str | None:
        value = get(name)
        return value if isinstance(value, str) else None

    step, seed, timeout = get("step"), get("seed"), get("timeout")
    try:
        steps = parse_steps(step) if isinstance(step, list) else set()
    except ValueError:
        steps = {0}
    workdir, snapshot = text("workdir"), text("snapshot")
    return Options(
        workdir=Path(workdir).expanduser() if workdir else None,
        kubeconfig=text("kubeconfig"),
        context=text("context"),
        cluster=text("cluster"),
        snapshot=Path(snapshot).expanduser() if snapshot else None,
        lang=text("lang"),
        seed=seed if isinstance(seed, int) else None,
        steps=steps,
        timeout=float(timeout) if isinstance(timeout, int | float) else None,
        unsafe_no_sandbox=bool(get("unsafe_no_sandbox")),
        policy=_policy(text("policy")),
    )


def _policy(path: str | None) -> Policy | None:
    """The ``--policy FILE`` of a command, loaded; OptionError (exit 2) when it cannot be."""
    if not path:
        return None
    try:
        return load_policy(Path(path).expanduser())
    except PolicyError as exc:
        raise OptionError(str(exc)) from None


def run_cli(args: argparse.Namespace) -> int:
    started = time.monotonic()
    if not args.snapshot:
        return _run_cli(args, started)
    # a stranger's file: its grade is bounded in memory and time
    if args.timeout is None:
        args.timeout = guard.SNAPSHOT_TIMEOUT
    what = f"the grade of {args.snapshot}"
    with guard.capped_memory(), guard.hard_deadline(args.timeout + guard.GRACE, what):
        return _run_cli(args, started)


def lab_points() -> dict[str, int]:
    """Every check of the lab and its grader's points (what a policy's points change)."""
    return {c.meta["number"]: c.meta["points"] for c in runner.load_checks(graders_dir())}


def _run_cli(args: argparse.Namespace, started: float) -> int:
    try:
        options = options_from(args)
        outcome = grade(options, started)
    except Exception as exc:
        # lazy: the snapshot module is 17 ms that a live grade never needs (see open_session)
        from gpushare.submissions.snapshot import SnapshotError

        if isinstance(exc, SnapshotError):
            return _error(f"bad snapshot: {exc}")
        if isinstance(exc, OptionError | GradeError):
            return _error(str(exc))
        if guard.out_of_memory(exc):
            return _error(f"could not grade: {guard.memory_message()}")
        raise
    outcome.write(args.json, args.junitxml)
    warning = total_warning(options.policy, lab_points()) if options.policy else None
    if warning:  # an instructor's policy re-weighted the checks: said where they grade with it
        print(warning, file=sys.stderr)
    report = outcome.report
    if report.could_not_grade and not report.timed_out:  # no score to show: one line
        return _error(f"could not grade ({_graded(report)}): {report.could_not_grade}")
    color = terminal.want_color(getattr(args, "color", "auto"))
    sys.stdout.write(terminal.render(report, color=color))
    if args.json:
        print(f"results.json: {args.json}")
    if args.junitxml:
        print(f"JUnit XML:    {args.junitxml}")
    if report.timed_out:
        return _error(f"could not finish: {report.could_not_grade}")
    return outcome.exit_status


def _graded(report: Report) -> str:
    c = report.cluster or {}
    if c.get("snapshot"):
        return f"snapshot {c['snapshot']}"
    return f"context {c.get('context') or '-'} of {c.get('kubeconfig')}, server {report.server}"
