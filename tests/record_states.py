"""Record lab states as snapshot files: the fast test tier's inputs and the demo's examples.

``python -m tests.record_states`` (``make record``) plays every state the full tier grades on
a real lab of its own, the fresh lab, the reference solution, every mutant of
:mod:`tests.mutants` and the valid alternatives, and captures each one with ``gpushare
snapshot``, as a learner's ``make submit`` would. It writes ``tests/recorded/<id>.gpushare.tgz``
with ``tests/recorded/index.json`` (what each state must score), and the two examples of
``make demo`` in ``examples/``. Run it again whenever the snapshot format or a grader's reads
change: the fast tier refuses recordings of another format. ``--only MUTANT`` (repeatable,
the mutant's id or the slug its file is named by) records just those mutants' states and
adds them to the index, keeping every other recording as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from gpushare.grading import capture
from gpushare.lab import cluster
from tests.helpers import ROOT, LabState
from tests.mutants import (
    CLUSTER_MUTANTS,
    FILE_MUTANTS,
    HOSTILE_FILE_FAILS,
    break_files,
    play_alternatives,
)

RECORDED = ROOT / "tests" / "recorded"
EXAMPLES = ROOT / "examples"
# the demo's learner: mistakes a learner who half-read the lab makes, one per step or so
DEMO_MISTAKES = (
    "1.2 file drifted from the cluster (replicas 2 in the file)",
    "6.5 script reads only the first YAML document",
    "7.3 MPS memory isolation taken for full",
    "8.3 placement.txt guessed (two nodes swapped)",
)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def _take(lab: cluster.Lab, workdir: Path, learner: str, out: Path) -> Path:
    return capture.take(workdir, kubeconfig=str(lab.kubeconfig), learner=learner, out=out)


def record(name: str, only: set[str] | None = None) -> None:
    if only:
        return record_only(name, only)
    lab = cluster.up(name)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        state = LabState(lab, tmp / "solved")
        states: list[tuple[str, Path, set[str], str]] = []  # id, snapshot, fails, what

        def keep(ident: str, workdir: Path, fails: set[str], what: str) -> None:
            path = _take(lab, workdir, ident, tmp / "out")
            states.append((ident, path, fails, what))
            print(f"recorded {ident}: {len(fails)} checks must fail", file=sys.stderr)

        state.fresh()
        empty = tmp / "empty"
        empty.mkdir()
        keep("fresh-lab", empty, {"*"}, "a fresh lab and an empty work dir")
        keep("reference", state.solve(), set(), "the reference solution")
        for mutant in FILE_MUTANTS:
            work = tmp / f"w-{slug(mutant.id)}"
            shutil.copytree(state.solve(), work, symlinks=True)
            mutant.files(work)  # type: ignore[misc]
            keep(slug(mutant.id), work, set(mutant.fails), mutant.id)
        for mutant in CLUSTER_MUTANTS:
            work = tmp / f"w-{slug(mutant.id)}"
            shutil.copytree(state.solve(), work, symlinks=True)
            state.dirty()
            mutant.cluster(lab, work)  # type: ignore[misc]
            keep(slug(mutant.id), work, set(mutant.fails), mutant.id)
        keep("valid-alternatives", play_alternatives(lab, state, tmp), set(), "valid variants")
        hostile = tmp / "w-hostile-files"
        shutil.copytree(state.solve(), hostile, symlinks=True)
        break_files(hostile)
        keep("hostile-files", hostile, set(HOSTILE_FILE_FAILS), "binary, FIFO, links out...")
        demo = tmp / "demo"
        shutil.copytree(state.solve(), demo, symlinks=True)
        chosen = [m for m in FILE_MUTANTS if m.id in DEMO_MISTAKES]
        for mutant in chosen:
            mutant.files(demo)  # type: ignore[misc]
        demo_fails = set().union(*(m.fails for m in chosen))
        keep("demo-mistakes", demo, demo_fails, "the demo: " + "; ".join(DEMO_MISTAKES))

        if RECORDED.exists():
            shutil.rmtree(RECORDED)
        RECORDED.mkdir(parents=True)
        EXAMPLES.mkdir(exist_ok=True)
        index = {}
        for ident, path, fails, what in states:
            if ident == "demo-mistakes":
                shutil.copy(path, EXAMPLES / "mistakes.gpushare.tgz")
                continue
            shutil.copy(path, RECORDED / f"{ident}.gpushare.tgz")
            index[ident] = {"fails": sorted(fails), "what": what}
            if ident == "reference":
                shutil.copy(path, EXAMPLES / "reference.gpushare.tgz")
        (RECORDED / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
        print(f"{len(index)} states in {RECORDED}, 2 examples in {EXAMPLES}", file=sys.stderr)


def record_only(name: str, only: set[str]) -> None:
    """The states of the mutants ``only`` names, written beside the recordings there are."""
    chosen = [m for m in FILE_MUTANTS + CLUSTER_MUTANTS if m.id in only or slug(m.id) in only]
    unknown = only - {m.id for m in chosen} - {slug(m.id) for m in chosen}
    if unknown:
        raise SystemExit(f"no such mutant: {', '.join(sorted(unknown))}")
    lab = cluster.up(name)
    index = json.loads((RECORDED / "index.json").read_text())
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        state = LabState(lab, tmp / "solved")
        state.fresh()
        for mutant in chosen:
            work = tmp / f"w-{slug(mutant.id)}"
            shutil.copytree(state.solve(), work, symlinks=True)
            if mutant.files is not None:
                mutant.files(work)
            if mutant.cluster is not None:
                state.dirty()
                mutant.cluster(lab, work)
            path = _take(lab, work, slug(mutant.id), tmp / "out")
            shutil.copy(path, RECORDED / f"{slug(mutant.id)}.gpushare.tgz")
            index[slug(mutant.id)] = {"fails": sorted(mutant.fails), "what": mutant.id}
            print(
                f"recorded {slug(mutant.id)}: {len(mutant.fails)} checks must fail", file=sys.stderr
            )
    (RECORDED / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default=f"gpushare-record-{os.getpid()}")
    parser.add_argument("--keep", action="store_true", help="keep the lab afterwards")
    parser.add_argument(
        "--only", action="append", metavar="MUTANT", help="record just this mutant's state"
    )
    args = parser.parse_args()
    try:
        record(args.cluster, set(args.only) if args.only else None)
    finally:
        if not args.keep:
            cluster.down(args.cluster)


if __name__ == "__main__":
    main()
