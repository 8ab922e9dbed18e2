"""``gpushare snapshot``: capture a learner's cluster and work dir into one hashed file.

Capture reads through a grade's own session and connect (the same kubeconfig precedence, reads
and dry-runs), so a snapshot holds every answer a later grade needs, and grading it gives the
verdicts a live grade gave at that moment. Read-only, like grading.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gpushare.grading import runner
from gpushare.grading.errors import GradeError
from gpushare.grading.grade import Options, open_session
from gpushare.locations import default_workdir, graders_dir
from gpushare.submissions import snapshot


def take(
    workdir: Path,
    *,
    kubeconfig: str | None = None,
    cluster: str | None = None,
    context: str | None = None,
    learner: str | None = None,
    out: Path | None = None,
) -> Path:
    """Capture and write; GradeError (one line) when the cluster cannot be read."""
    options = Options(
        workdir=workdir, kubeconfig=kubeconfig, cluster=cluster, context=context, lang="en", seed=0
    )
    with open_session(options) as session:  # the session a grade gets, the same reads
        session.doing = "capture"
        state = session.connect(runner.modules(runner.load_checks(graders_dir())))
        problem = state.wait_all()
        if problem is not None:
            raise GradeError(f"gpushare: could not capture the cluster: {problem}")
        captured = snapshot.build(
            learner=learner or snapshot.default_learner(),
            cluster=state.export(),
            identity=session.graded() or {},
            workdir=workdir,
            runtime=snapshot.learner_runtime(),
        )
    return snapshot.write(captured, out)


def run_cli(args: argparse.Namespace) -> int:
    started = time.monotonic()
    workdir = Path(args.workdir).expanduser() if args.workdir else default_workdir()
    try:
        path = take(
            workdir,
            kubeconfig=args.kubeconfig,
            cluster=args.cluster,
            context=args.context,
            learner=args.learner,
            out=Path(args.out).expanduser() if args.out else None,
        )
    except (GradeError, snapshot.SnapshotError) as exc:
        msg = str(exc)
        print(msg if msg.startswith("gpushare:") else f"gpushare: {msg}", file=sys.stderr)
        return 2
    print(path)
    print(f"captured in {time.monotonic() - started:.2f}s", file=sys.stderr)
    return 0
