"""docs/cli.md from the ``gpushare`` parser itself: every command's ``--help``, as it prints.

Written by ``make cli-docs`` (and ``make docs`` before the site is built); ``tests/test_docs.py``
fails when the file is not what this writes, so the reference cannot drift from the parser. The
help is formatted at a fixed width, so the file does not depend on the terminal it was made in.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

WIDTH = "100"
OUT = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
HEAD = """# CLI reference

Every command of `gpushare` and its options, as `gpushare COMMAND --help` prints them. This page
is written from the parser by `make cli-docs`; do not edit it by hand.
"""


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``(("class", "grade"), parser)`` for the top level and every subcommand, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def render() -> str:
    from gpushare.cli import build_parser

    # argparse wraps at the terminal's width: one width here, and only while rendering (a test
    # that calls this must not leave COLUMNS to every program it starts after)
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parts = [HEAD]
        for path, parser in commands(build_parser()):
            title = " ".join(("gpushare", *path))
            parts.append(f"## {title}\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    return "\n".join(parts)


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    out.write_text(render(), encoding="utf-8")
    print(f"wrote {out}")
