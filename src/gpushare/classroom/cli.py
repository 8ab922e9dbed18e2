"""``gpushare class ...``: each subcommand to its module.

Each is imported when its subcommand runs (the one lazy import of the room's commands): ``class
merge`` needs neither the grade nor the sandbox that ``batch`` brings.
"""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    if args.class_command == "grade":
        from gpushare.classroom import batch  # lazy: see above

        return batch.run_cli(args)
    from gpushare.classroom import merge  # lazy: see above

    return merge.run_cli(args)
