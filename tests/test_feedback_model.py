"""Feedback is data until an output writes it (gpushare.feedback), and one cause is one message.

A recorded state of the product (tests/recorded, graded offline) fails many checks for a few
causes; every output of its grade says each root once, in full, and every check that follows
from it points to it. The data in results.json reads back as the same failure, a class groups
by it, and a results.json written before it held the data still reads and diffs.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from gpushare.classroom import diff, feedback, gradebook
from gpushare.feedback import CheckFailed, Failure, T
from gpushare.grading import grade
from gpushare.reports import messages, policy, terminal
from gpushare.sandbox import isolation
from tests.helpers import ROOT

RECORDED = ROOT / "tests" / "recorded"
OLD_CLASS = ROOT / "tests" / "data" / "class-47.tgz"  # results.json files without the data
UNSAFE = not isolation.probe().available  # recorded by us: our own scripts


@pytest.fixture(scope="module")
def fresh() -> grade.Outcome:
    """A lab never solved: the ConfigMap and the script are missing, among much else."""
    options = grade.Options(
        snapshot=RECORDED / "fresh-lab.gpushare.tgz", lang="en", seed=7, unsafe_no_sandbox=UNSAFE
    )
    return grade.grade(options)


def test_a_failure_reads_back_from_json_as_it_was_said():
    failure = Failure(
        problem=T("yaml_invalid", line=3, column=2, error="mapping values"),
        expected=("a", "b"),  # names: said with the enumeration's separator
        found=[T("absent"), "x"],  # clauses: with the list's
        where="k8s/a.yaml:3",
        hint=T("file_missing"),
        cause="file:k8s/a.yaml",
    )
    back = Failure.from_data(json.loads(json.dumps(failure.as_data())))
    assert back == failure
    for lang in messages.langs():
        assert messages.render("1.2", back, lang) == messages.render("1.2", failure, lang)
    assert Failure.from_data("Expected: 8") is None  # an older file's prose is no data


def test_a_finding_carries_its_own_hint_key():
    """fail(..., hint=KEY, **values): the finding's hint replaces the check's."""
    own = CheckFailed(problem=T("file_empty"), hint="file_too_large", size=9, limit=1)
    assert own.hint is not None and own.hint.key == "file_too_large"
    said = messages.render("1.2", own, "en")
    assert "9 bytes" in said and messages.hint("1.2", "en") not in said
    assert messages.hint("1.2", "en") in messages.render("1.2", CheckFailed(), "en")


def test_a_check_that_follows_from_another_points_to_it(fresh, tmp_path):
    report = fresh.report
    by_number = {c.number: c for c in report.checks}
    follows = {c.number: root[0] for c in report.checks if (root := report.root_of(c))}
    # the missing ConfigMap (1.3) and the missing script (6.1): each told once
    assert {n: follows[n] for n in ("1.4", "1.5", "1.6", "7.1")} == dict.fromkeys(
        ("1.4", "1.5", "1.6", "7.1"), "1.3"
    )
    assert {follows[n] for n in ("6.2", "6.3", "6.4", "6.5")} == {"6.1"}
    for lang in messages.langs():
        root = report.said(by_number["6.1"], lang)
        for number in ("6.2", "6.5"):
            said = report.said(by_number[number], lang)
            assert "6.1" in said and len(said.splitlines()) == 1, (lang, said)
            assert messages.hint(number, lang) not in said
        assert messages.hint("6.1", lang) in root
    fresh.write(tmp_path / "results.json", tmp_path / "junit.xml")
    tests = {t["number"]: t for t in json.loads((tmp_path / "results.json").read_text())["tests"]}
    assert tests["1.4"]["extra_data"]["feedback"]["follows"] == "1.3"
    assert "follows" not in tests["1.3"]["extra_data"]["feedback"]
    assert tests["1.4"]["output"] == report.said(by_number["1.4"])
    assert "1.3" in (tmp_path / "junit.xml").read_text()
    # the terminal: every root cause before any check that follows from one
    shown = terminal.render(report, color=False)
    heads = [line.split("]")[0][1:] for line in shown.splitlines() if line.startswith("[")]
    first_follower = min(heads.index(n) for n in follows)
    assert all(
        heads.index(c.number) < first_follower
        for c in report.checks
        if not c.passed and c.number not in follows
    )


def test_a_withheld_failure_keeps_no_data_and_is_no_root(fresh, tmp_path):
    hidden = policy.parse({"checks": {"1.3": {"visibility": "hidden"}}})
    report = policy.apply(fresh.report, hidden)
    by_number = {c.number: c for c in report.checks}
    test = report.as_json()["tests"]
    entry = next(t for t in test if t["number"] == "1.3")
    assert "feedback" not in entry["extra_data"] and entry["extra_data"]["withheld"]
    # 1.4 no longer points to a check the learner cannot read: it is told in full
    assert report.root_of(by_number["1.4"]) is None
    assert "1.3" not in report.said(by_number["1.4"])
    for c in report.checks:  # as it was, for the other tests of the module
        c.visibility, c.withheld = "visible", False
    report.policy = None


def test_a_class_groups_by_the_problem_key_in_its_own_language(fresh):
    results = fresh.report.as_json()
    row = gradebook.row_from_results("ann", results)
    assert row.cells["1.4"].follows == "1.3"
    for lang in messages.langs():
        reason = feedback.reason(row.cells["1.2"], lang)
        assert reason == messages.render_value(T("file_missing"), lang)
        assert "1.3" in feedback.reason(row.cells["1.4"], lang)
    # two learners whose problem is the same key with their own values: one reason
    a = gradebook.Cell("1.2", 1, 2, 0, False, "", "", failure=Failure(problem=T("file_empty")))
    b = gradebook.Cell(
        "1.2", 1, 2, 0, False, "", "", failure=Failure(problem=T("file_not_utf8", line=3))
    )
    c = gradebook.Cell(
        "1.2", 1, 2, 0, False, "", "", failure=Failure(problem=T("file_not_utf8", line=9))
    )
    assert feedback.reason(b, "en") == feedback.reason(c, "en") != feedback.reason(a, "en")


def test_results_written_before_the_data_still_read_group_and_diff(tmp_path):
    with tarfile.open(OLD_CLASS) as tar:
        tar.extractall(tmp_path)  # our own recording (tests/record_class.py)
    rows = gradebook.load_rows(tmp_path)
    cells = [c for r in rows for c in r.cells.values() if not c.passed and not c.error]
    assert cells and all(c.failure is None for c in cells)
    for cell in cells:  # grouped by their prose, as they always were
        assert feedback.reason(cell, "en") == feedback.prose_reason(cell) != "-"
    again = gradebook.load_rows(tmp_path)
    assert diff.compare("old", rows, again).changes == []


def test_a_missing_quantity_and_the_schedulers_reason_are_said_in_the_learners_language(fresh):
    cordoned = grade.grade(
        grade.Options(
            snapshot=RECORDED / "4-3-mig-job-never-scheduled-mig-node-cordoned.gpushare.tgz",
            lang="en",
            seed=7,
            unsafe_no_sandbox=UNSAFE,
        )
    ).report
    pending = next(c for c in cordoned.checks if c.number == "4.3")
    capacity = next(c for c in fresh.report.checks if c.number == "2.3")
    for lang in messages.langs():
        said = cordoned.said(pending, lang)
        assert messages.render_value(T("sched_cordoned", n=1), lang) in said, said
        assert "“0/3 nodes are available: 1 node(s) were unschedulable" in said  # kept, quoted
        absent = fresh.report.said(capacity, lang)
        assert messages.render_value(T("quantity_not_set"), lang) in absent
        assert "<none>" not in said + absent


@pytest.mark.parametrize("key", ["could_not_read_cluster", "grade_killed", "snapshot_hostile"])
def test_a_grader_side_reason_says_it_is_not_the_learners(key):
    """A grade the grader could not take for a reason not the learner's doing says so, and whom
    to tell, in the results.json the learner reads: its output and each check's."""
    detail = T(key, error="x", signal="SIGKILL")
    checks = [gradebook.CheckInfo("1.1", 1, 2)]
    for lang in messages.langs():
        made = gradebook.error_results(
            Path("ann.gpushare.tgz"),
            "x",
            "cluster",
            lang=lang,
            seed=7,
            checks=checks,
            detail=detail,
        ).as_json()
        note = messages.render_value(T("grader_side"), lang)
        assert note in made["output"] and note in made["tests"][0]["output"], lang


def test_a_check_the_grader_could_not_judge_says_whose_side_it_is():
    for kind in ("cluster", "timeout", "grader"):
        failure = Failure(problem=T("api_error", error="connection refused"), kind=kind)
        for lang in messages.langs():
            assert messages.render_value(T("grader_side"), lang) in messages.render(
                "1.1", failure, lang
            )
    own = messages.render("1.1", Failure(problem=T("file_missing")), "en")
    assert messages.render_value(T("grader_side"), "en") not in own


def test_no_text_says_malicious_or_hostile():
    words = ("malicious", "hostile", "恶意", "악의")
    for folder in (ROOT / "src/gpushare/reports/messages", ROOT / "graders/messages"):
        for path in folder.glob("*.toml"):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.lstrip().startswith("#") or "=" not in line:
                    continue
                text = line.split("=", 1)[1].lower()
                assert not any(w in text for w in words), (path.name, line)
