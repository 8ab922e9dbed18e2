"""``gpushare grade``: run the graders, print the learner's summary, write JSON and JUnit XML.

The check functions are those of ``graders/``, called by :mod:`gpushare.runner` with the same
inputs and feedback as under ``pytest graders/`` (see :mod:`gpushare.session`), so both entry
points give the same checks and the same score. pytest is not imported here: its start-up
and collection would be most of a one-second grade.
Exit status: 0 every check passed, 1 some failed, 2 could not grade.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


def _error(msg: str) -> int:
    print(msg if msg.startswith("gpushare:") else f"gpushare: {msg}", file=sys.stderr)
    return EXIT_ERROR


def run_cli(args: argparse.Namespace) -> int:
    """Grade; the learner's script runs start before anything heavy is even imported.

    Those runs are most of a grade's time and CPU; started first, they overlap our imports,
    the cluster read and every other check. Options are checked before anything starts.
    """
    started = time.monotonic()
    from gpushare.locations import default_fixtures, default_workdir, graders_dir

    try:
        steps = {int(s) for s in args.step or []}
    except ValueError:
        steps = {0}
    if not steps <= set(range(1, 9)):
        return _error("--step takes step numbers 1 to 8")
    if not graders_dir().is_dir():
        return _error(f"graders not found at {graders_dir()}")
    from gpushare import messages

    try:
        lang = messages.resolve_lang(args.lang)  # --lang, else GPUSHARE_LANG, else the locale
    except ValueError as exc:
        return _error(str(exc))
    from gpushare.requestruns import RequestRuns, new_seed

    workdir = Path(args.workdir).expanduser() if args.workdir else default_workdir()
    seed = args.seed if args.seed is not None else new_seed()
    fixtures = default_fixtures()
    if (not steps or 6 in steps) and not (fixtures / "check-request").is_dir():
        return _error(f"the sample manifests of step 6 are not at {fixtures / 'check-request'}")
    runs = None
    try:
        if not steps or 6 in steps:
            runs = RequestRuns.start(workdir, fixtures, seed)
        from gpushare import runner
        from gpushare.session import GradeError, GradeSession

        session = GradeSession(
            workdir=workdir,
            kubeconfig=args.kubeconfig,
            cluster=args.cluster,
            lang=lang,
            seed=seed,
            fixtures=fixtures,
            runs=runs,
            started=started,
        )
    except BaseException:
        if runs is not None:
            runs.close()
        raise
    try:
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
