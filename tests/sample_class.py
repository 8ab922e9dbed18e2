"""The sample class of ``examples/class/``: eight learners, each on a lab of their own.

``python -m tests.sample_class`` plays each learner's work the way a learner does it, on a
kwok lab of that learner's own (a cluster of their own, so no two share a uid): the lab's
files in the learner's own words, applied with kubectl by the reference procedure
(``solutions/solve.sh`` on a copy of the solution written their way), then the learner's
mistakes (a file edited, or the lab changed with kubectl: :mod:`tests.mutants`), then
``gpushare snapshot``. It writes ``examples/class/<learner>/<snapshot>`` and
``examples/class/README.md`` (who made which mistake, the deadline of the dry run).

The class has what an instructor meets: learners with different mistakes (one with none),
one who wrote the lab another correct way, one who copied a classmate's work dir and edited
one file before applying it on their own lab (the copy pair), one captured after the
deadline, and one whose upload was cut short. :func:`expected` says what each row must score
and which checks fail; ``tests/test_class.py`` grades the class and checks its rows and flags.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gpushare.lab import cluster, solve
from gpushare.locations import solutions_dir
from gpushare.submissions import snapshot
from tests import class_snapshots
from tests.helpers import ROOT
from tests.mutants import CLUSTER_MUTANTS, FILE_MUTANTS, Mutant, _alternative_solutions

CLASS = ROOT / "examples" / "class"


@dataclass(frozen=True)
class Learner:
    """One learner of the sample class: their id, their mistakes (mutant ids), and what else
    sets them apart."""

    name: str
    mistakes: tuple[str, ...] = ()
    other_way: bool = False  # the lab's files written the other correct ways (tests.mutants)
    copies: str = ""  # the classmate whose work dir they copied (then edited one file)
    late: bool = False  # captured after the deadline
    corrupt: bool = False  # the upload was cut short
    what: str = ""  # the README's line


LEARNERS = (
    Learner("ada", what="every check passed"),
    Learner(
        "bao",
        ("5.5 denial paraphrased",),
        other_way=True,
        what="the lab written another correct way; the quota's denial paraphrased",
    ),
    Learner("chen", ("2.4 forgot to multiply (2 on lab-node-1)",), what="forgot to multiply"),
    Learner("dana", ("6.2 script reads only requests",), what="a script that reads requests only"),
    Learner(
        "emre",
        copies="ada",
        what="copied ada's work dir, edited one file, applied it on his own lab",
    ),
    Learner(
        "farah",
        ("3.1 MIG strategy single",),
        late=True,
        what="captured after the deadline; the MIG strategy single",
    ),
    Learner("gus", corrupt=True, what="the upload was cut short (an error row)"),
    Learner(
        "hana",
        (
            "7.3 MPS memory isolation taken for full",
            "8.3 placement.txt guessed (two nodes swapped)",
        ),
        what="two mistakes in steps 7 and 8",
    ),
)


def mutant(ident: str) -> Mutant:
    return next(m for m in (*FILE_MUTANTS, *CLUSTER_MUTANTS) if m.id == ident)


def expected(learner: Learner) -> set[str]:
    """The checks that fail for ``learner`` (the copy's are its source's)."""
    source = next((x for x in LEARNERS if x.name == learner.copies), learner)
    return set().union(*(mutant(m).fails for m in source.mistakes))


def _own_words(solutions: Path, name: str) -> None:
    """The lab's files as this learner wrote them: a line of their own at the top of each."""
    for path in sorted((solutions / "workdir").rglob("*")):
        if path.is_file() and path.suffix in (".yaml", ".sh"):
            text = path.read_text()
            head, sep, rest = text.partition("\n") if text.startswith("#!") else ("", "", text)
            path.write_text(f"{head}{sep}# {name}, GPU sharing lab\n{rest}")


