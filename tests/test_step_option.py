"""`--step`: the way to grade the step one is on, said as such, in one form for grade and solve.

A `--step` grade whose checks all pass names the steps and how many were left out ("Step 1:
all 5 checks passed (12/12); 7 steps not graded"), never the whole lab's "All checks passed.";
`grade` and `solve` take the same `--step 1,2` (and the repeated and `--steps` forms).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare import cli
from gpushare.grading import grade, runner
from gpushare.locations import graders_dir
from gpushare.reports import messages
from tests.helpers import grade_snapshot

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "examples" / "reference.gpushare.tgz"


def _lab_steps() -> dict[int, tuple[int, int]]:
    """step -> (checks, points), from the graders themselves."""
    out: dict[int, tuple[int, int]] = {}
    for c in runner.load_checks(graders_dir()):
        n, points = out.get(c.meta["step"], (0, 0))
        out[c.meta["step"]] = (n + 1, points + c.meta["points"])
    return out


def test_a_passed_step_says_which_step_and_how_many_were_left_out(tmp_path):
    steps = _lab_steps()
    count, points = steps[1]
    run = grade_snapshot(REFERENCE, tmp_path, "--lang", "en", "--step", "1", "--unsafe-no-sandbox")
    assert run.rc == 0, run.stderr
    said = (
        f"Step 1: all {count} checks passed ({points}/{points}); {len(steps) - 1} steps not graded"
    )
    assert said in run.stdout
    assert messages.label("all_passed", "en") not in run.stdout
    assert run.results is not None and said in run.results["output"]


@pytest.mark.parametrize("lang", ["zh", "ko"])
def test_the_step_verdict_is_said_in_every_language(tmp_path, lang):
    run = grade_snapshot(
        REFERENCE, tmp_path, "--lang", lang, "--step", "1,2", "--unsafe-no-sandbox"
    )
    assert run.rc == 0, run.stderr
    assert messages.label("all_passed", lang) not in run.stdout
    rest = str(len(_lab_steps()) - 2)
    verdict = run.results["output"].splitlines()[-1] if run.results else ""
    assert rest in verdict and "{" not in verdict, verdict


def test_a_whole_grade_still_says_all_checks_passed(tmp_path):
    run = grade_snapshot(REFERENCE, tmp_path, "--lang", "en", "--unsafe-no-sandbox")
    assert run.rc == 0, run.stderr
    assert "All checks passed." in run.stdout and "not graded" not in run.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["--step", "1,2"],
        ["--step", "1", "--step", "2"],
        ["--steps", "1,2"],
        ["--steps", "1", "--step", "2"],
    ],
)
def test_grade_and_solve_take_the_same_step_forms(argv):
    parser = cli.build_parser()
    graded = grade.options_from(parser.parse_args(["grade", *argv]))
    assert graded.steps == {1, 2}
    solving = parser.parse_args(["solve", *argv])
    assert grade.parse_steps(solving.steps) == {1, 2}


def test_a_step_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError):
        grade.parse_steps(["1,x"])
