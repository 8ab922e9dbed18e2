"""``gpushare submit`` (``make submit``): the learner's hand-in, one snapshot file in the work dir.

The learner id names the file. In the lab pod every learner is ``root``, so the user name is
never the default: ``--learner``, else ``$GPUSHARE_LEARNER`` (a lab pod may set it), else the id
given last time, else the learner is asked once on the terminal (the answer kept). The file
goes into the work dir, which the learner can see and download, not into the checkout.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from gpushare.grading.errors import GradeError
from gpushare.locations import default_workdir
from gpushare.reports import messages
from gpushare.submissions import snapshot


class NoLearner(Exception):
    """No learner id given, and no terminal to ask on."""


def learner_id(option: str | None, ask: Callable[[], str] | None, store: Path | None = None) -> str:
    """The learner id, by the rule of this module's docstring; ``ask`` (None: no terminal)
    prompts for it, the answer kept in ``store`` (``$XDG_CONFIG_HOME/gpushare/learner``).
    NoLearner when there is none to be had."""
    if store is None:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        store = Path(base) / "gpushare" / "learner"
    for value in (option, os.environ.get("GPUSHARE_LEARNER")):
        if value and value.strip():
            return value.strip()
    try:
        kept = store.read_text(encoding="utf-8").strip()
    except OSError:
        kept = ""
    if kept:
        return kept
    answer = ask().strip() if ask is not None else ""
    if not answer:
        raise NoLearner(
            "no learner id: pass --learner ID (make submit LEARNER=ID) or set GPUSHARE_LEARNER"
        )
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(answer + "\n", encoding="utf-8")
    except OSError:  # not kept: asked again next time, nothing lost
        pass
    return answer


def run_cli(args: argparse.Namespace) -> int:
    from gpushare.grading import capture  # the cluster read; after the id, which may be asked

    lang = args.lang  # chosen by the command line (gpushare.cli.choose_lang)
    workdir = Path(args.workdir).expanduser() if args.workdir else default_workdir()

    def ask() -> str:
        sys.stderr.write(messages.render_value(messages.T("submit_ask"), lang))
        sys.stderr.flush()
        return sys.stdin.readline()

    try:
        if not workdir.is_dir():
            raise GradeError(
                f"gpushare: the work directory {workdir} does not exist; name yours with "
                "--workdir DIR (make submit WORKDIR=DIR)"
            )
        learner = learner_id(args.learner, ask if sys.stdin.isatty() else None)
        path = capture.take(
            workdir,
            kubeconfig=args.kubeconfig,
            cluster=args.cluster,
            context=args.context,
            learner=learner,
            out=Path(args.out).expanduser() if args.out else workdir,
        )
    except (NoLearner, GradeError, snapshot.SnapshotError) as exc:
        msg = str(exc)
        print(msg if msg.startswith("gpushare:") else f"gpushare: {msg}", file=sys.stderr)
        return 2
    print(messages.render_value(messages.T("submit_written", path=str(path)), lang))
    return 0
