"""``gpushare class ...``: each subcommand to its module.

Each is imported when its subcommand runs (the one lazy import of the room's commands): ``class
merge`` needs neither the grade nor the sandbox that ``batch`` brings.
"""

from __future__ import annotations

import argparse

LANG_HELP = (
    "language of feedback and report (default: $GPUSHARE_LANG, else the locale's, else English)"
)


def add_grade_options(
    q: argparse.ArgumentParser, lang_help: str = LANG_HELP, jobs_default: str = "the cores"
) -> None:
    """The options every submission of ``class grade`` is graded with, declared once: for
    ``gpushare class grade`` and for the Kubernetes procedure that passes them on to each pod
    (``deploy/job.py``, whose defaults differ: ``lang_help``, ``jobs_default``)."""
    q.add_argument(
        "--seed",
        type=int,
        default=0,
        help="base seed of the unseen cases, mixed with each snapshot's hash (default 0)",
    )
    q.add_argument("--lang", help=lang_help)
    q.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="time limit of one submission's grade (default 60)",
    )
    q.add_argument(
        "--jobs", type=int, metavar="N", help=f"grading processes (default: {jobs_default})"
    )
    q.add_argument(
        "--all", action="store_true", help="every snapshot, not only each learner's latest"
    )
    q.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run learners' scripts without bubblewrap (only for trusted work)",
    )


def run(args: argparse.Namespace) -> int:
    if args.class_command == "grade":
        from gpushare.classroom import batch  # lazy: see above

        return batch.run_cli(args)
    from gpushare.classroom import merge  # lazy: see above

    return merge.run_cli(args)
