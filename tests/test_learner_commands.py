"""The learner's `make grade`, in the checkout and in the work dir: only the grade, no make error.

A grade that is not perfect exits 1, which make would report as `make: *** [grade] Error 1`
after the feedback, as if the grader had crashed; the targets treat it as the grade it is. A
grade that could not be taken (exit 2) still fails make. learner/Makefile is the same target
for the work dir itself: it grades the folder it is in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from gpushare.reports import messages

ROOT = Path(__file__).resolve().parents[1]
MISTAKES = ROOT / "examples" / "mistakes.gpushare.tgz"
GPUSHARE = Path(sys.executable).with_name("gpushare")
SNAPSHOT_ARGS = f"--snapshot {MISTAKES} --unsafe-no-sandbox --lang en --seed 7 --color no"


def _make(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _work_dir(tmp_path: Path) -> Path:
    work = tmp_path / "gpushare"
    work.mkdir()
    shutil.copy(ROOT / "learner" / "Makefile", work / "Makefile")
    return work


def _only_the_grade(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = messages.label("summary_title", "en")
    assert proc.stdout.startswith(first + "\n"), proc.stdout[:300]  # no setup lines first
    assert "What to fix" in proc.stdout  # the mistakes example loses points
    assert "make:" not in proc.stdout + proc.stderr and "Error" not in proc.stderr
    assert "gpushare grade" not in proc.stdout  # no command echoed


def test_make_grade_in_the_checkout_prints_only_the_grade(tmp_path):
    _only_the_grade(_make(ROOT, "grade", f"GRADE_ARGS={SNAPSHOT_ARGS}"))


def test_make_grade_in_the_work_dir_grades_that_folder(tmp_path):
    work = _work_dir(tmp_path)
    _only_the_grade(_make(work, "grade", f"GPUSHARE={GPUSHARE}", f"GRADE_ARGS={SNAPSHOT_ARGS}"))
    planned = _make(work, "-n", "grade", "STEP=1,2")
    assert f'--workdir "{work}" --step 1,2' in planned.stdout, planned.stdout


def test_make_grade_still_fails_when_no_grade_could_be_taken(tmp_path):
    work = _work_dir(tmp_path)
    missing = f"--snapshot {tmp_path / 'none.gpushare.tgz'}"
    for proc in (
        _make(ROOT, "grade", f"GRADE_ARGS={missing}"),
        _make(work, "grade", f"GPUSHARE={GPUSHARE}", f"GRADE_ARGS={missing}"),
    ):
        assert proc.returncode != 0 and "cannot read snapshot" in proc.stderr, proc.stderr
