"""``gpushare watch``: grade every step, then grade again each step whose reads changed.

A step is graded alone (``gpushare grade --step N``, in-process) and what its checks read is
kept (:class:`~gpushare.grading.grade.Outcome`'s cluster-read keys and work-dir paths), so an
event of the apiserver watch or of the work dir grades again only the steps that read what
changed, as a build tool rebuilds only what depends on a changed file; a step with background
work (the learner's script, sandboxed as in ``grade``) reads ``bin/`` too. Events are gathered
until :data:`QUIET` seconds pass without one (at most :data:`GATHER` after the first), so an
editor's save or a ``kubectl apply`` of five objects is one grade and one run, not ten.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gpushare.grading import background, runner
from gpushare.grading.errors import GradeError
from gpushare.grading.grade import OptionError, Options, grade
from gpushare.kube.config import resolve
from gpushare.lab import existing
from gpushare.locations import default_workdir, graders_dir
from gpushare.reports import messages, terminal
from gpushare.reports.clean import line
from gpushare.watch.cluster import ClusterWatch, Event
from gpushare.watch.files import FileWatch
from gpushare.watch.screen import Lines, Screen, StepView, View

QUIET = 0.25  # seconds without an event before grading what changed
GATHER = 1.0  # seconds at most between the first event and the grade
SCRIPT_FOLDER = "bin"
END_WAIT = 3.0  # seconds a Ctrl-C may take before the process simply ends


@dataclass(frozen=True)
class Reads:
    """What one step's checks read in its last grade."""

    keys: frozenset[str]
    files: frozenset[str]
    background: bool

    def hit(self, keys: set[str], files: set[str]) -> bool:
        """Whether a change to ``keys`` (cluster reads) or ``files`` (work-dir paths) may
        change this step's verdict."""
        if keys & self.keys:
            return True
        if keys and any(k.startswith("dry-run:") for k in self.keys):
            return True  # the apiserver's verdict on a file depends on what else exists
        for f in files:
            if f == "." or f in self.files or any(r.startswith(f + "/") for r in self.files):
                return True
            if self.background and (f == SCRIPT_FOLDER or f.startswith(SCRIPT_FOLDER + "/")):
                return True
        return False


class Watch:
    """The state of one ``gpushare watch``: each step's last grade and reads, and what the
    watchers said since the last grade (the changed reads and files; whether the apiserver
    answers)."""

    def __init__(
        self, options: Options, steps: list[int], background_steps: set[int], keys: set[str]
    ) -> None:
        self.options = options
        self.background_steps = background_steps
        self.keys = keys  # the declared cluster reads: an event of any other key is a file's
        self.reads: dict[int, Reads] = {}
        self.view = View(lang=options.lang or "en", steps={s: StepView(s) for s in steps})
        self.lost: set[str] = set()  # non-empty while the apiserver does not answer
        self.changed_keys: set[str] = set()
        self.changed_files: set[str] = {"."}  # the first look grades everything

    def due(self) -> list[int]:
        """The steps to grade again for what changed (then forgotten), the one the learner is
        on first."""
        keys, files = self.changed_keys, self.changed_files
        self.changed_keys, self.changed_files = set(), set()
        due = [
            s
            for s in sorted(self.view.steps)
            if s not in self.reads or self.reads[s].hit(keys, files)
        ]
        focus = self.view.focus()
        if focus is not None and focus.step in due:
            due.remove(focus.step)
            due.insert(0, focus.step)
        return due

    def grade(self, step: int) -> str | None:
        """Grade ``step`` alone; why it could not be, or None."""
        opts = Options(**{**self.options.__dict__, "steps": {step}})
        try:
            outcome = grade(opts)
        except (OptionError, GradeError) as exc:
            self.reads.pop(step, None)  # graded again at the next event
            return str(exc).removeprefix("gpushare: ")
        report = outcome.report
        if report.could_not_grade:  # the step keeps its last verdict: nothing was judged
            self.reads.pop(step, None)
            return report.reason_said()
        mine = [c for c in report.visible() if c.step == step]
        view = self.view.steps[step]
        view.score = sum(c.score for c in mine)
        view.max_score = sum(c.max_score for c in mine)
        view.ok = all(c.passed for c in mine)
        view.failed = [c for c in mine if not c.passed]
        for c in view.failed:  # said now, as the report says it (a pointer to a root included)
            c.output = report.said(c)
        self.reads[step] = Reads(
            outcome.read_keys, outcome.read_files, step in self.background_steps
        )
        return None

    def take(self, event: Event) -> None:
        view = self.view
        if event.kind == "lost":
            self.lost.add(event.key)
            view.banner, view.banner_bad = messages.label("watch_lost", view.lang), True
        elif event.kind == "back":
            self.lost.discard(event.key)
            if not self.lost:
                view.banner, view.banner_bad = messages.label("watch_back", view.lang), False
                self.changed_keys.update(self.keys)  # anything may have changed meanwhile
        elif event.key in self.keys:
            self.changed_keys.add(event.key)
        else:
            self.changed_files.add(event.key)

    def gather(self, events: queue.Queue[Event], out: Screen | Lines) -> None:
        """Take events until :data:`QUIET` passes without one (at most :data:`GATHER` after
        the first); a change of the banner is drawn at once."""
        first = last = time.monotonic()
        while True:
            pending = bool(self.changed_keys or self.changed_files)
            now = time.monotonic()
            wait = min(QUIET - (now - last), GATHER - (now - first)) if pending else 3600.0
            if wait <= 0:
                return
            try:
                event = events.get(timeout=wait)
            except queue.Empty:
                return
            if not pending:
                first = time.monotonic()
            last = time.monotonic()
            was = self.view.banner
            self.take(event)
            if self.view.banner != was:
                out.draw(self.view)

    def banner(self, problems: list[str], workdir: Path) -> None:
        """The line about the watch itself after a grade: the lost apiserver first (said by
        :meth:`take`), then a grade that could not be taken, then a missing work dir; else a
        bad line goes."""
        view = self.view
        if self.lost:
            return
        if problems:
            view.banner = messages.label("watch_could_not", view.lang).format(reason=problems[0])
            view.banner_bad = True
        elif not workdir.is_dir():
            view.banner = messages.label("watch_no_workdir", view.lang).format(
                workdir=line(str(workdir))
            )
            view.banner_bad = True
        elif view.banner_bad:
            view.banner, view.banner_bad = "", False


