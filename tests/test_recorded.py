"""The fast tier (issue 12): the graders on recorded lab states, with no cluster at all.

Every state the full tier plays on a real lab (the fresh lab, the reference solution, every
mutant) was captured from one by ``tests/record_states.py`` (``make record``); here each is
graded offline, in-process, and must fail exactly the checks it failed live. The full tier
proves that offline grading matches live grading (``tests.helpers.run_grade``); this tier
lets a developer run the graders on every change in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpushare.grading import grade, runner
from gpushare.locations import graders_dir
from gpushare.sandbox import isolation
from gpushare.submissions import snapshot

RECORDED = Path(__file__).with_name("recorded")
INDEX = json.loads((RECORDED / "index.json").read_text())
ALL = {c.meta["number"] for c in runner.load_checks(graders_dir())}
UNSAFE = not isolation.probe().available  # recorded by us: our own scripts


def _grade(path: Path) -> grade.Outcome:
    options = grade.Options(snapshot=path, lang="en", seed=7, unsafe_no_sandbox=UNSAFE)
    return grade.grade(options)


@pytest.mark.parametrize("ident", sorted(INDEX))
def test_recorded_state_fails_exactly_its_checks(ident):
    outcome = _grade(RECORDED / f"{ident}.gpushare.tgz")
    report = outcome.report
    failed = {c.number for c in report.checks if not c.passed}
    expected = ALL if INDEX[ident]["fails"] == ["*"] else set(INDEX[ident]["fails"])
    assert [c.number for c in report.checks if c.error] == []
    assert failed == expected, {c.number: report.said(c) for c in report.checks if not c.passed}
    assert report.score == sum(c.max_score for c in report.checks if c.passed)
    for check in report.checks:
        if not check.passed:
            assert report.said(check).strip(), check.number


def test_recordings_are_of_the_current_format(tmp_path):
    """A format change must come with new recordings (`make record`)."""
    files = sorted(RECORDED.glob("*.gpushare.tgz"))
    assert {f.name.removesuffix(".gpushare.tgz") for f in files} == set(INDEX)
    for i, path in enumerate(files):
        assert snapshot.load(path, tmp_path / str(i)).manifest["format"] == snapshot.FORMAT


def test_every_check_is_failed_by_some_recorded_state():
    failing = set().union(*(set(e["fails"]) for e in INDEX.values() if e["fails"] != ["*"]))
    assert failing == ALL
