"""``gpushare grade``: the graders run through pytest, then the learner's summary.

Grading always goes through ``pytest graders/`` with our plugin, so ``gpushare grade`` and an
instructor's ``pytest graders/`` see the same checks and the same score by construction. Here
pytest's own terminal output is silenced; the learner sees the step table and the feedback.
Exit status: 0 every check passed, 1 some failed, 2 could not grade.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


def graders_dir() -> Path:
    env = os.environ.get("GPUSHARE_GRADERS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "graders"


class _Capture:
    """A pytest plugin object that keeps the grading session for us after pytest.main."""

    def __init__(self) -> None:
        self.session: Any = None

    def pytest_sessionfinish(self, session: Any) -> None:
        from gpushare.plugin import GRADE_KEY

        self.session = session.config.stash.get(GRADE_KEY, None)


def pytest_args(args: argparse.Namespace) -> list[str]:
    """The pytest command line equivalent to ``gpushare grade`` with these options."""
    out = [str(graders_dir()), "-p", "no:cacheprovider", "-o", "junit_family=xunit2"]
    for opt in ("workdir", "kubeconfig", "cluster", "lang"):
        value = getattr(args, opt, None)
        if value:
            out += [f"--{opt}", str(value)]
    if getattr(args, "json", None):
        out += ["--json", args.json]
    if getattr(args, "junitxml", None):
        out += ["--junitxml", args.junitxml]
    if getattr(args, "seed", None) is not None:
        out += ["--seed", str(args.seed)]
    steps = getattr(args, "step", None)
    if steps:
        out += ["-k", " or ".join(f"test_{int(s)}_" for s in steps)]
    return out


class _Prestarted:
    """Hands the already running check-request.sh runs to the plugin (see run_cli)."""

    def __init__(self, runs: Any) -> None:
        self.gpushare_runs = runs


def _prestart_runs(args: argparse.Namespace) -> Any:
    """Start the learner script's runs before pytest is even imported.

    They are the longest part of a grade (nine runs of a learner's program); started first,
    they overlap pytest's import and collection and the cluster read. The seed is fixed here
    and handed to pytest, so the results record the seed the runs really used.
    """
    import secrets

    from gpushare.requestruns import RequestRuns
    from gpushare.workdir import default_workdir

    if args.step and "6" not in [str(s) for s in args.step]:
        return None
    if args.seed is None:
        args.seed = secrets.randbelow(2**31)
    workdir = Path(args.workdir).expanduser() if args.workdir else default_workdir()
    fixtures = Path(os.environ.get("GPUSHARE_FIXTURES") or graders_dir().parent / "fixtures")
    try:
        return RequestRuns.start(workdir, fixtures, args.seed)
    except OSError:
        return None  # the plugin starts them itself and reports what is wrong


def run_cli(args: argparse.Namespace) -> int:
    runs = _prestart_runs(args)
    import pytest

    from gpushare import terminal

    if not graders_dir().is_dir():
        print(f"gpushare: graders not found at {graders_dir()}", file=sys.stderr)
        return EXIT_ERROR
    try:
        argv = pytest_args(args)
    except ValueError:
        print("gpushare: --step takes step numbers 1 to 8", file=sys.stderr)
        return EXIT_ERROR
    capture = _Capture()
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        # --assert=plain: checks report through CheckFailed, not assert; rewriting the
        # graders' asserts would only cost start-up time.
        quiet = ["-qq", "--no-header", "--tb=no", "-p", "no:warnings", "--assert=plain"]
        plugins: list[Any] = [capture] + ([_Prestarted(runs)] if runs is not None else [])
        rc = pytest.main([*argv, *quiet], plugins=plugins)
    gs = capture.session
    if rc not in (0, 1) or gs is None or not gs.active:
        text = sink.getvalue().strip().splitlines()
        line = next((ln for ln in reversed(text) if "gpushare:" in ln), None)
        print(
            line.split("Exit: ", 1)[-1]
            if line
            else f"gpushare: could not grade (pytest exit {int(rc)}):\n" + "\n".join(text[-15:]),
            file=sys.stderr,
        )
        return EXIT_ERROR
    report = gs.report()
    color = terminal.want_color(getattr(args, "color", "auto"))
    sys.stdout.write(terminal.render(report, color=color))
    if getattr(args, "json", None):
        print(f"results.json: {args.json}")
    if getattr(args, "junitxml", None):
        print(f"JUnit XML:    {args.junitxml}")
    return EXIT_OK if report.all_passed else EXIT_FAILED
