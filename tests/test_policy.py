"""The instructor's visibility policy (issue 11): parsing, precedence, and what a withheld
check's feedback still says, through ``gpushare grade --policy`` on a real lab's snapshot."""

from __future__ import annotations

import csv
import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from gpushare.grading import capture
from gpushare.reports import policy
from gpushare.reports.policy import PolicyError
from tests.helpers import MAX_SCORE, ROOT, _gpushare, discovered_checks

WRONG_TABLE = """TIMESLICING_MEMORY_ISOLATION=no
MPS_MEMORY_ISOLATION=yes
MIG_MEMORY_ISOLATION=yes
TIMESLICING_FAULT_ISOLATION=no
MIG_FAULT_ISOLATION=yes
"""


# --------------------------------------------------------------------------- the file


def _load(tmp_path, text: str) -> policy.Policy:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return policy.load(path)


def test_a_check_takes_its_own_rule_else_its_steps_else_the_default(tmp_path):
    p = _load(
        tmp_path,
        """
[default]
visibility = "after_published"

[steps.6]
visibility = "after_due_date"

[steps."7"]
visibility = "visible"
show_expected = false

[checks."6.1"]
visibility = "visible"
""",
    )
    assert p.rule("1.1") == policy.Rule("after_published", False)
    assert p.rule("6.5") == policy.Rule("after_due_date", False)
    assert p.rule("6.1") == policy.Rule("visible", True)
    assert p.rule("7.3") == policy.Rule("visible", False)
    assert p.describe().startswith("policy.toml sha256:")


def test_an_empty_policy_shows_everything(tmp_path):
    p = _load(tmp_path, "")
    assert {p.rule(n).visibility for n in policy.known_checks()} == {"visible"}
    assert all(p.rule(n).show_expected for n in policy.known_checks())


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[checks."6.50"]\nvisibility = "hidden"\n', ['[checks."6.50"]', "not a check"]),
        ("[steps.9]\nvisibility = 'hidden'\n", ["[steps.9]", "(1, 2, 3, 4, 5, 6, 7, 8)"]),
        ("[default]\nvisibility = 'secret'\n", ["'secret'", "after_due_date"]),
        ("[default]\nvisible = false\n", ["unknown key 'visible'"]),
        ("[stpes.6]\nvisibility = 'hidden'\n", ["unknown key 'stpes'"]),
        ("[steps.6]\nvisibility = 'hidden'\nshow_expected = true\n", ["never shows expected"]),
        ("[steps.6]\nshow_expected = 'no'\n", ["true or false"]),
        ("[steps.6\n", ["not valid TOML"]),
    ],
)
def test_a_policy_that_cannot_be_meant_is_refused(tmp_path, text, words):
    with pytest.raises(PolicyError) as err:
        _load(tmp_path, text)
    for word in words:
        assert word in str(err.value)
    assert "\n" not in str(err.value)


