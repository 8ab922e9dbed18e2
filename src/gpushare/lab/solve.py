"""``gpushare solve``: apply the reference solution to a lab and a work directory.

The solution itself is the lab's ``solutions/solve.sh`` (see :mod:`gpushare.locations`), a
script that plays the learner with kubectl; this module only gives it the lab's kubeconfig and
our kubectl.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpushare.lab import binaries, cluster
from gpushare.locations import solutions_dir


def solve(
    workdir: Path,
    *,
    kubeconfig: str | None = None,
    cluster_name: str | None = None,
    steps: list[int] | None = None,
    solutions: Path | None = None,
    timeout: float = 300,
) -> None:
    """Run solve.sh against the cluster; raise ClusterError with its output when it fails.
    ``solutions`` replaces the checkout's solutions/ (tests use it to apply a variant)."""
    script = (solutions or solutions_dir()) / "solve.sh"
    if not script.is_file():
        raise cluster.ClusterError(f"reference solution not found at {script}")
    if kubeconfig is None:
        kubeconfig = str(cluster.up(cluster_name).kubeconfig)
    env = dict(os.environ)
    env["KUBECONFIG"] = kubeconfig
    kubectl = binaries.find("kubectl")
    if kubectl is not None:
        env["PATH"] = f"{kubectl.parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = ["bash", str(script), str(workdir), *(str(s) for s in steps or [])]
    out = cluster.run(cmd, env, timeout, "solve.sh")
    if out.returncode != 0:
        raise cluster.ClusterError(
            f"solve.sh failed (exit {out.returncode}):\n{(out.stdout + out.stderr)[-3000:]}"
        )
