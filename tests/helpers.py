"""Helpers shared by the project's tests: kubectl, grading as a subprocess, lab state."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushare import binaries, cluster, solve

ROOT = Path(__file__).resolve().parents[1]
TEST_CLUSTER = os.environ.get("GPUSHARE_TEST_CLUSTER", "gpushare-test")


def kubectl(lab: cluster.Lab, *args: str, check: bool = True, input: str | None = None):
    """Run our pinned kubectl against the test lab (as a learner would)."""
    exe = binaries.find("kubectl")
    assert exe is not None, "kubectl is not built: run make setup"
    return subprocess.run(
        [str(exe), "--kubeconfig", str(lab.kubeconfig), *args],
        capture_output=True,
        text=True,
        check=check,
        input=input,
        timeout=120,
    )


@dataclass
class GradeRun:
    rc: int
    stdout: str
    stderr: str
    results: dict[str, Any] | None

    def failed(self) -> set[str]:
        assert self.results is not None, self.stderr
        return {t["number"] for t in self.results["tests"] if t["status"] != "passed"}

    def test(self, number: str) -> dict[str, Any]:
        assert self.results is not None, self.stderr
        return next(t for t in self.results["tests"] if t["number"] == number)

    def grader_errors(self) -> list[str]:
        assert self.results is not None, self.stderr
        return [t["number"] for t in self.results["tests"] if t["extra_data"]["grader_error"]]


def run_grade(
    lab: cluster.Lab,
    workdir: Path,
    tmp_path: Path,
    *extra: str,
    lang: str = "en",
    seed: int = 7,
    timeout: float = 120,
) -> GradeRun:
    """``gpushare grade`` as an LMS would run it: a subprocess, results.json read back."""
    out = tmp_path / f"results-{len(list(tmp_path.glob('results-*.json')))}.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushare",
            "grade",
            "--kubeconfig",
            str(lab.kubeconfig),
            "--workdir",
            str(workdir),
            "--json",
            str(out),
            "--lang",
            lang,
            "--seed",
            str(seed),
            "--color",
            "no",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    results = json.loads(out.read_text()) if out.exists() else None
    return GradeRun(proc.returncode, proc.stdout, proc.stderr, results)


class LabState:
    """Tracks whether the test lab currently holds the reference solution."""

    def __init__(self, lab: cluster.Lab, workdir: Path) -> None:
        self.lab = lab
        self.workdir = workdir
        self.solved = False

    def fresh(self) -> None:
        cluster.reset(self.lab.name)
        self.solved = False

    def solve(self) -> Path:
        """Reset and apply the reference solution, unless the lab is known to hold it."""
        if not self.solved:
            cluster.reset(self.lab.name)
            if self.workdir.exists():
                shutil.rmtree(self.workdir)
            solve.solve(self.workdir, kubeconfig=str(self.lab.kubeconfig))
            self.solved = True
        return self.workdir

    def dirty(self) -> None:
        self.solved = False
