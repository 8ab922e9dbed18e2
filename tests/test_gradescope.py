"""The Gradescope autograder (issue 11): the real bundle, its real setup.sh and run_autograder,
run under a temporary AUTOGRADER_ROOT on snapshots captured from a real lab.

setup.sh runs once for the module (it builds a venv: some 20 s); the other bundles of the
module (a policy, a short deadline) are unpacked over the same root's ``source/``, as the venv
does not depend on them. pip installs offline from a wheel folder cached per user (filled once
with ``pip download`` of the bundle's pinned requirements), through setup.sh's
``GPUSHARE_PIP_ARGS``; on Gradescope the same line installs from PyPI.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpulab import requestcases
from gpushare.grading import capture
from gpushare.sandbox import isolation, levels
from gpushare.submissions import snapshot
from tests.helpers import ALL_CHECKS, MAX_SCORE, _gpushare, processes_with

# Gradescope's published results.json specification ("Autograder Specifications", Output
# format; gradescope/autograder_samples docs/specs.md), field by field, with its types.
FORMATS = ["text", "html", "simple_format", "md", "ansi"]
VISIBILITY = ["hidden", "after_due_date", "after_published", "visible"]
SPEC_TEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"},
        "max_score": {"type": "number"},
        "status": {"enum": ["passed", "failed"]},
        "name": {"type": "string"},
        "name_format": {"enum": FORMATS},
        "number": {"type": "string"},
        "output": {"type": "string"},
        "output_format": {"enum": FORMATS},
        "tags": {"type": "array", "items": {"type": "string"}},
        "visibility": {"enum": VISIBILITY},
        "extra_data": {"type": "object"},
    },
}
SPEC = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": {"enum": FORMATS},
        "test_output_format": {"enum": FORMATS},
        "test_name_format": {"enum": FORMATS},
        "visibility": {"enum": VISIBILITY},
        "stdout_visibility": {"enum": VISIBILITY},
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": SPEC_TEST},
        "leaderboard": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "value"],
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": ["number", "string"]},
                    "order": {"enum": ["asc", "desc"]},
                },
            },
        },
    },
    # "score": optional, but required if not on each test case; "tests": optional, but
    # required if no top-level score
    "anyOf": [
        {"required": ["score"]},
        {
            "required": ["tests"],
            "properties": {"tests": {"minItems": 1, "items": {"required": ["score"]}}},
        },
    ],
}
# What gpushare's graded results.json promises on top of the specification.
GRADED = {
    "required": ["score", "execution_time", "output", "tests", "extra_data"],
    "properties": {
        "tests": {
            "minItems": len(ALL_CHECKS),
            "maxItems": len(ALL_CHECKS),
            "items": {
                "required": [
                    "name",
                    "number",
                    "score",
                    "max_score",
                    "status",
                    "output",
                    "visibility",
                ],
                "properties": {
                    "number": {"pattern": r"^[1-8]\.[0-9]+$"},
                    "max_score": {"exclusiveMinimum": 0},
                },
            },
        },
        "extra_data": {"required": ["max_score", "seed", "tool_version", "lab_versions"]},
    },
}


def check_spec(results: dict, graded: bool = True) -> None:
    jsonschema.validate(results, SPEC)
    if graded:
        jsonschema.validate(results, GRADED)
        assert results["extra_data"]["max_score"] == MAX_SCORE
        assert sum(t["score"] for t in results["tests"]) == results["score"]


# --------------------------------------------------------------------------- fixtures


def _bundle(out: Path, *extra: str) -> Path:
    made = _gpushare("gradescope", "bundle", "--out", str(out), "--lang", "en", *extra)
    assert made.returncode == 0, made.stderr
    return out


@pytest.fixture(scope="module")
def wheels() -> Path:
    """The bundle's pinned requirements as wheels, downloaded once per user and version."""
    from gpushare.lms.gradescope import requirements

    pins = requirements()
    folder = Path.home() / ".cache/gpushare/test-wheels" / hashlib.sha256(pins.encode()).hexdigest()
    names = [n.lower() for n in re.findall(r"^(\S+)==", pins, re.M)]
    have = [p.name.lower() for p in folder.glob("*.whl")]
    if not all(any(h.startswith(n.replace("-", "_")) for h in have) for n in names):
        folder.mkdir(parents=True, exist_ok=True)
        req = folder / "requirements.txt"
        req.write_text(pins)
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:"]
        got = subprocess.run(
            [*pip, "--no-deps", "-r", str(req), "-d", str(folder)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert got.returncode == 0, f"could not fetch the wheels once: {got.stderr}"
    return folder


def _env(root: Path, **extra: str) -> dict[str, str]:
    """A bare environment, as a container has: no venv of ours, no KUBECONFIG."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(root), "AUTOGRADER_ROOT": str(root), **extra}


class Autograder:
    """One AUTOGRADER_ROOT in Gradescope's layout, set up once by the real setup.sh."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.setup_seconds = 0.0

    def install(self, bundle: Path) -> None:
        """Unpack a bundle into source/ and copy run_autograder, as Gradescope does."""
        source = self.root / "source"
        shutil.rmtree(source, ignore_errors=True)
        source.mkdir(parents=True)
        with zipfile.ZipFile(bundle) as zf:
            for info in zf.infolist():
                zf.extract(info, source)
                os.chmod(source / info.filename, (info.external_attr >> 16) & 0o777)
        shutil.copy2(source / "run_autograder", self.root / "run_autograder")

    def setup(self, wheels: Path) -> subprocess.CompletedProcess[str]:
        t0 = time.monotonic()
        done = subprocess.run(
            ["bash", str(self.root / "source/setup.sh")],
            cwd=self.root / "source",
            env=_env(
                self.root,
                GPUSHARE_PYTHON=os.path.realpath(sys.executable),
                GPUSHARE_PIP_ARGS=f"--no-index --find-links {wheels}",
                GPUSHARE_SETUP_APT="0",
            ),
            capture_output=True,
            text=True,
            timeout=600,
        )
        self.setup_seconds = time.monotonic() - t0
        return done

    def run(
        self, *uploads: Path | tuple[str, bytes], keep: bool = False, **env: str
    ) -> tuple[subprocess.CompletedProcess[str], dict | None]:
        """Put the uploads into submission/ and run run_autograder; (process, results).
        ``keep``: leave results/ of the previous run, as a runner reusing its root would."""
        submission = self.root / "submission"
        shutil.rmtree(submission, ignore_errors=True)
        if not keep:
            shutil.rmtree(self.root / "results", ignore_errors=True)
        submission.mkdir()
        for upload in uploads:
            if isinstance(upload, tuple):
                (submission / upload[0]).write_bytes(upload[1])
            else:
                shutil.copy2(upload, submission / upload.name)
        proc = subprocess.run(
            [str(self.root / "run_autograder")],
            cwd=self.root,
            env=_env(self.root, **env),
            capture_output=True,
            text=True,
            timeout=120,
        )
        out = self.root / "results/results.json"
        return proc, (json.loads(out.read_text()) if out.exists() else None)


@pytest.fixture(scope="module")
def autograder(tmp_path_factory, wheels) -> Autograder:
    base = tmp_path_factory.mktemp("gradescope")
    ag = Autograder(base / "autograder")
    ag.install(_bundle(base / "autograder.zip"))
    done = ag.setup(wheels)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ready: gpushare" in done.stdout
    assert (ag.root / "venv/bin/python").exists()
    return ag


def _hanging(workdir: Path) -> Path:
    script = workdir / "bin/check-request.sh"
    script.write_text(f"#!/bin/sh\n# {workdir.parent.name}-hangs\nexec sleep 1000\n")
    script.chmod(0o755)
    return workdir


def _leaky(workdir: Path) -> Path:
    """A wrong script that prints the manifest it is given: its output would show the unseen
    cases' container names if any feedback let it through."""
    script = workdir / "bin/check-request.sh"
    script.write_text('#!/bin/sh\ncat "$1"\nexit 3\n')
    script.chmod(0o755)
    return workdir


@pytest.fixture(scope="module")
def snaps(lab, state, tmp_path_factory) -> dict[str, Path]:
    """Snapshots captured from the real lab: solved, solved with a leaky or a hanging script,
    and the fresh lab with an empty work dir."""
    base = tmp_path_factory.mktemp("snaps")
    kube = str(lab.kubeconfig)
    solved = state.solve()
    out: dict[str, Path] = {}
    for name, change in (("solved", None), ("leaky", _leaky), ("hanging", _hanging)):
        work = base / name / "gpushare"
        shutil.copytree(solved, work, symlinks=True)
        if change:
            change(work)
        out[name] = capture.take(work, kubeconfig=kube, learner=name, out=base)
    state.fresh()
    empty = base / "fresh" / "gpushare"
    empty.mkdir(parents=True)
    out["fresh"] = capture.take(empty, kubeconfig=kube, learner="fresh", out=base)
    return out


# --------------------------------------------------------------------------- the bundle


def test_bundle_is_in_gradescope_layout_and_reproducible(tmp_path):
    first = _bundle(tmp_path / "a.zip")
    second = _bundle(tmp_path / "b.zip")
    assert first.read_bytes() == second.read_bytes()  # same inputs, same zip
    with zipfile.ZipFile(first) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        names = set(infos)
        for script in ("setup.sh", "run_autograder"):  # at the root, executable
            assert (infos[script].external_attr >> 16) & 0o111, script
            assert zf.read(script).startswith(b"#!/usr/bin/env bash\n")
        pins = zf.read("requirements.txt").decode()
        settings = json.loads(zf.read("gpushare-autograder.json"))
        policy = zf.read("policy.toml")
    # the lock's entries (tests/test_lock.py): pinned and hashed
    assert set(re.findall(r"^(\S+)==\S+ \\$", pins, re.M)) == {"pyyaml", "psutil"}
    assert pins.count("--hash=sha256:") >= 2
    assert settings["timeout"] == 480 and settings["lang"] == "en"
    # always a policy: without --policy, the defaults written out
    assert settings["policy"] == "policy.toml"
    from gpushare.reports.policy import Rule, parse

    default = parse(tomllib.loads(policy.decode()))
    assert vars(default.default) == vars(Rule()) and not default.steps and not default.checks
    assert {f"graders/test_step{n}_" in " ".join(names) for n in range(1, 9)} == {True}
    assert "fixtures/check-request/over.yaml" in names
    assert "src/gpushare/lms/gradescope.py" in names
    assert "src/gpushare/reports/messages/en.toml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(("solutions/", "tests/"))]


def test_bundle_writes_its_language_not_the_builders_locale(tmp_path):
    """Without --lang: GPUSHARE_LANG, else zh (the documented default), written out; the
    locale of the instructor's machine never decides what learners read."""
    for env, want in (
        ({"GPUSHARE_LANG": "", "LC_ALL": "", "LC_MESSAGES": "", "LANG": "ko_KR.UTF-8"}, "zh"),
        ({"GPUSHARE_LANG": "en"}, "en"),
    ):
        out = tmp_path / f"{want}.zip"
        made = _gpushare("gradescope", "bundle", "--out", str(out), env=env)
        assert made.returncode == 0, made.stderr
        with zipfile.ZipFile(out) as zf:
            assert json.loads(zf.read("gpushare-autograder.json"))["lang"] == want


def test_bundle_refuses_a_bad_policy_or_deadline(tmp_path):
    bad = tmp_path / "policy.toml"
    bad.write_text('[checks."6.50"]\nvisibility = "hidden"\n')
    made = _gpushare("gradescope", "bundle", "--out", str(tmp_path / "x.zip"), "--policy", str(bad))
    assert made.returncode == 2 and "6.50" in made.stderr and "Traceback" not in made.stderr
    made = _gpushare("gradescope", "bundle", "--out", str(tmp_path / "x.zip"), "--timeout", "900")
    assert made.returncode == 2 and "600" in made.stderr
    assert not (tmp_path / "x.zip").exists()


# --------------------------------------------------------------------------- grading


def test_solved_snapshot_scores_100(autograder, snaps):
    proc, results = autograder.run(snaps["solved"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_spec(results)
    assert results["score"] == MAX_SCORE
    assert all(t["status"] == "passed" and t["visibility"] == "visible" for t in results["tests"])
    assert results["output"] == f"{MAX_SCORE}/{MAX_SCORE}\nAll checks passed."
    assert results["output_format"] == "text" and results["stdout_visibility"] == "hidden"
    assert results["extra_data"]["cluster"]["learner"] == "solved"
    # the instructors' stdout: the terminal summary
    assert f"Total: {MAX_SCORE}/{MAX_SCORE}" in proc.stdout


def test_fresh_snapshot_scores_0_with_feedback(autograder, snaps):
    proc, results = autograder.run(snaps["fresh"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    check_spec(results)
    assert results["score"] == 0
    for test in results["tests"]:
        assert test["status"] == "failed" and test["score"] == 0
        root = test["extra_data"]["feedback"].get("follows")  # the same cause as that check
        if root:
            assert test["output"].startswith(f"See {root}"), test
        else:
            assert "Hint:" in test["output"] or "Expected:" in test["output"], test
        assert not test["extra_data"]["grader_error"], test
    assert "All" not in results["output"]


@pytest.mark.parametrize(
    ("uploads", "words"),
    [
        ([], ["No submission file", "make submit", ".gpushare.tgz"]),
        ([("photo.png", b"\x89PNG\r\n\x1a\n" + os.urandom(2000))], ["photo.png", "make submit"]),
        ([("a.txt", b"hello"), ("b.py", b"print(1)")], ["a.txt", "b.py", "make submit"]),
        (
            [("x.gpushare.tgz", b"\x1f\x8b" + os.urandom(500))],
            ["x.gpushare.tgz", "is not a gpushare submission", "make submit"],
        ),
    ],
    ids=["nothing", "random-file", "two-files", "corrupt-snapshot"],
)
def test_a_wrong_upload_gets_a_readable_message(autograder, uploads, words):
    proc, results = autograder.run(*uploads)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    check_spec(results, graded=False)
    assert results["score"] == 0
    for word in words:
        assert word in results["output"], results["output"]
    assert "\n" not in results["output"] and len(results["output"]) < 600


def test_two_snapshots_are_refused_not_guessed(autograder, snaps):
    proc, results = autograder.run(snaps["solved"], snaps["fresh"])
    assert proc.returncode == 1
    check_spec(results, graded=False)
    assert results["score"] == 0 and "Upload only one" in results["output"]
    assert snaps["solved"].name in results["output"]


def test_a_renamed_snapshot_is_graded_by_its_content(autograder, snaps, tmp_path):
    renamed = tmp_path / "my-lab.tar.gz"
    shutil.copy2(snaps["solved"], renamed)
    proc, results = autograder.run(renamed)
    assert proc.returncode == 0, proc.stdout
    assert results["score"] == MAX_SCORE


# --------------------------------------------------------------------------- the policy

HIDING = """
[steps.6]
visibility = "after_due_date"

[checks."7.3"]
visibility = "hidden"
"""


def _secrets(seed: int, unpoliced: dict, numbers: set[str]) -> set[str]:
    """What hidden feedback must never hold: the unseen cases of ``seed`` (their names,
    container names and expected lines) and every expected, found and where value that the
    same grade without the policy showed for those checks."""
    found: set[str] = set()
    for case in requestcases.generate(seed):
        found.add(case.name)
        found.update(f"OVER={name}={count}" for name, count in case.expect_over)
        for doc in yaml.safe_load_all(case.manifest):
            for c in ((doc or {}).get("spec") or {}).get("containers") or []:
                found.add(c["name"])
    for test in unpoliced["tests"]:
        if test["number"] in numbers:
            for line in test["output"].splitlines():
                for label in ("Expected: ", "Found: ", "Where: "):
                    if line.startswith(label) and len(line) > len(label) + 3:
                        found.add(line[len(label) :].strip())
    return {s for s in found if len(s) >= 4}


def test_hidden_checks_leak_nothing_and_the_wording_stays_honest(autograder, snaps, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(HIDING)
    autograder.install(_bundle(tmp_path / "hiding.zip", "--policy", str(policy)))
    proc, results = autograder.run(snaps["leaky"])
    assert proc.returncode == 1, proc.stdout + proc.stderr  # step 6 failed, unseen or not
    check_spec(results)
    tests = {t["number"]: t for t in results["tests"]}
    hidden = {n for n in tests if n.startswith("6.")} | {"7.3"}
    assert {n for n, t in tests.items() if t["visibility"] != "visible"} == hidden
    assert tests["7.3"]["visibility"] == "hidden" and tests["6.5"]["visibility"] == "after_due_date"
    assert tests["6.5"]["status"] == "failed" and tests["6.2"]["status"] == "failed"
    # honest: every visible check passed, a hidden one failed; never "all passed"
    assert "All visible checks passed." in results["output"]
    assert "All checks passed" not in results["output"] + proc.stdout
    shown = [t for t in results["tests"] if t["visibility"] == "visible"]
    top = sum(t["max_score"] for t in shown)
    assert f"Visible checks: {top}/{top}\n" in results["output"]  # not the hidden ones' points
    assert f"not shown to you yet: {len(hidden)} ({MAX_SCORE - top} points)" in results["output"]

    seed = results["extra_data"]["seed"]
    plain = _gpushare(
        "grade", "--snapshot", str(snaps["leaky"]), "--seed", str(seed), "--lang", "en",
        "--json", str(tmp_path / "plain.json"),
    )  # fmt: skip
    assert plain.returncode == 1, plain.stderr
    unpoliced = json.loads((tmp_path / "plain.json").read_text())
    secrets = _secrets(seed, unpoliced, hidden)
    assert len(secrets) >= 6
    shown = json.dumps(unpoliced, ensure_ascii=False)
    assert sum(s in shown for s in secrets) >= 6  # the test can fail: without the policy they leak

    # the same policy in `gpushare grade --json`, the JUnit XML and the terminal
    again = _gpushare(
        "grade", "--snapshot", str(snaps["leaky"]), "--seed", str(seed), "--lang", "en",
        "--policy", str(policy), "--json", str(tmp_path / "p.json"),
        "--junitxml", str(tmp_path / "p.xml"), "--color", "no",
    )  # fmt: skip
    assert again.returncode == 1, again.stderr
    outputs = {
        "results.json": (autograder.root / "results/results.json").read_text(),
        "run_autograder stdout": proc.stdout + proc.stderr,
        "grade --json": (tmp_path / "p.json").read_text(),
        "JUnit XML": (tmp_path / "p.xml").read_text(),
        "terminal": again.stdout + again.stderr,
    }
    for where, text in outputs.items():
        leaked = sorted(s for s in secrets if s in text)
        assert not leaked, f"{where} leaks {leaked}"
        assert "All checks passed" not in text, where
    assert "All visible checks passed." in again.stdout
    assert 'name="verdict" value="All visible checks passed."' in outputs["JUnit XML"]
    assert 'name="not_visible" value="6.1:after_due_date' in outputs["JUnit XML"]


# --------------------------------------------------------------------------- the deadline


def test_a_2s_deadline_gives_partial_results_and_ends_everything(autograder, snaps, tmp_path):
    autograder.install(_bundle(tmp_path / "short.zip", "--timeout", "2"))
    before = {p.pid for p in processes_with("sleep 1000")}
    t0 = time.monotonic()
    proc, results = autograder.run(snaps["hanging"])
    took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert took < 10, took
    check_spec(results)
    assert results["extra_data"]["timed_out"] is True
    done = [t for t in results["tests"] if not t["extra_data"]["timed_out"]]
    cut = [t for t in results["tests"] if t["extra_data"]["timed_out"]]
    assert len(done) >= 20 and all(t["status"] == "passed" for t in done)
    assert cut and all(t["status"] == "failed" and t["score"] == 0 for t in cut)
    assert any("still running" in t["output"] for t in cut)
    assert results["score"] == sum(t["score"] for t in done) > 0
    assert results["output"].startswith("Incomplete:")
    time.sleep(0.5)
    left = [p for p in processes_with("sleep 1000") if p.pid not in before and p.is_running()]
    assert left == [], left


# --------------------------------------------------------------------------- the sandbox


def test_without_bubblewrap_auto_grades_at_the_uid_level_and_require_refuses(
    autograder, snaps, tmp_path
):
    """Where the container cannot run bubblewrap: ``auto`` grades at the ``uid`` level (root
    runs the script as a uid of its own; its ``python3`` is the copied runtime, with PyYAML:
    full marks), recorded in results.json and on stdout; ``require`` takes no grade."""
    if os.geteuid() != 0:
        pytest.skip("Gradescope runs as root: the uid level needs it")
    missing = {"GPUSHARE_BWRAP": str(tmp_path / "no-bwrap")}
    autograder.install(_bundle(tmp_path / "auto.zip"))
    proc, results = autograder.run(snaps["solved"], **missing)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results["score"] == MAX_SCORE
    assert results["extra_data"]["isolation"] == "uid"
    assert "isolation=uid" in proc.stdout
    # the autograder's own folders: out of the script's reach (chmod o-rwx where reachable)
    for name in ("source", "results", "submission"):
        path = autograder.root / name
        assert not path.stat().st_mode & 0o007 or not levels._reachable_by_others(str(path))
    autograder.install(_bundle(tmp_path / "require.zip", "--sandbox", "require"))
    proc, results = autograder.run(snaps["solved"], **missing)
    assert proc.returncode == 2 and results is None, proc.stdout
    assert "refusing to run learners' scripts without a sandbox" in proc.stdout


def test_results_name_the_isolation_level(autograder, snaps, tmp_path):
    """With bubblewrap, results.json's extra_data and the instructors' stdout say so."""
    if not isolation.probe().available:
        pytest.skip("no bubblewrap here")
    autograder.install(_bundle(tmp_path / "auto.zip"))
    proc, results = autograder.run(snaps["solved"])
    assert results["extra_data"]["isolation"] == "bubblewrap", proc.stdout
    assert "isolation=bubblewrap" in proc.stdout


# --------------------------------------------------------------------------- no grade


def test_a_grade_that_cannot_be_taken_writes_no_score(autograder, snaps, tmp_path):
    """A snapshot missing a recorded answer (as an older format would): not the learner's
    zero. Without a score results.json would be outside Gradescope's specification (proved
    below with gpushare grade --json's own file), so run_autograder writes none: Gradescope's
    "failed to execute" state, no score recorded, the reason on the instructors' stdout."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    snap = snapshot.load(snaps["solved"], scratch)
    cluster = {k: v for k, v in snap.cluster.items() if not k.startswith("quotas:")}
    assert len(cluster) < len(snap.cluster)
    captured = snapshot.build(
        learner="void",
        cluster=cluster,
        identity=snap.manifest["cluster"],
        workdir=snap.work_root,
        runtime={"python3": "3", "pyyaml": "6"},
    )
    void = snapshot.write(captured, tmp_path)
    autograder.install(_bundle(tmp_path / "plain.zip"))
    _, before = autograder.run(snaps["solved"])
    assert before["score"] == MAX_SCORE
    proc, results = autograder.run(void, keep=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert results is None  # not even the previous submission's, left in a reused root
    assert "not in the snapshot" in proc.stdout and "not graded (not a zero)" in proc.stdout
    own = _gpushare("grade", "--snapshot", str(void), "--json", str(tmp_path / "void.json"))
    assert own.returncode == 2
    data = json.loads((tmp_path / "void.json").read_text())
    assert "score" not in data
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in data.items() if k != "max_score"}, SPEC)


def test_grade_json_matches_the_specification(snaps, tmp_path):
    """gpushare grade --json is the same file, with the top-level max_score of its own."""
    made = _gpushare("grade", "--snapshot", str(snaps["solved"]), "--json", str(tmp_path / "r"))
    assert made.returncode == 0, made.stderr
    data = json.loads((tmp_path / "r").read_text())
    assert data.pop("max_score") == MAX_SCORE
    jsonschema.validate(data, SPEC)