def test_grade_refuses_a_bad_policy_in_one_line(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text("[checks.'9.9']\nvisibility = 'hidden'\n")
    proc = _gpushare(
        "grade", "--snapshot", str(tmp_path / "none.gpushare.tgz"), "--policy", str(bad)
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "9.9" in proc.stderr and "Traceback" not in proc.stderr
    proc = _gpushare("grade", "--policy", str(tmp_path / "missing.toml"))
    assert proc.returncode == 2 and "cannot read the policy" in proc.stderr


# --------------------------------------------------------------------------- on a real grade


@pytest.fixture(scope="module")
def wrong_table(lab, state, tmp_path_factory):
    """The solved lab, with one wrong value in the isolation table: only 7.3 fails."""
    base = tmp_path_factory.mktemp("policy")
    work = base / "gpushare"
    shutil.copytree(state.solve(), work, symlinks=True)
    (work / "out/isolation.txt").write_text(WRONG_TABLE)
    return capture.take(work, kubeconfig=str(lab.kubeconfig), learner="table", out=base)


def _grade(snap, tmp_path, name, *extra):
    js, xml = tmp_path / f"{name}.json", tmp_path / f"{name}.xml"
    proc = _gpushare(
        "grade", "--snapshot", str(snap), "--seed", "3", "--lang", "en", "--color", "no",
        "--json", str(js), "--junitxml", str(xml), *extra,
    )  # fmt: skip
    props = {p.get("name"): p.get("value") for p in ET.parse(xml).getroot().iter("property")}
    return proc, json.loads(js.read_text()), props


def test_show_expected_false_keeps_the_hint_and_drops_the_rest(wrong_table, tmp_path):
    proc, plain, _ = _grade(wrong_table, tmp_path, "plain")
    assert proc.returncode == 1
    before = next(t for t in plain["tests"] if t["number"] == "7.3")["output"]
    assert "Expected:" in before and "Found:" in before and "MPS_MEMORY_ISOLATION" in before

    rule = tmp_path / "p.toml"
    rule.write_text('[checks."7.3"]\nshow_expected = false\n')
    proc, results, props = _grade(wrong_table, tmp_path, "withheld", "--policy", str(rule))
    assert proc.returncode == 1
    after = next(t for t in results["tests"] if t["number"] == "7.3")
    assert after["visibility"] == "visible" and after["status"] == "failed"
    assert after["output"].splitlines()[0] == (
        "The details of this check are not shown (your instructor's choice)."
    )
    assert after["output"].splitlines()[1].startswith("Hint: ")
    assert "MPS_MEMORY_ISOLATION" not in after["output"] and "Expected" not in after["output"]
    assert "MPS_MEMORY_ISOLATION=yes" not in proc.stdout  # the terminal too
    assert after["extra_data"]["withheld"] is True
    # every check visible: the figures are the plain ones; one failed, so no verdict at all
    points = after["max_score"]
    assert results["output"] == plain["output"] == f"{100 - points}/100"
    assert props["policy"].startswith("p.toml sha256:") and props["verdict"] == ""
    assert props["not_visible"] == ""


def test_while_a_check_is_hidden_the_wording_says_visible(wrong_table, tmp_path):
    rule = tmp_path / "p.toml"
    rule.write_text('[checks."7.3"]\nvisibility = "after_published"\n')
    proc, results, props = _grade(wrong_table, tmp_path, "hidden", "--policy", str(rule))
    assert proc.returncode == 1  # for the instructor: a check failed
    points = next(t for t in results["tests"] if t["number"] == "7.3")["max_score"]
    rest = 100 - points
    assert results["score"] == rest  # Gradescope keeps the real score, and hides the total
    assert results["output"].splitlines() == [
        f"Visible checks: {rest}/{rest}",
        f"Checks graded but not shown to you yet: 1 ({points} points).",
        "All visible checks passed.",
    ]
    assert "All visible checks passed." in proc.stdout and "All checks passed" not in proc.stdout
    assert "[7.3]" not in proc.stdout  # not listed among the failures to fix
    assert props["verdict"] == "All visible checks passed."
    assert props["visible_score"] == props["visible_max_score"] == str(rest)
    assert props["not_visible"] == "7.3:after_published" and props["score"] == str(rest)


def test_apply_is_idempotent_and_none_changes_nothing(wrong_table, tmp_path):
    from gpushare.grading.grade import Options, grade

    p = policy.parse({"checks": {"7.3": {"visibility": "hidden"}}}, name="inline")
    outcome = grade(Options(snapshot=wrong_table, lang="zh", seed=3, policy=p))
    once = json.dumps(outcome.report.as_json(), sort_keys=True)
    policy.apply(outcome.report, p)
    again = json.loads(json.dumps(outcome.report.as_json(), sort_keys=True))
    once = json.loads(once)
    once.pop("execution_time"), again.pop("execution_time")
    assert once == again
    assert "所有可见的检查都通过了。" in again["output"]  # in the learner's language
    plain = grade(Options(snapshot=wrong_table, lang="zh", seed=3)).report
    assert policy.apply(plain, None) is plain and plain.policy is None
    assert {c.visibility for c in plain.checks} == {"visible"}
    assert plain.verdict() == ""


# --------------------------------------------------------------------------- points


def test_points_re_weight_one_check_and_leave_its_visibility_to_its_step(tmp_path):
    p = _load(
        tmp_path,
        """
[steps.5]
visibility = "after_due_date"

[checks."5.4"]
points = 5

[checks."6.1"]
points = 0
visibility = "hidden"
""",
    )
    assert p.points("5.4", 3) == 5 and p.points("6.1", 2) == 0 and p.points("1.1", 2) == 2
    assert p.rule("5.4") == policy.Rule("after_due_date", False)  # the step's, not visible
    assert p.rule("6.1") == policy.Rule("hidden", False)
    lab = {"5.4": 3, "6.1": 2, "1.1": 95}
    assert policy.total(p, lab) == 100 and policy.total_warning(p, lab) is None
    lab["1.1"] = 97
    warned = policy.total_warning(p, lab)
    assert warned is not None and "102 points" in warned and "policy.toml" in warned
    assert policy.total_warning(None, {"1.1": 101}) is not None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[checks."5.4"]\npoints = -1', "whole number"),
        ('[checks."5.4"]\npoints = 2.5', "whole number"),
        ('[checks."5.4"]\npoints = true', "whole number"),
        ("[steps.5]\npoints = 4", "belong to one check"),
        ("[default]\npoints = 4", "belong to one check"),
    ],
)
def test_points_that_cannot_be_meant_are_refused(tmp_path, text, words):
    with pytest.raises(PolicyError, match=words):
        _load(tmp_path, text)


