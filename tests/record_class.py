"""Record a class of 47 graded by ``gpushare class grade``: the LMS export tests' input.

``python -m tests.record_class`` lays out a class of 47 learners from the recorded lab states
(``tests/recorded``: every state a real lab was put in, one learner each), grades it with the
real ``gpushare class grade`` (in the sandbox where it can run), and keeps what an export reads,
``grades.csv``, ``class.json`` and every ``<learner>/results.json``, in
``tests/data/class-47.tgz``. Grading 47 snapshots takes a minute of both cores; the export
tests read the recorded folder in a fraction of a second. ``make record`` runs it after the states.

The class, as an instructor's folder holds it:

- 43 learners with a folder each (``PATH/<learner>/<file>``), whose names carry what a
  gradebook must survive: commas, double quotes, an apostrophe, Chinese, Korean and Japanese
  names, accents, and names a spreadsheet would run as formulas;
- two files of a Canvas bulk download at the top (``<sortable name>_<user id>_<submission id>_
  <file>``): ``class grade`` names those learners ``<sortable name>_<user id>``;
- a second learner with the reference solution, and one whose upload was cut short (an error
  row: no grade).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from gpushare.sandbox import isolation
from tests.class_snapshots import truncate
from tests.helpers import ROOT

RECORDED = ROOT / "tests" / "recorded"
OUT = ROOT / "tests" / "data" / "class-47.tgz"
# the folder learners, in the order of the recorded states they get (sorted file names)
FOLDERS = (
    "Doe, Jane",
    'Ann "Nan" Li',
    "O'Brien",
    "张伟",
    "李娜",
    "王芳, 助教组",
    "김민준",
    "이서연",
    "山田花子",
    "José Núñez",
    "zoë",
    "=1+2",
    "+cmd",
    "@SUM(A1)",
    "-rm",
    *(f"learner{n:02d}" for n in range(15, 43)),
)
CANVAS_FILES = ("smithjohn_4242_900001", "leeminho_4343_900002")  # + "_<file name>"
REFERENCE_TWIN = "reference twin"
CUT_SHORT = "cut short"


def layout(into: Path) -> None:
    """The class folder: 45 recorded states, a second reference, a cut-short upload."""
    states = sorted(RECORDED.glob("*.gpushare.tgz"))
    assert len(states) == len(FOLDERS) + len(CANVAS_FILES), len(states)
    for learner, state in zip(FOLDERS, states, strict=False):
        (into / learner).mkdir(parents=True)
        shutil.copy2(state, into / learner / state.name)
    for prefix, state in zip(CANVAS_FILES, states[len(FOLDERS) :], strict=True):
        shutil.copy2(state, into / f"{prefix}_{state.name}")
    reference = RECORDED / "reference.gpushare.tgz"
    for learner in (REFERENCE_TWIN, CUT_SHORT):
        (into / learner).mkdir()
        shutil.copy2(reference, into / learner / reference.name)
    truncate(into / CUT_SHORT / reference.name)


def record(jobs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="gpushare-record-class-") as tmp:
        snaps, out = Path(tmp) / "snapshots", Path(tmp) / "class"
        layout(snaps)
        unsafe = [] if isolation.probe().available else ["--unsafe-no-sandbox"]
        cmd = [sys.executable, "-m", "gpushare", "class", "grade", str(snaps), "--out", str(out)]
        subprocess.run([*cmd, "--lang", "en", "--jobs", str(jobs), *unsafe], check=True, cwd=ROOT)
        kept = [
            "grades.csv",
            "class.json",
            *sorted(p.relative_to(out).as_posix() for p in out.glob("*/results.json")),
        ]
        assert len(kept) == 2 + 47, len(kept)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(OUT, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            for name in kept:
                info = tar.gettarinfo(out / name, arcname=name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                with (out / name).open("rb") as fh:
                    tar.addfile(info, fh)
    print(f"wrote {OUT.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="grading processes (default 2)")
    record(parser.parse_args().jobs)


if __name__ == "__main__":
    main()
