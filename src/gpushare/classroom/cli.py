"""``gpushare class ...``: each subcommand to its module."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    if args.class_command == "grade":
        from gpushare.classroom import batch

        return batch.run_cli(args)
    if args.class_command == "job":
        from gpushare.classroom import job

        return job.run_cli(args)
    from gpushare.classroom import merge

    return merge.run_cli(args)