def run_cli(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir).expanduser() if args.workdir else default_workdir()
    checks = runner.load_checks(graders_dir())
    steps = sorted({c.meta["step"] for c in checks})
    paths: dict[str, str] = {}
    for module in runner.modules(checks):
        paths.update(getattr(module, "READS", None) or {})
        paths.update(getattr(module, "HINT_READS", None) or {})
    background_steps = {
        s for s in steps if runner.background([c for c in checks if c.meta["step"] == s])
    }
    options = Options(
        workdir=workdir,
        kubeconfig=args.kubeconfig,
        context=args.context,
        cluster=args.cluster,
        lang=args.lang,  # chosen by the command line (gpushare.cli.choose_lang)
        seed=background.new_seed(),  # one for the whole watch: the same cases each time
    )
    watch = Watch(options, steps, background_steps, set(paths))
    target = resolve(args.kubeconfig, args.context, args.cluster)
    if target.is_lab and target.cluster and not Path(target.kubeconfig).is_file():
        # a misspelt lab name: said at once, as grade says it, not watched for ever
        print(f"gpushare: {existing.not_up(target.cluster, 'watch')}", file=sys.stderr)
        return 2
    events: queue.Queue[Event] = queue.Queue()
    title = f"gpushare watch  {line(str(workdir))}"  # the work dir's end is cut first
    out: Screen | Lines
    if sys.stdout.isatty():
        out = Screen(sys.stdout, terminal.want_color("auto"), title)
    else:
        out = Lines(sys.stdout, title)
    cluster = ClusterWatch(target, paths, events).start()
    files = FileWatch(workdir, events).start()
    deadline = _EndDeadline(out)
    previous = signal.signal(signal.SIGINT, deadline.interrupted)
    try:
        _loop(watch, events, out, workdir)
    except KeyboardInterrupt:
        pass
    finally:
        out.close()
        cluster.close()
        files.close()
        deadline.timer.cancel()
        signal.signal(signal.SIGINT, previous)
    return 0


class _EndDeadline:
    """Ctrl-C ends the watch within :data:`END_WAIT` seconds, whatever it was doing.

    The interrupt unwinds the grade in flight (its sandbox ends the learner's runs), then the
    watchers close. Should any of that hang, a timer armed by the interrupt restores the
    terminal and ends the process: a learner's Ctrl-C is never left unanswered."""

    def __init__(self, out: Screen | Lines) -> None:
        self.out = out
        self.timer = threading.Timer(END_WAIT, self._end_now)
        self.timer.daemon = True

    def interrupted(self, _signum: int, _frame: object) -> None:
        if self.timer.ident is None:  # the first Ctrl-C arms it
            self.timer.start()
        raise KeyboardInterrupt

    def _end_now(self) -> None:
        with contextlib.suppress(Exception):
            self.out.close()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)


def _loop(watch: Watch, events: queue.Queue[Event], out: Screen | Lines, workdir: Path) -> None:
    """Gather what changed, grade the steps that read it, draw; until Ctrl-C."""
    while True:
        watch.gather(events, out)
        if watch.lost:
            continue  # nothing can be graded: the changes wait for the apiserver
        problems = []
        for step in watch.due():
            watch.view.grading = True
            out.draw(watch.view)
            problem = watch.grade(step)
            if problem is not None:
                problems.append(problem)
        while not events.empty():  # what happened meanwhile: a lost apiserver is the news
            watch.take(events.get_nowait())
        watch.banner(problems, workdir)
        watch.view.grading = False
        watch.view.updated = time.strftime("%H:%M:%S")
        out.draw(watch.view)
