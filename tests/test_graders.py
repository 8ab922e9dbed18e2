"""The graders against a real lab (issue 3): fresh fails, solved passes, every mutant is caught
exactly where it should be, valid alternatives pass, hostile input costs only its check.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpushare.lab import cluster
from gpushare.labkit import Kit
from tests.helpers import ALL_CHECKS, MAX_SCORE, ROOT, _gpushare, kubectl, run_grade
from tests.mutants import (
    CLUSTER_MUTANTS,
    FILE_MUTANTS,
    HOSTILE_FILE_FAILS,
    Mutant,
    break_files,
    play_alternatives,
)

KIT = Kit(ROOT)  # the lab's gates (gpushare.labkit), as another lab's tests call them


def test_fresh_lab_fails_every_check(lab, state, tmp_path):
    state.fresh()
    empty = tmp_path / "empty-workdir"
    empty.mkdir()
    run = run_grade(lab, empty, tmp_path)
    assert run.rc == 1, run.stderr
    assert run.results["score"] == 0
    assert run.results["max_score"] == MAX_SCORE
    assert {t["number"] for t in run.results["tests"]} == ALL_CHECKS
    assert run.failed() == ALL_CHECKS
    assert run.grader_errors() == []
    for t in run.results["tests"]:
        assert t["output"].strip(), f"{t['number']} failed without feedback"


def test_reference_solution_gets_full_score(lab, state, tmp_path):
    workdir = state.solve()
    run = run_grade(lab, workdir, tmp_path)
    assert run.failed() == set(), [run.test(n)["output"] for n in run.failed()]
    assert run.rc == 0
    assert run.results["score"] == MAX_SCORE


def test_every_check_is_targeted_by_a_mutant():
    assert KIT.untargeted(FILE_MUTANTS + CLUSTER_MUTANTS) == []
    assert KIT.unknown(FILE_MUTANTS + CLUSTER_MUTANTS) == []


def _check_mutant(run, mutant: Mutant) -> None:
    assert run.grader_errors() == [], run.grader_errors()
    assert run.failed() == mutant.fails, {n: run.test(n)["output"] for n in run.failed()}
    assert run.rc == 1
    steps = {n.split(".")[0] for n in mutant.fails}
    for n in mutant.fails:
        assert run.test(n)["output"].strip()
    assert steps, mutant.id


@pytest.mark.parametrize("mutant", FILE_MUTANTS, ids=lambda m: m.id)
def test_file_mutant_is_caught(lab, state, tmp_path, copy_workdir, mutant):
    workdir = copy_workdir(state.solve())
    mutant.files(workdir)
    _check_mutant(run_grade(lab, workdir, tmp_path), mutant)


@pytest.mark.parametrize("mutant", CLUSTER_MUTANTS, ids=lambda m: m.id)
def test_cluster_mutant_is_caught(lab, state, tmp_path, copy_workdir, mutant):
    workdir = copy_workdir(state.solve())
    state.dirty()
    mutant.cluster(lab, workdir)
    _check_mutant(run_grade(lab, workdir, tmp_path), mutant)


# --- valid alternatives -----------------------------------------------------------------


def test_valid_alternatives_get_full_score(lab, state, tmp_path):
    workdir = play_alternatives(lab, state, tmp_path)
    run = run_grade(lab, workdir, tmp_path)
    assert run.failed() == set(), {n: run.test(n)["output"] for n in run.failed()}
    assert run.results["score"] == MAX_SCORE


# --- hostile input ----------------------------------------------------------------------

HOSTILE_SCRIPTS = {
    "sleeps forever": "#!/bin/sh\nexec sleep 1000\n",
    "forks a daemon": (
        "#!/bin/bash\n( setsid bash -c 'echo $$ >> \"$MARK\"; exec sleep 1000' & ) \necho OK\n"
    ),
    "floods its output": "#!/bin/sh\nexec yes OVER=flood=9\n",
    "is binary garbage": "\x7fELF\x00\x00garbage",
}


def _marked_processes(mark: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["environ"]):
        try:
            if (p.info["environ"] or {}).get("MARK") == mark:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


@pytest.mark.parametrize("kind", list(HOSTILE_SCRIPTS))
def test_hostile_script_costs_only_step_6(lab, state, tmp_path, copy_workdir, kind, monkeypatch):
    workdir = copy_workdir(state.solve())
    mark = str(tmp_path / "daemon-pids")
    monkeypatch.setenv("MARK", mark)
    script = workdir / "bin/check-request.sh"
    script.write_bytes(HOSTILE_SCRIPTS[kind].encode("latin-1"))
    script.chmod(0o755)
    t0 = time.monotonic()
    run = run_grade(lab, workdir, tmp_path, same_words=kind != "forks a daemon")
    elapsed = time.monotonic() - t0
    try:
        assert run.grader_errors() == []
        assert run.failed() and run.failed() <= {"6.2", "6.3", "6.4", "6.5"}, run.failed()
        assert elapsed < 60, f"a hostile script held the grade for {elapsed:.0f}s"
        assert _marked_processes(mark) == []
        if Path(mark).exists():
            for pid in map(int, Path(mark).read_text().split()):
                assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    finally:
        for p in _marked_processes(mark):
            p.kill()


def test_hostile_files_cost_only_their_checks(lab, state, tmp_path, copy_workdir):
    workdir = copy_workdir(state.solve())
    break_files(workdir)
    run = run_grade(lab, workdir, tmp_path)
    assert run.grader_errors() == []
    assert run.failed() == HOSTILE_FILE_FAILS
    assert "k8s/mig-job.yaml:4" in run.test("4.1")["output"]
    assert "column" in run.test("4.1")["output"]
    assert "binary" in run.test("7.2")["output"]
    assert (
        "UTF-8" in run.test("8.3")["output"] and "out/placement.txt:2" in run.test("8.3")["output"]
    )
    assert "directory" in run.test("5.1")["output"]
    assert "/dev/zero" in run.test("5.4")["output"]  # a link out of the work dir


def _cluster_fingerprint(client) -> dict:
    """Everything a grade could change: objects' resourceVersions, nodes' labels and status."""
    fp = {}
    for path in (
        "/api/v1/namespaces",
        "/api/v1/pods",
        "/api/v1/configmaps",
        "/api/v1/resourcequotas",
        "/api/v1/serviceaccounts",
    ):
        for item in client.get(path)["items"]:
            meta = item["metadata"]
            fp[(path, meta.get("namespace"), meta["name"])] = meta["resourceVersion"]
    for node in client.get("/api/v1/nodes")["items"]:
        fp[("node", node["metadata"]["name"])] = (
            node["metadata"].get("labels"),
            node["status"].get("capacity"),
            node["status"].get("allocatable"),
            node["spec"],
        )
    return fp


def _tree_fingerprint(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        data = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
        out[str(p.relative_to(root))] = (st.st_mode, st.st_mtime_ns, data)
    return out


def test_grading_is_read_only(lab, state, client, tmp_path):
    workdir = state.solve()
    before = (_cluster_fingerprint(client), _tree_fingerprint(workdir))
    for _ in range(2):
        run = run_grade(lab, workdir, tmp_path)
        assert run.rc == 0
    after = (_cluster_fingerprint(client), _tree_fingerprint(workdir))
    assert before == after


def test_grading_the_lab_by_name_neither_starts_nor_repairs_it(lab, state, client, tmp_path):
    """No --kubeconfig (the learner's `make grade`): the lab is graded as it is. A node the
    learner deleted stays deleted and costs its checks; a lab that is not up is exit 2."""
    workdir = state.solve()
    state.dirty()  # the node comes back with the next reset
    client.delete("/api/v1/nodes/lab-node-2")
    before = _cluster_fingerprint(client)
    env = {"GPUSHARE_CLUSTER": lab.name}
    proc = _gpushare("grade", "--workdir", str(workdir), "--lang", "en", "--seed", "3", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "lab-node-2" in proc.stdout
    assert _cluster_fingerprint(client) == before
    assert "lab-node-2" not in {n["metadata"]["name"] for n in client.get("/api/v1/nodes")["items"]}

    absent = f"gpushare-test-absent-{os.getpid()}"
    proc = _gpushare("grade", "--workdir", str(workdir), env={"GPUSHARE_CLUSTER": absent})
    assert proc.returncode == 2
    assert f"the lab {absent} does not exist" in proc.stderr and lab.name in proc.stderr
    pytest_run = subprocess.run(
        [sys.executable, "-m", "pytest", "graders", "--workdir", str(workdir), "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
            "GPUSHARE_CLUSTER": absent,
        },
        timeout=120,
    )
    assert pytest_run.returncode == 2, pytest_run.stdout + pytest_run.stderr
    assert f"the lab {absent} does not exist" in pytest_run.stdout + pytest_run.stderr
    assert not cluster.Lab(absent).dir.exists()


def test_a_missing_work_dir_is_said_once_first_and_no_file_is_called_missing(lab, state, tmp_path):
    """The learner's default /root/gpushare, or a WORKDIR= typo: the grade's first line says the
    folder does not exist and how to name another; no file check says its file is missing."""
    gone = tmp_path / "nowhere"
    proc = _gpushare(
        "grade",
        "--kubeconfig",
        str(lab.kubeconfig),
        "--workdir",
        str(gone),
        "--lang",
        "en",
        "--color",
        "no",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first, *rest = proc.stdout.splitlines()
    assert f"{gone} does not exist" in first and "WORKDIR=DIR" in first and "--workdir" in first
    assert "The file does not exist." not in proc.stdout
    assert "bin/check-request.sh does not exist" not in proc.stdout
    assert sum(f"{gone} does not exist (see the first line)" in line for line in rest) >= 2


def test_pytest_graders_gives_the_same_checks_and_score(lab, state, tmp_path):
    """The instructor's entry point: pytest graders/ with the same options."""
    workdir = state.solve()
    via_cli = run_grade(lab, workdir, tmp_path, seed=11)
    json_path = tmp_path / "pytest.json"
    proc = subprocess.run(
        [
            "python",
            "-m",
            "pytest",
            "graders",
            "--kubeconfig",
            str(lab.kubeconfig),
            "--workdir",
            str(workdir),
            "--json",
            str(json_path),
            "--seed",
            "11",
            "--lang",
            "en",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PATH": os.path.dirname(os.sys.executable) + ":" + os.environ["PATH"]},
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    import json

    via_pytest = json.loads(json_path.read_text())
    strip = lambda r: [(t["number"], t["score"], t["status"]) for t in r["tests"]]  # noqa: E731
    assert strip(via_pytest) == strip(via_cli.results)
    assert via_pytest["score"] == via_cli.results["score"] == MAX_SCORE


def test_unreachable_cluster_exits_2_with_one_line(tmp_path):
    kubeconfig = tmp_path / "dead.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
        "clusters:\n- name: dead\n  cluster:\n    server: https://127.0.0.1:1\n"
        "    insecure-skip-tls-verify: true\n"
        "contexts:\n- name: dead\n  context:\n    cluster: dead\n    user: u\n"
        "users:\n- name: u\n  user:\n    token: x\n"
    )
    for cmd in (
        [
            "python",
            "-m",
            "gpushare",
            "grade",
            "--kubeconfig",
            str(kubeconfig),
            "--workdir",
            str(tmp_path),
        ],
        [
            "python",
            "-m",
            "pytest",
            "graders",
            "--kubeconfig",
            str(kubeconfig),
            "--workdir",
            str(tmp_path),
            "-p",
            "no:cacheprovider",
        ],
    ):
        t0 = time.monotonic()
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            env={
                **os.environ,
                "PATH": os.path.dirname(os.sys.executable) + ":" + os.environ["PATH"],
            },
        )
        elapsed = time.monotonic() - t0
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        text = proc.stdout + proc.stderr
        assert "https://127.0.0.1:1" in text and "could not grade" in text
        assert "--kubeconfig" in text  # names what was asked for, and how to ask for another
        assert "Traceback" not in text
        assert elapsed < 30
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    cli = subprocess.run(
        ["python", "-m", "gpushare", "grade", "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "PATH": os.path.dirname(os.sys.executable) + ":" + os.environ["PATH"]},
    )
    assert len([ln for ln in cli.stderr.splitlines() if ln.strip()]) == 1, cli.stderr
    assert lines is not None


def test_cli_solve_and_reset_round_trip(lab, state, tmp_path):
    """``gpushare solve`` and ``gpushare reset`` as an instructor types them."""
    env = {**os.environ, "PATH": os.path.dirname(os.sys.executable) + ":" + os.environ["PATH"]}
    wd = tmp_path / "cli-solve"
    subprocess.run(
        ["python", "-m", "gpushare", "solve", "--cluster", lab.name, "--workdir", str(wd)],
        check=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=300,
    )
    state.dirty()
    assert run_grade(lab, wd, tmp_path).results["score"] == MAX_SCORE
    subprocess.run(
        ["python", "-m", "gpushare", "reset", "--cluster", lab.name],
        check=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert run_grade(lab, wd, tmp_path).results["score"] < MAX_SCORE
    assert kubectl(lab, "get", "ns", "gpu-share", check=False).returncode != 0
    assert cluster.Lab(lab.name).exists()