def test_a_grade_counts_the_policys_points_and_warns_of_the_total(tmp_path):
    """The bundled reference graded under a policy that gives 5.4 two more points: every
    output says the new figures, and the instructor is told the total is not 100."""
    own = discovered_checks()["5.4"]
    path = tmp_path / "policy.toml"
    path.write_text(f'[checks."5.4"]\npoints = {own + 2}\n')
    proc, results, props = _grade(
        ROOT / "examples" / "reference.gpushare.tgz", tmp_path, "points",
        "--policy", str(path), "--unsafe-no-sandbox",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    total = MAX_SCORE + 2
    assert results["score"] == results["max_score"] == total
    assert props["max_score"] == str(total)
    assert next(t for t in results["tests"] if t["number"] == "5.4")["max_score"] == own + 2
    assert f"Total: {total}/{total}" in proc.stdout
    assert f"add up to {total} points" in proc.stderr and "not 100" in proc.stderr
    plain, _, _ = _grade(
        ROOT / "examples" / "reference.gpushare.tgz", tmp_path, "plain", "--unsafe-no-sandbox"
    )
    assert "warning" not in plain.stderr  # the lab's own 100: nothing to say


def test_a_class_states_its_total_and_grades_csv_its_max_points(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('[checks."5.4"]\npoints = 13\n')
    subs = tmp_path / "subs"
    for name in ("ada", "chen"):
        shutil.copytree(ROOT / "examples" / "class" / name, subs / name)
    run = []
    for out, extra in (("plain", []), ("weighted", ["--policy", str(path)])):
        proc = _gpushare(
            "class", "grade", str(subs), "--out", str(tmp_path / out), "--lang", "en",
            "--unsafe-no-sandbox", "--jobs", "1", *extra,
        )  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr
        run.append(proc)
    assert f"points possible: {MAX_SCORE}\n" in run[0].stdout and "Warning" not in run[0].stdout
    weighted = MAX_SCORE - discovered_checks()["5.4"] + 13
    assert f"points possible: {weighted} Warning: the checks add up to {weighted}" in run[1].stdout
    for out, top in (("plain", MAX_SCORE), ("weighted", weighted)):
        rows = list(csv.DictReader((tmp_path / out / "grades.csv").open(encoding="utf-8")))
        assert [r["max_score"] for r in rows] == [str(top)] * 2
        ada = next(r for r in rows if r["learner"] == "ada")
        assert ada["score"] == str(top)
