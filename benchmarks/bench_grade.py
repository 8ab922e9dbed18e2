"""Wall time of a full `gpushare grade` on a solved lab, next to a plain kubectl script.

Both run against the same solved lab, alternately, so machine noise hits both alike; the ratio is
what matters (issue 4's target: under 1 s, at most half the kubectl script). CPU time (user +
system, children included) is printed too: on a two-core machine a grade is CPU-bound.

A grade runs the learner's ``bin/check-request.sh`` five times, and the reference script starts
``python3``, so which ``python3`` that is changes the figure a lot. A lab pod has a plain
interpreter; a developer machine may have a version manager's shim first on PATH (pyenv's costs
about 0.2 s a call). The grade is therefore timed with ``python3`` resolving to this project's
interpreter (plain, with PyYAML), and once more with PATH as inherited, and both are printed
with the interpreter they used. The grader's own interpreter is printed too: the same tree grades
some 10% slower under a version manager's default build than under Debian's (docs/performance.md,
"The interpreter").
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import figures  # benchmarks/: the figures make bench writes into docs/performance.md

from gpushare.grading import runner
from gpushare.lab import binaries, cluster, solve
from gpushare.locations import graders_dir

# the benchmarks' own lab, never a learner's (GPUSHARE_CLUSTER): it is reset between
# measurements, which would wipe a learner's work; ended when the benchmark is done
NAME = os.environ.get("GPUSHARE_BENCH_CLUSTER", "gpushare-bench")
HERE = Path(__file__).resolve().parent
ROUNDS = 9
CHECKS = runner.load_checks(graders_dir())  # counted, never listed by hand
SCRIPT_STEP = 6  # the step whose checks run the learner's bin/check-request.sh
OTHER_STEPS = sorted({c.meta["step"] for c in CHECKS} - {SCRIPT_STEP})


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children)."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    subprocess.run(cmd, capture_output=True, env=env, check=False)
    return time.perf_counter() - t0, _children_cpu() - cpu0


def median(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


def main() -> None:
    lab = cluster.up(NAME)
    cluster.reset(NAME)
    kubectl = binaries.find("kubectl")
    base = {**os.environ, "KUBECONFIG": str(lab.kubeconfig)}
    inherited_path = f"{kubectl.parent}:{os.environ['PATH']}"
    plain = {**base, "PATH": f"{Path(sys.executable).parent}:{inherited_path}"}
    inherited = {**base, "PATH": inherited_path}
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp) / "gpushare"
        solve.solve(wd, kubeconfig=str(lab.kubeconfig))
        gpushare = shutil.which("gpushare", path=str(Path(sys.executable).parent))
        grade = [
            *([gpushare] if gpushare else [sys.executable, "-m", "gpushare"]),
            "grade",
            "--kubeconfig",
            str(lab.kubeconfig),
            "--workdir",
            str(wd),
            "--seed",
            "1",
        ]
        script = ["bash", str(HERE / "kubectl_check.sh"), str(wd)]
        # the learner's real path: `make grade` (setup check, `gpushare up`, grade of the lab
        # named by GPUSHARE_CLUSTER, no --kubeconfig), and its grade step alone
        lab_env = {k: v for k, v in plain.items() if k != "KUBECONFIG"}
        lab_env["GPUSHARE_CLUSTER"] = NAME
        make_grade = ["make", "-s", "-C", str(HERE.parent), "grade", f"WORKDIR={wd}"]
        make_grade.append("GRADE_ARGS=--seed 1")
        lab_grade = [g for g in grade if g not in ("--kubeconfig", str(lab.kubeconfig))]
        # the same cluster through a kubeconfig that is not the lab's own file: the official
        # `kubernetes` loader and transport (what the fast path for the lab's file saves)
        copied = Path(tmp) / "copied.kubeconfig"
        shutil.copy(lab.kubeconfig, copied)
        official = [str(copied) if a == str(lab.kubeconfig) else a for a in grade]
        no_runs = [*grade, *[f"--step={n}" for n in OTHER_STEPS]]
        learner = [
            str(wd / "bin/check-request.sh"),
            str(HERE.parent / "fixtures/check-request/over.yaml"),
        ]
        # a submission as a file: capture it, then grade it with no cluster (in the sandbox)
        gpushare_cmd = [*([gpushare] if gpushare else [sys.executable, "-m", "gpushare"])]
        snap_dir = Path(tmp) / "snapshots"
        capture = [*gpushare_cmd, "snapshot", "--kubeconfig", str(lab.kubeconfig)]
        capture += ["--workdir", str(wd), "--out", str(snap_dir)]
        made = subprocess.run(capture, capture_output=True, text=True, env=plain, check=True)
        offline = [*gpushare_cmd, "grade", "--snapshot", made.stdout.strip(), "--seed", "1"]
        timed(grade, plain), timed(script, plain)  # warm the page cache
        ours, theirs, without, one_run = [], [], [], []
        makes, lab_path, loader, captures, offlines = [], [], [], [], []
        for _ in range(ROUNDS):
            ours.append(timed(grade, plain))
            theirs.append(timed(script, plain))
            without.append(timed(no_runs, plain))
            one_run.append(timed(learner, plain))
            makes.append(timed(make_grade, lab_env))
            lab_path.append(timed(lab_grade, lab_env))
            loader.append(timed(official, plain))
            captures.append(timed(capture, plain))
            offlines.append(timed(offline, plain))
        shim = [timed(grade, inherited) for _ in range(3)]
        shim_run = [timed(learner, inherited) for _ in range(3)]
    startup = median([timed([sys.executable, "-c", "pass"], plain) for _ in range(5)])
    g, k = median(ours), median(theirs)
    without_n = sum(c.meta["step"] != SCRIPT_STEP for c in CHECKS)
    python_plain = shutil.which("python3", path=plain["PATH"])
    python_inherited = shutil.which("python3", path=inherited["PATH"])
    rows = [
        (f"gpushare grade ({len(CHECKS)} checks, 5 script runs)", g),
        ("kubectl_check.sh (11 checks, 10 kubectl)", k),
        (f"gpushare grade without step {SCRIPT_STEP} ({without_n} checks)", median(without)),
        ("make grade (the learner's path, no --kubeconfig)", median(makes)),
        ("gpushare grade of the lab, no --kubeconfig", median(lab_path)),
        ("gpushare grade, official kubeconfig loader", median(loader)),
        ("gpushare snapshot (capture, target < 1 s)", median(captures)),
        ("gpushare grade --snapshot (offline, target < 1 s)", median(offlines)),
        ("one run of the learner's check-request.sh", median(one_run)),
        ("python -c pass", startup),
    ]
    interpreter = os.path.realpath(sys.executable)
    print(f"grader's python: {interpreter} ({platform.python_version()})")
    print(f"learner's python3: {python_plain}")
    print(f"{'what':<50}{'wall s':>9}{'cpu s':>9}")
    for name, (wall, cpu) in rows:
        print(f"{name:<50}{wall:>9.3f}{cpu:>9.3f}")
    print(f"{'ratio grade / kubectl script (wall)':<50}{g[0] / k[0]:>9.2f}   target <= 0.5")
    lab_ratio = median(lab_path)[0] / k[0]
    label = "ratio lab grade, no --kubeconfig / kubectl script"
    print(f"{label:<50}{lab_ratio:>9.2f}   target <= 0.5")
    _record(rows, g[0] / k[0], lab_ratio)
    print(f"\nlearner's python3 as PATH has it: {python_inherited}")
    for name, (wall, cpu) in (
        ("gpushare grade", median(shim)),
        ("one run of the learner's check-request.sh", median(shim_run)),
    ):
        print(f"{name:<50}{wall:>9.3f}{cpu:>9.3f}")


def _record(rows: list[tuple[str, tuple[float, float]]], ratio: float, lab_ratio: float) -> None:
    """The figures of docs/performance.md this benchmark measures (rows as printed)."""
    (grade, script, without, make, _, loader, capture, offline) = (r[1] for r in rows[:8])

    def secs(t: tuple[float, float]) -> str:
        return f"{t[0]:.3f} s, {t[1]:.2f} s CPU"

    figures.record(
        "grade",
        f"full `gpushare grade` ({len(CHECKS)} checks, 5 sandboxed script runs)",
        secs(grade),
        "< 1 s",
    )
    figures.record(
        "ratio",
        f"the same, as a ratio to `benchmarks/kubectl_check.sh` ({script[0]:.3f} s)",
        f"{ratio:.2f}",
        "<= 0.5",
    )
    figures.record(
        "lab_ratio",
        "the lab graded by name, no `--kubeconfig` (what `make grade` runs), as that ratio",
        f"{lab_ratio:.2f}",
        "<= 0.5",
    )
    figures.record("without_6", f"`gpushare grade` without step {SCRIPT_STEP}", secs(without))
    figures.record(
        "make_grade", "`make grade` (the learner's path: the install check, the grade)", secs(make)
    )
    figures.record(
        "official",
        "`gpushare grade` through the official `kubernetes` loader (a kubeconfig not the lab's)",
        secs(loader),
    )
    figures.record("capture", "`gpushare snapshot` (capture)", secs(capture), "< 1 s")
    figures.record(
        "offline", "`gpushare grade --snapshot` (offline, sandboxed)", secs(offline), "< 1 s"
    )


if __name__ == "__main__":
    try:
        main()
    finally:
        cluster.down(NAME)
