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
some 10% slower under a version manager's default build than under Debian's (README, "Measured").
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


def commands(lab: cluster.Lab, wd: Path, tmp: Path, env: dict[str, str]) -> dict[str, list[str]]:
    """What is timed, each against the same solved lab (``env``: the plain one)."""
    gpushare = shutil.which("gpushare", path=str(Path(sys.executable).parent))
    gpushare_cmd = [gpushare] if gpushare else [sys.executable, "-m", "gpushare"]
    grade = [*gpushare_cmd, "grade", "--kubeconfig", str(lab.kubeconfig), "--workdir", str(wd)]
    grade += ["--seed", "1"]
    # the learner's real path: `make grade` (setup check, `gpushare up`, grade of the lab
    # named by GPUSHARE_CLUSTER, no --kubeconfig), and its grade step alone
    make_grade = ["make", "-s", "-C", str(HERE.parent), "grade", f"WORKDIR={wd}"]
    make_grade.append("GRADE_ARGS=--seed 1")
    # the same cluster through a kubeconfig that is not the lab's own file: the official
    # `kubernetes` loader and transport (what the fast path for the lab's file saves)
    copied = tmp / "copied.kubeconfig"
    shutil.copy(lab.kubeconfig, copied)
    # a submission as a file: capture it, then grade it with no cluster (in the sandbox)
    capture = [*gpushare_cmd, "snapshot", "--kubeconfig", str(lab.kubeconfig)]
    capture += ["--workdir", str(wd), "--out", str(tmp / "snapshots")]
    made = subprocess.run(capture, capture_output=True, text=True, env=env, check=True)
    return {
        "grade": grade,
        "script": ["bash", str(HERE / "kubectl_check.sh"), str(wd)],
        "without": [*grade, *[f"--step={n}" for n in OTHER_STEPS]],
        "one_run": [
            str(wd / "bin/check-request.sh"),
            str(HERE.parent / "fixtures/check-request/over.yaml"),
        ],
        "make": make_grade,
        "lab_path": [g for g in grade if g not in ("--kubeconfig", str(lab.kubeconfig))],
        "loader": [str(copied) if a == str(lab.kubeconfig) else a for a in grade],
        "capture": capture,
        "offline": [*gpushare_cmd, "grade", "--snapshot", made.stdout.strip(), "--seed", "1"],
    }


def main() -> None:
    lab = cluster.up(NAME)
    cluster.reset(NAME)
    kubectl = binaries.find("kubectl")
    base = {**os.environ, "KUBECONFIG": str(lab.kubeconfig)}
    inherited_path = f"{kubectl.parent}:{os.environ['PATH']}"
    plain = {**base, "PATH": f"{Path(sys.executable).parent}:{inherited_path}"}
    inherited = {**base, "PATH": inherited_path}
    lab_env = {k: v for k, v in plain.items() if k != "KUBECONFIG"}
    lab_env["GPUSHARE_CLUSTER"] = NAME
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp) / "gpushare"
        solve.solve(wd, kubeconfig=str(lab.kubeconfig))
        cmds = commands(lab, wd, Path(tmp), plain)
        envs = {key: lab_env if key in ("make", "lab_path") else plain for key in cmds}
        timed(cmds["grade"], plain), timed(cmds["script"], plain)  # warm the page cache
        samples: dict[str, list[tuple[float, float]]] = {key: [] for key in cmds}
        for _ in range(ROUNDS):
            for key, cmd in cmds.items():
                samples[key].append(timed(cmd, envs[key]))
        shim = [timed(cmds["grade"], inherited) for _ in range(3)]
        shim_run = [timed(cmds["one_run"], inherited) for _ in range(3)]
    startup = median([timed([sys.executable, "-c", "pass"], plain) for _ in range(5)])
    python_plain = shutil.which("python3", path=plain["PATH"])
    report({key: median(v) for key, v in samples.items()}, startup, python_plain)
    python_inherited = shutil.which("python3", path=inherited["PATH"])
    print(f"\nlearner's python3 as PATH has it: {python_inherited}")
    for name, (wall, cpu) in (
        ("gpushare grade", median(shim)),
        ("one run of the learner's check-request.sh", median(shim_run)),
    ):
        print(f"{name:<50}{wall:>9.3f}{cpu:>9.3f}")


def report(
    m: dict[str, tuple[float, float]], startup: tuple[float, float], python3: str | None
) -> None:
    """The table of medians and the two ratios to the kubectl script (target <= 0.5)."""
    g, k = m["grade"], m["script"]
    without_n = sum(c.meta["step"] != SCRIPT_STEP for c in CHECKS)
    rows = [
        (f"gpushare grade ({len(CHECKS)} checks, 5 script runs)", g),
        ("kubectl_check.sh (11 checks, 10 kubectl)", k),
        (f"gpushare grade without step {SCRIPT_STEP} ({without_n} checks)", m["without"]),
        ("make grade (the learner's path, no --kubeconfig)", m["make"]),
        ("gpushare grade of the lab, no --kubeconfig", m["lab_path"]),
        ("gpushare grade, official kubeconfig loader", m["loader"]),
        ("gpushare snapshot (capture, target < 1 s)", m["capture"]),
        ("gpushare grade --snapshot (offline, target < 1 s)", m["offline"]),
        ("one run of the learner's check-request.sh", m["one_run"]),
        ("python -c pass", startup),
    ]
    interpreter = os.path.realpath(sys.executable)
    print(f"grader's python: {interpreter} ({platform.python_version()})")
    print(f"learner's python3: {python3}")
    print(f"{'what':<50}{'wall s':>9}{'cpu s':>9}")
    for name, (wall, cpu) in rows:
        print(f"{name:<50}{wall:>9.3f}{cpu:>9.3f}")
    print(f"{'ratio grade / kubectl script (wall)':<50}{g[0] / k[0]:>9.2f}   target <= 0.5")
    label = "ratio lab grade, no --kubeconfig / kubectl script"
    print(f"{label:<50}{m['lab_path'][0] / k[0]:>9.2f}   target <= 0.5")


if __name__ == "__main__":
    try:
        main()
    finally:
        cluster.down(NAME)
