"""``gpushare grade``: run the graders, print the learner's summary, write JSON and JUnit XML.

The check functions are those of ``graders/``, called by :mod:`gpushare.runner` with the same
inputs and feedback as under ``pytest graders/`` (see :mod:`gpushare.session`), so both entry
points give the same checks and the same score. pytest is not imported here: its start-up
and collection would be most of a one-second grade.
Exit status: 0 every check passed, 1 some failed, 2 could not grade.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


def graders_dir() -> Path:
    env = os.environ.get("GPUSHARE_GRADERS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "graders"


def _error(msg: str) -> int:
    print(msg if msg.startswith("gpushare:") else f"gpushare: {msg}", file=sys.stderr)
    return EXIT_ERROR


def run_cli(args: argparse.Namespace) -> int:
    from gpushare import messages
    from gpushare.session import GradeError, GradeSession
    from gpushare.workdir import default_workdir

    try:
        lang = messages.resolve_lang(args.lang)  # --lang, else GPUSHARE_LANG, else the locale
    except ValueError as exc:
        return _error(str(exc))
    try:
        steps = {int(s) for s in args.step or []}
    except ValueError:
        steps = {0}
    if not steps <= set(range(1, 9)):
        return _error("--step takes step numbers 1 to 8")
    if not graders_dir().is_dir():
        return _error(f"graders not found at {graders_dir()}")
    session = GradeSession(
        workdir=Path(args.workdir).expanduser() if args.workdir else default_workdir(),
        kubeconfig=args.kubeconfig,
        cluster=args.cluster,
        lang=lang,
        seed=args.seed,
    )
    try:
        if not steps or 6 in steps:
            session.start_runs()  # first: the learner's runs overlap everything below
        from gpushare import runner

        checks = runner.load_checks(graders_dir(), steps or None)
        session.connect()
        durations = runner.run(session, checks)
    except GradeError as exc:
        return _error(str(exc))
    finally:
        session.close()
    report = session.report()
    _write_outputs(args, report, checks, durations, session)
    from gpushare import terminal

    color = terminal.want_color(getattr(args, "color", "auto"))
    sys.stdout.write(terminal.render(report, color=color))
    if args.json:
        print(f"results.json: {args.json}")
    if args.junitxml:
        print(f"JUnit XML:    {args.junitxml}")
    return EXIT_OK if report.all_passed else EXIT_FAILED


def _write_outputs(args, report, checks, durations, session) -> None:  # type: ignore[no-untyped-def]
    if args.json:
        report.write_json(Path(args.json))
    if args.junitxml:
        from gpushare import junit

        junit.write(
            report,
            Path(args.junitxml),
            classnames={c.nodeid: c.classname for c in checks},
            durations=durations,
            headline={c.meta["number"]: session.headline(c.meta["number"]) for c in checks},
        )
