"""A hard deadline (issue 11): ``--timeout`` keeps what finished, makes the rest errors that
say what was still running, writes the outputs, exits 2 and leaves nothing running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from tests.helpers import ALL_CHECKS, ROOT, _gpushare, processes_with


def _hanging_workdir(state, copy_workdir):
    workdir = copy_workdir(state.solve())
    script = workdir / "bin/check-request.sh"
    script.write_text(f"#!/bin/sh\n# {workdir.name}-hangs\nexec sleep 1000\n")
    script.chmod(0o755)
    return workdir


def test_timeout_gives_partial_results_and_ends_everything(lab, state, tmp_path, copy_workdir):
    workdir = _hanging_workdir(state, copy_workdir)
    out, xml = tmp_path / "r.json", tmp_path / "j.xml"
    t0 = time.monotonic()
    args = ["--kubeconfig", str(lab.kubeconfig), "--workdir", str(workdir), "--timeout", "2"]
    args += ["--lang", "en", "--json", str(out), "--junitxml", str(xml), "--seed", "1"]
    proc = subprocess.run(
        [sys.executable, "-m", "gpushare", "grade", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert took < 8, took
    assert "time limit" in proc.stderr
    results = json.loads(out.read_text())
    tests = {t["number"]: t for t in results["tests"]}
    assert set(tests) == ALL_CHECKS
    finished = [t for t in tests.values() if not t["extra_data"]["timed_out"]]
    unfinished = [t for t in tests.values() if t["extra_data"]["timed_out"]]
    assert len(finished) >= 20 and all(t["status"] == "passed" for t in finished)
    assert {t["number"] for t in unfinished} >= {"6.2", "7.1", "8.1"}
    running = [t for t in unfinished if "still running" in t["output"]]
    assert len(running) == 1 and running[0]["number"].startswith("6.")
    assert results["score"] == sum(t["score"] for t in finished)
    assert results["extra_data"]["timed_out"] is True
    suite = ET.parse(xml).getroot().find("testsuite")
    assert int(suite.get("errors")) == len(unfinished)
    time.sleep(0.5)
    assert processes_with(f"{workdir.name}-hangs") == []
    assert not [p for p in processes_with("sleep 1000") if p.ppid() == os.getpid()]


def test_timeout_applies_to_a_snapshot_too(lab, state, tmp_path, copy_workdir):
    workdir = _hanging_workdir(state, copy_workdir)
    made = _gpushare(
        "snapshot",
        "--kubeconfig",
        str(lab.kubeconfig),
        "--workdir",
        str(workdir),
        "--out",
        str(tmp_path),
    )
    assert made.returncode == 0, made.stderr
    out = tmp_path / "r.json"
    t0 = time.monotonic()
    proc = _gpushare(
        "grade", "--snapshot", made.stdout.strip(), "--timeout", "2", "--json", str(out)
    )
    assert proc.returncode == 2 and time.monotonic() - t0 < 8
    results = json.loads(out.read_text())
    assert results["extra_data"]["timed_out"] is True
    assert any(t["extra_data"]["timed_out"] for t in results["tests"])
    time.sleep(0.5)
    assert processes_with(f"{workdir.name}-hangs") == []
