"""`gpushare class grade` of 200 snapshots on 2 cores, and what one submission costs.

The snapshots are real: a few are captured from a lab (the reference solution and variants a
learner could hand in: a script that says OK to everything, a missing quota file, a wrong
table, a fresh lab), and each is copied under other learner ids with a file of its own added,
so all 200 have different content hashes (and so different unseen-case seeds). The class is
graded as ``gpushare class grade`` grades it, with two worker processes pinned to two cores.

Printed: submissions per second (issue 10's target: at least 3), and per submission the wall
time and CPU time split into ours (unpacking, the recorded cluster, the checks, the outputs)
and the learner's (``check-request.sh`` runs, five per grade, under the sandbox); beside them,
the alternative without snapshots: replay the submission into a lab (reset it, apply the
learner's objects) and run ``gpushare grade`` on it, one submission at a time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.class_snapshots: the real variants the tests use

from tests import class_snapshots as snaps  # noqa: E402

from gpushare.classroom import batch  # noqa: E402
from gpushare.lab import cluster, solve  # noqa: E402
from gpushare.sandbox import isolation  # noqa: E402

# the benchmarks' own lab, never a learner's (GPUSHARE_CLUSTER): it is reset between
# measurements, which would wipe a learner's work; ended when the benchmark is done
NAME = os.environ.get("GPUSHARE_BENCH_CLUSTER", "gpushare-bench")
COUNT = int(os.environ.get("BENCH_CLASS_COUNT", "200"))
REPLAYS = 3
TARGET = 3.0


def bases(lab: cluster.Lab, tmp: Path) -> list[Path]:
    """Real snapshots of the lab: solved and variants, then a fresh lab."""
    out = tmp / "bases"
    wd = tmp / "solved"
    kubeconfig = str(lab.kubeconfig)
    cluster.reset(lab.name)
    solve.solve(wd, kubeconfig=kubeconfig)
    found = [
        snaps.capture_variant(wd, out, "solved", kubeconfig),
        snaps.capture_variant(wd, out, "script", kubeconfig, snaps.broken_script),
        snaps.capture_variant(wd, out, "quota", kubeconfig, snaps.no_quota_file),
        snaps.capture_variant(wd, out, "table", kubeconfig, snaps.wrong_table),
    ]
    cluster.reset(lab.name)
    (tmp / "empty").mkdir()
    found.append(snaps.capture_variant(tmp / "empty", out, "fresh", kubeconfig))
    return found


def replay_grade(lab: cluster.Lab, tmp: Path) -> list[float]:
    """The alternative without snapshots: per submission, reset the lab, replay the learner's
    work into it (the reference solution's kubectl steps), then ``gpushare grade``."""
    times = []
    for i in range(REPLAYS):
        wd = tmp / f"replay-{i}"
        t0 = time.perf_counter()
        cluster.reset(lab.name)
        solve.solve(wd, kubeconfig=str(lab.kubeconfig))
        command = [sys.executable, "-m", "gpushare", "grade", "--kubeconfig", str(lab.kubeconfig)]
        subprocess.run(
            [*command, "--workdir", str(wd), "--json", str(tmp / f"replay-{i}.json")],
            capture_output=True,
            check=False,
            cwd=ROOT,
        )
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    with contextlib.suppress(AttributeError, OSError):  # two cores, as the target says
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:2]))
    cores = len(os.sched_getaffinity(0))
    unsafe = not isolation.probe().available
    lab = cluster.up(NAME)
    with tempfile.TemporaryDirectory(prefix="gpushare-bench-class-") as name:
        tmp = Path(name)
        made = bases(lab, tmp)
        subs = tmp / "class"
        subs.mkdir()
        for i in range(COUNT):
            snaps.respin(made[i % len(made)], subs, f"learner-{i:03d}", f"salt {i}")
        print(f"class grade of {COUNT} snapshots ({len(made)} real ones, respun), {cores} cores,")
        print(f"  learners' scripts {'WITHOUT sandbox' if unsafe else 'in the bwrap sandbox'}")
        load0 = os.getloadavg()[0]
        own0 = os.times()
        t0 = time.perf_counter()
        opts = batch.ClassOptions(jobs=cores, lang="en", unsafe_no_sandbox=unsafe)
        run = batch.grade_class([subs], tmp / "out", opts)
        wall = time.perf_counter() - t0
        own1 = os.times()
        parent = (own1.user - own0.user) + (own1.system - own0.system)
        errors = len(run.errors)
        rate = COUNT / wall
        costs = run.costs
        mean = {k: statistics.fmean(c[k] for c in costs) for k in costs[0]} if costs else {}
        replays = replay_grade(lab, tmp)
        cluster.reset(lab.name)
        shutil.rmtree(tmp / "out", ignore_errors=True)
    per = statistics.median(replays)
    verdict = "OK" if rate >= TARGET and not errors else "MISSED"
    print(
        f"  whole run (selection, grades, grades.csv, report.html): {wall:.1f} s, {errors} errors"
    )
    print(f"  throughput: {rate:.2f} submissions/s (target >= {TARGET:g}/s: {verdict})")
    if mean:
        cpu = mean["cpu_ours"] + mean["cpu_learner"]
        print(
            f"  one submission in a worker: {mean['seconds']:.3f} s wall, {cpu:.3f} s CPU = "
            f"ours {mean['cpu_ours']:.3f} s ({mean['cpu_ours'] / cpu:.0%}) + "
            f"learner's script {mean['cpu_learner']:.3f} s ({mean['cpu_learner'] / cpu:.0%})"
        )
        print(
            f"  the command's own process (selection, rows, grades.csv, report.html): "
            f"{parent:.2f} s CPU in all, {parent / COUNT * 1000:.1f} ms per submission"
        )
        print(
            f"  CPU-bound ceiling on {cores} cores: {cores / cpu:.1f} submissions/s "
            f"(load average during the run: {load0:.1f} -> {os.getloadavg()[0]:.1f}; other "
            "work on the machine takes its share)"
        )
    print(
        f"  without snapshots (reset, replay into the lab, gpushare grade), one at a time: "
        f"{per:.2f} s per submission (median of {REPLAYS}) = {1 / per:.2f} submissions/s; "
        f"class grade is {per * rate:.1f}x that"
    )


if __name__ == "__main__":
    try:
        main()
    finally:
        cluster.down(NAME)
