"""Grades people and LMSs read (issue 4): JSON, JUnit XML, languages, terminal, exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from tests.helpers import ALL_CHECKS, MAX_SCORE, ROOT

RESULTS_SCHEMA = {
    "type": "object",
    "required": ["score", "max_score", "execution_time", "tests"],
    "properties": {
        "score": {"type": "number"},
        "max_score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "extra_data": {
            "type": "object",
            "required": ["tool_version", "lab_versions", "seed", "lang"],
        },
        "tests": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "number", "score", "max_score", "status", "output"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "number": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+$"},
                    "score": {"type": "number", "minimum": 0},
                    "max_score": {"type": "number", "exclusiveMinimum": 0},
                    "status": {"enum": ["passed", "failed"]},
                    "output": {"type": "string"},
                },
            },
        },
    },
}

ENV = {
    **os.environ,
    "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"],
    "NO_COLOR": "",
}


@pytest.fixture(scope="module")
def half_solved(state, tmp_path_factory):
    """The reference solution with two broken files: some checks pass, some fail."""
    src = state.solve()
    import shutil

    wd = tmp_path_factory.mktemp("half") / "gpushare"
    shutil.copytree(src, wd)
    (wd / "out/isolation.txt").write_text("MPS_MEMORY_ISOLATION=yes\n")
    (wd / "out/placement.txt").unlink()
    return wd


def _grade(lab, wd, tmp_path, *extra, entry="cli", lang="en"):
    js, xml = tmp_path / f"{entry}-{lang}.json", tmp_path / f"{entry}-{lang}.xml"
    common = [
        "--kubeconfig",
        str(lab.kubeconfig),
        "--workdir",
        str(wd),
        "--seed",
        "5",
        "--lang",
        lang,
        "--json",
        str(js),
        "--junitxml",
        str(xml),
        *extra,
    ]
    if entry == "cli":
        cmd = [sys.executable, "-m", "gpushare", "grade", *common]
    else:
        cmd = [sys.executable, "-m", "pytest", "graders", "-p", "no:cacheprovider", *common]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120)
    return proc, json.loads(js.read_text()), ET.parse(xml).getroot()


def _suite(root):
    return root if root.tag == "testsuite" else root.find("testsuite")


@pytest.mark.parametrize("entry", ["cli", "pytest"])
def test_json_and_junit_agree_through_both_entry_points(lab, half_solved, tmp_path, entry):
    proc, results, xml = _grade(lab, half_solved, tmp_path, entry=entry)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    jsonschema.validate(results, RESULTS_SCHEMA)
    assert results["max_score"] == MAX_SCORE
    assert sum(t["score"] for t in results["tests"]) == results["score"]
    assert {t["number"] for t in results["tests"] if t["status"] == "failed"} == {
        "7.2",
        "7.3",
        "8.3",
    }
    assert results["extra_data"]["seed"] == 5
    assert results["extra_data"]["lab_versions"]["kubernetes"] == "v1.36.3"

    suite = _suite(xml)
    cases = suite.findall("testcase")
    assert len(cases) == len(results["tests"]) == len(ALL_CHECKS)
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["score"] == str(results["score"])
    assert props["max_score"] == str(MAX_SCORE)
    assert props["seed"] == "5"
    failures = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert len(failures) == 3
    by_number = {t["number"]: t for t in results["tests"]}
    for name, failure in failures.items():
        number = re.match(r"test_(\d+)_(\d+)_", name).expand(r"\1.\2")
        assert by_number[number]["output"] in failure.get("message")
        assert "Traceback" not in failure.get("message") + (failure.text or "")
    assert int(suite.get("tests")) == len(ALL_CHECKS) and int(suite.get("failures")) == 3
    assert int(suite.get("errors")) == 0


def test_both_entry_points_give_identical_results(lab, half_solved, tmp_path):
    _, cli, _ = _grade(lab, half_solved, tmp_path, entry="cli")
    _, via_pytest, _ = _grade(lab, half_solved, tmp_path, entry="pytest")

    def key(r):
        return [(t["number"], t["score"], t["status"], t["output"]) for t in r["tests"]]

    assert key(cli) == key(via_pytest)


HANGUL = re.compile(r"[\uac00-\ud7a3]")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize(("lang", "script"), [("zh", CJK), ("ko", HANGUL)])
def test_feedback_in_each_language(lab, half_solved, tmp_path, lang, script):
    proc, results, _ = _grade(lab, half_solved, tmp_path, lang=lang)
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert failed
    for t in failed:
        assert script.search(t["output"]), t["output"]
        assert script.search(t["name"])
    assert script.search(proc.stdout)


def test_english_feedback_says_expected_found_where_hint(lab, half_solved, tmp_path):
    _, results, _ = _grade(lab, half_solved, tmp_path)
    out = next(t for t in results["tests"] if t["number"] == "7.3")["output"]
    for label in ("Expected:", "Found:", "Where:", "Hint:"):
        assert label in out
    assert "out/isolation.txt" in out
    assert "MPS_MEMORY_ISOLATION=yes" in out
    # the hint guides without the answer: the right value for MPS is not in the feedback
    assert "partial" not in out.split("Hint:")[1]


def test_terminal_is_plain_in_a_pipe_and_coloured_on_request(lab, half_solved, tmp_path):
    proc, _, _ = _grade(lab, half_solved, tmp_path)
    assert "\x1b[" not in proc.stdout
    assert "Total: 90/100" in proc.stdout or "Total:" in proc.stdout
    assert "[7.3]" in proc.stdout and "Traceback" not in proc.stdout
    coloured, _, _ = _grade(lab, half_solved, tmp_path, "--color", "yes")
    assert "\x1b[31m" in coloured.stdout


def test_bad_options_exit_2(tmp_path):
    for args in (["grade", "--lang", "fr"], ["grade", "--seed", "x"], ["nope"]):
        proc = subprocess.run(
            [sys.executable, "-m", "gpushare", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=ENV,
            timeout=60,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
