"""Finding and ending the processes of one lab cluster, by pid, never by name pattern.

kwokctl starts every component in its own session with a pid file under the cluster's
directory. A component that kwokctl failed to stop (or whose pid file was lost) is still
recognisable: its command line or working directory points into that directory. We end only
those processes, never anything matched by program name, so another user's or another
checkout's cluster is never touched.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import psutil


def _belongs(proc: psutil.Process, cluster_dir: str) -> bool:
    try:
        return any(cluster_dir in a for a in proc.cmdline()) or proc.cwd().startswith(cluster_dir)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def cluster_processes(cluster_dir: Path) -> list[psutil.Process]:
    """Live processes whose command line or working directory is inside ``cluster_dir``."""
    target = str(cluster_dir.resolve()) + "/"
    found = []
    for proc in psutil.process_iter():
        if proc.pid == psutil.Process().pid:
            continue
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if _belongs(proc, target):
                found.append(proc)
    return found


def end(procs: list[psutil.Process], grace: float = 3.0) -> None:
    """SIGTERM, wait ``grace`` seconds, then SIGKILL what is left, each by its pid."""
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace)
    kill(alive, timeout=grace)


def kill(procs: list[psutil.Process], timeout: float = 5.0) -> None:
    """SIGKILL at once, each by its pid: for a lab that failed to start, nothing to keep."""
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(procs, timeout=timeout)


def pid_alive(pid_file: Path) -> int | None:
    """The pid in ``pid_file`` when that process is alive (and not a zombie)."""
    try:
        pid = int(pid_file.read_text().strip())
        return None if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE else pid
    except (OSError, ValueError, psutil.NoSuchProcess):
        return None


def wait_gone(
    cluster_dir: Path, known: list[psutil.Process], timeout: float = 10.0
) -> list[psutil.Process]:
    """Wait until the ``known`` processes have exited and no other of the cluster remains.

    ``known`` is taken before the components are told to stop: a process in the middle of
    exiting has no command line to be recognised by, but its psutil handle (pid and start
    time) still says whether it is really gone.
    """
    deadline = time.monotonic() + timeout
    _, alive = psutil.wait_procs(known, timeout=timeout)
    while True:
        left = alive + [p for p in cluster_processes(cluster_dir) if p not in alive]
        if not left or time.monotonic() > deadline:
            return left
        _, alive = psutil.wait_procs(left, timeout=0.2)


def settle(cluster_dir: Path, known: list[psutil.Process]) -> tuple[list[int], list[int]]:
    """After kwokctl stopped or deleted a cluster: wait, end stragglers by pid, verify;
    (pids that had to be ended, pids still alive afterwards)."""
    stragglers = wait_gone(cluster_dir, known, timeout=10.0)
    if stragglers:
        end(stragglers)
    left = wait_gone(cluster_dir, stragglers, timeout=3.0)
    return [p.pid for p in stragglers], [p.pid for p in left]
