"""Lab lifecycle timings and the control plane's memory (issue 2's targets).

Prints cold `up` (binaries built, cluster created), warm `up`, `reset` and `down` wall times,
and the peak resident memory of the control plane's processes while the reference solution is
applied and graded. A benchmark, not a test: the machine is shared and noisy, so numbers are
printed (median of a few rounds where cheap), never asserted.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import figures  # benchmarks/: the figures make bench writes into docs/performance.md
import psutil

from gpushare.lab import cluster, procs, solve

# the benchmarks' own lab, never a learner's (they reset it); ended when they are done
NAME = os.environ.get("GPUSHARE_BENCH_CLUSTER", "gpushare-bench")


def timed(fn, *args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def control_plane_rss(lab: cluster.Lab) -> int:
    total = 0
    for proc in procs.cluster_processes(lab.dir):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += proc.memory_info().rss
    return total


def main() -> None:
    lab = cluster.Lab(NAME)
    if lab.exists():
        cluster.down(NAME)
    cold = timed(cluster.up, NAME)
    warm = statistics.median(timed(cluster.up, NAME) for _ in range(5))

    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, control_plane_rss(lab))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    resets = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(3):
            wd = Path(tmp) / f"wd{i}"
            solve.solve(wd, kubeconfig=str(lab.kubeconfig))
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gpushare",
                    "grade",
                    "--kubeconfig",
                    str(lab.kubeconfig),
                    "--workdir",
                    str(wd),
                ],
                capture_output=True,
                check=False,
            )
            resets.append(timed(cluster.reset, NAME))
    stop.set()
    sampler.join()
    down = timed(cluster.down, NAME)

    print(f"{'step':<28}{'seconds':>10}   target")
    print(f"{'cold up (binaries cached)':<28}{cold:>10.2f}   < 15")
    print(f"{'warm up (median of 5)':<28}{warm:>10.3f}   < 3")
    print(f"{'reset after solve (median)':<28}{statistics.median(resets):>10.3f}   < 3")
    print(f"{'down':<28}{down:>10.2f}")
    print(f"{'control plane peak RSS':<28}{peak / 1024**2:>9.0f}M   < 1536M")
    figures.record("up_cold", "cold `gpushare up` (binaries cached)", f"{cold:.1f} s", "< 15 s")
    figures.record("up_warm", "warm `gpushare up` (median of 5)", f"{warm:.2f} s", "< 3 s")
    reset = statistics.median(resets)
    figures.record("reset", "`gpushare reset` after a full solve", f"{reset:.2f} s", "< 3 s")
    figures.record(
        "rss", "control plane peak RSS (solve + grade)", f"{peak / 1024**2:.0f} MiB", "< 1.5 GiB"
    )


if __name__ == "__main__":
    main()
