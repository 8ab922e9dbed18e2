"""Wall time of a full `gpushare grade` on a solved lab, next to a plain kubectl script.

Both run in the same process, against the same solved lab, alternately, so machine noise hits
both alike; the ratio is what matters (issue 4's target: under 1 s, at most half the kubectl
script). Also prints Python's own start-up and the import time of the package, which bound
what any Python grader can reach.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpushare import binaries, cluster, solve

NAME = os.environ.get("GPUSHARE_CLUSTER", "gpushare")
HERE = Path(__file__).resolve().parent
ROUNDS = 7


def wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, env=env, check=False)
    return time.perf_counter() - t0


def main() -> None:
    lab = cluster.up(NAME)
    cluster.reset(NAME)
    kubectl = binaries.find("kubectl")
    env = {
        **os.environ,
        "KUBECONFIG": str(lab.kubeconfig),
        "PATH": f"{kubectl.parent}:{os.environ['PATH']}",
    }
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp) / "gpushare"
        solve.solve(wd, kubeconfig=str(lab.kubeconfig))
        grade = [
            sys.executable,
            "-m",
            "gpushare",
            "grade",
            "--kubeconfig",
            str(lab.kubeconfig),
            "--workdir",
            str(wd),
            "--seed",
            "1",
        ]
        script = ["bash", str(HERE / "kubectl_check.sh"), str(wd)]
        no_runs = [*grade, *[f"--step={n}" for n in (1, 2, 3, 4, 5, 7, 8)]]
        learner = [
            str(wd / "bin/check-request.sh"),
            str(HERE.parent / "fixtures/check-request/over.yaml"),
        ]
        wall(grade), wall(script, env)  # warm the page cache
        ours, theirs, without, one_run = [], [], [], []
        for _ in range(ROUNDS):
            ours.append(wall(grade))
            theirs.append(wall(script, env))
            without.append(wall(no_runs))
            one_run.append(wall(learner))
    startup = statistics.median(wall([sys.executable, "-c", "pass"]) for _ in range(5))
    imports = statistics.median(
        wall(
            [
                sys.executable,
                "-c",
                "import gpushare.grade, gpushare.runner, gpushare.session, "
                "gpushare.labstate, gpushare.requestruns, gpushare.terminal",
            ]
        )
        for _ in range(5)
    )
    g, k = statistics.median(ours), statistics.median(theirs)
    rows = [
        ("gpushare grade (33 checks, 9 script runs)", g),
        ("kubectl_check.sh (11 checks, 10 kubectl)", k),
        ("gpushare grade without step 6 (28 checks)", statistics.median(without)),
        ("one run of the learner's check-request.sh", statistics.median(one_run)),
        ("python -c pass", startup),
        ("python importing what a grade imports", imports),
    ]
    print(f"{'what':<44}{'median s':>10}")
    for name, value in rows:
        print(f"{name:<44}{value:>10.3f}")
    print(f"{'ratio grade / kubectl script':<44}{g / k:>10.2f}   target <= 0.5")


if __name__ == "__main__":
    main()
