"""The command's front: ``gpushare --version`` says the installed version, and every --help
text is plain text (an operator tags an image with the first, a reader reads the second)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version

import gpushare
from gpushare.cli import build_parser


def test_version_is_the_installed_distributions():
    done = subprocess.run(
        [sys.executable, "-m", "gpushare", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout == f"gpushare {version('gpushare')}\n" and done.stderr == ""
    assert version("gpushare") == gpushare.__version__  # pyproject.toml and the source agree


def _texts(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str]]:
    """Every description and help of the parser and its subcommands, with where it is."""
    if parser.description:
        yield path, parser.description
    for action in parser._actions:
        if action.help:
            yield f"{path} {'/'.join(action.option_strings) or action.dest}", action.help
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield f"{path} {choice.dest}", choice.help or ""
            for name, sub in action.choices.items():
                yield from _texts(sub, f"{path} {name}")


def test_every_help_text_is_plain_text():
    texts = list(_texts(build_parser(), "gpushare"))
    assert len(texts) > 100  # the walk reaches the subcommands' options
    marked = [(where, said) for where, said in texts if "`" in said or ":func:" in said]
    assert marked == []
    top = build_parser().format_help()
    assert "The gpushare command" in top and "--version" in top