def _solutions(learner: Learner, tmp: Path, made: dict[str, Path]) -> Path:
    """The reference procedure with this learner's files."""
    dest = tmp / f"solutions-{learner.name}"
    if learner.copies:  # the classmate's files, one of them edited before applying them
        shutil.copytree(made[learner.copies], dest)
        quota = dest / "workdir" / "k8s" / "gpu-quota.yaml"
        quota.write_text(quota.read_text().replace("name: gpu-quota", "name: gpu-quota  # mine"))
    elif learner.other_way:
        _alternative_solutions(dest)
        _own_words(dest, learner.name)
    else:
        shutil.copytree(solutions_dir(), dest)
        _own_words(dest, learner.name)
    made[learner.name] = dest
    return dest


def play(learner: Learner, lab_name: str, tmp: Path, made: dict[str, Path], out: Path) -> Path:
    """``learner``'s lab, work and snapshot; the lab is deleted afterwards."""
    lab = cluster.up(lab_name)
    try:
        work = tmp / f"work-{learner.name}"
        solve.solve(
            work,
            kubeconfig=str(lab.kubeconfig),
            solutions=_solutions(learner, tmp, made),
        )
        for ident in learner.mistakes:
            m = mutant(ident)
            if m.files is not None:
                m.files(work)
            if m.cluster is not None:
                m.cluster(lab, work)
        folder = out / learner.name
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(  # what the learner runs: `gpushare snapshot`
            [
                *(sys.executable, "-m", "gpushare", "snapshot", "--workdir", str(work)),
                *("--kubeconfig", str(lab.kubeconfig), "--learner", learner.name),
                *("--out", str(folder)),
            ],
            check=True,
            cwd=ROOT,
            timeout=300,
        )
        (path,) = folder.glob(f"*{snapshot.SUFFIX}")
        if learner.corrupt:
            class_snapshots.truncate(path)
        return path
    finally:
        cluster.down(lab_name)


def record(prefix: str, out: Path) -> str:
    """Play the whole class into ``out``; return the deadline of the dry run."""
    with tempfile.TemporaryDirectory(prefix="gpushare-sample-") as tmp_name:
        tmp = Path(tmp_name)
        made: dict[str, Path] = {}
        staged = tmp / "class"
        on_time = [x for x in LEARNERS if not x.late]
        for n, learner in enumerate(on_time):
            play(learner, f"{prefix}-{n}", tmp, made, staged)
            print(f"recorded {learner.name}", file=sys.stderr)
        class_snapshots.wait_next_second()
        deadline = time.strftime(snapshot.TIME_FORMAT, time.gmtime())
        time.sleep(2)
        for n, learner in enumerate(x for x in LEARNERS if x.late):
            play(learner, f"{prefix}-late-{n}", tmp, made, staged)
            print(f"recorded {learner.name} (late)", file=sys.stderr)
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(staged, out)
    (out / "README.md").write_text(readme(deadline))
    return deadline


def readme(deadline: str) -> str:
    lines = [
        "# A sample class",
        "",
        "Eight learners' snapshots, each captured by `gpushare snapshot` from a kwok lab of",
        "the learner's own, after playing their work with kubectl (`python -m",
        "tests.sample_class` makes them again). A dry run:",
        "",
        f"    gpushare class grade examples/class --deadline {deadline} \\",
        "        --out /tmp/sample-class --lang en",
        "",
        "| learner | what they did |",
        "|---|---|",
        *(f"| {x.name} | {x.what} |" for x in LEARNERS),
        "",
        "The flags it must show: ada and emre in one `same_files` group (emre's files are",
        "ada's, one edited), farah `after_deadline`; gus is an error row. No other flag: each",
        "learner's cluster is their own.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default=f"gpushare-sample-{os.getpid()}")
    parser.add_argument("--out", default=str(CLASS))
    args = parser.parse_args()
    deadline = record(args.cluster, Path(args.out))
    print(f"{len(LEARNERS)} learners in {args.out}, deadline {deadline}", file=sys.stderr)


if __name__ == "__main__":
    main()
