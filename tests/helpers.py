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

from gpushare.lab import binaries, cluster, solve

ROOT = Path(__file__).resolve().parents[1]


def discovered_checks() -> dict[str, int]:
    """Every check of graders/ and its points: what a grade must hold, never listed by hand."""
    from gpushare.grading import runner
    from gpushare.locations import graders_dir

    return {c.meta["number"]: c.meta["points"] for c in runner.load_checks(graders_dir())}


ALL_CHECKS = set(discovered_checks())
MAX_SCORE = sum(discovered_checks().values())
# A lab of this run's own (pid + random), so two checkouts, CI and a learner's lab can run tests
# at the same time; GPUSHARE_TEST_CLUSTER names one to reuse (with GPUSHARE_TEST_KEEP=1).
TEST_CLUSTER = os.environ.get("GPUSHARE_TEST_CLUSTER") or (
    f"gpushare-test-{os.getpid()}-{os.urandom(2).hex()}"
)


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
    offline: bool = True,
    same_words: bool = True,
) -> GradeRun:
    """``gpushare grade`` as an LMS would run it: a subprocess, results.json read back.

    With ``offline`` (the default) the same moment is also captured with ``gpushare snapshot``
    and the snapshot graded with no cluster and no control-plane binaries at all; every
    verdict and every word of feedback must be the same as the live grade's (issue 9).
    """
    n = len(list(tmp_path.glob("results-*.json")))
    out = tmp_path / f"results-{n}.json"
    options = ["--json", str(out), "--lang", lang, "--seed", str(seed), "--color", "no"]
    cluster_args = ["--kubeconfig", str(lab.kubeconfig), "--workdir", str(workdir)]
    proc = _gpushare("grade", *cluster_args, *options, *extra, timeout=timeout)
    results = json.loads(out.read_text()) if out.exists() else None
    run = GradeRun(proc.returncode, proc.stdout, proc.stderr, results)
    if offline and results is not None:
        snap = _gpushare("snapshot", *cluster_args, "--out", str(tmp_path / f"snap-{n}"))
        assert snap.returncode == 0, snap.stderr
        graded = grade_snapshot(Path(snap.stdout.strip()), tmp_path, *options[2:], *extra)
        assert graded.rc == run.rc, graded.stderr
        if same_words:
            assert verdicts(graded.results) == verdicts(results)
        else:  # a script whose output is racy (a daemon writing after it exited)
            assert verdicts(graded.results, words=False) == verdicts(results, words=False)
    return run


def verdicts(results: dict[str, Any], words: bool = True) -> list[tuple[Any, ...]]:
    """What a grade decided, check by check, with the learner's feedback (``words``)."""
    return [
        (t["number"], t["status"], t.get("score"), t["output"] if words else None)
        for t in results["tests"]
    ]


def grade_snapshot(snapshot: Path, tmp_path: Path, *extra: str) -> GradeRun:
    """``gpushare grade --snapshot`` with no lab and no control-plane binaries reachable: an
    empty cache folder, and no kubeconfig in the environment."""
    n = len(list(tmp_path.glob("offline-*.json")))
    out = tmp_path / f"offline-{n}.json"
    empty = tmp_path / f"empty-cache-{n}"
    empty.mkdir()
    proc = _gpushare(
        "grade",
        "--snapshot",
        str(snapshot),
        "--json",
        str(out),
        "--color",
        "no",
        *extra,
        env={"GPUSHARE_CACHE": str(empty), "GPUSHARE_CLUSTER": "no-such-lab"},
    )
    assert not any(empty.iterdir()), "grading a snapshot touched the lab cache"
    results = json.loads(out.read_text()) if out.exists() else None
    return GradeRun(proc.returncode, proc.stdout, proc.stderr, results)


def _gpushare(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "gpushare", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=environ,
    )


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


def processes_with(marker: str) -> list[Any]:
    """Live processes whose command line holds ``marker`` (what a grade must leave none of)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found
