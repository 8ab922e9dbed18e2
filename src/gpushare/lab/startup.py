"""Running ``kwokctl create``/``start`` while watching the components it starts.

kwokctl forks each component and then polls the apiserver for two minutes whatever happens to
them: an etcd that died at once on ``bind: address already in use`` cost 120 s and the reason
stayed in a log file. Here kwokctl runs in the background, and every 0.1 s we look at the
components' pid files and logs under the cluster directory; a component that exited ends the
start at once with its name and the telling line of its log.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

from gpushare.lab import ports, procs

# kwokctl starts them in this order; a failure is blamed on the first that died
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok-controller",
)
_BIND_PORT = re.compile(r":(\d+): bind: address already in use")
# most telling first: a port conflict, a fatal line (etcd's JSON, klog's F0101), an error
_TELLING = (
    re.compile(r"address already in use", re.I),
    re.compile(r'"level":"fatal"|^F\d{4} |\bfatal\b|\bpanic\b', re.I),
    re.compile(r"\berror\b|\bfailed\b", re.I),
)


class StartError(RuntimeError):
    """The lab did not start; ``port`` is set when a component found its port taken."""

    def __init__(self, message: str, component: str = "", port: int | None = None) -> None:
        super().__init__(message)
        self.component = component
        self.port = port


def telling_line(log: Path, offset: int = 0, limit: int = 300) -> str:
    """The line of a component's log that says why it stopped (the last one that matches);
    ``offset``: where this start's lines begin (kwokctl appends to a restarted lab's logs)."""
    try:
        with log.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(offset, f.tell() - 64 * 1024))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines()]
    except OSError:
        return "(no log)"
    lines = [ln for ln in lines if ln]
    for pattern in _TELLING:
        for line in reversed(lines):
            if pattern.search(line):
                return _readable(line)[:limit]
    return _readable(lines[-1])[:limit] if lines else "(its log is empty)"


def _readable(line: str) -> str:
    """etcd logs JSON with a stack trace: its message and error are what a person needs."""
    if not line.startswith("{"):
        return line
    try:
        entry = json.loads(line)
    except ValueError:
        return line
    if not isinstance(entry, dict) or "msg" not in entry:
        return line
    parts = [str(entry.get("level", "")).upper(), str(entry["msg"])]
    if entry.get("error"):
        parts.append(f"error: {entry['error']}")
    return " ".join(p for p in parts if p)


class Watch:
    """The components of one start: which died, and the line of their log that says why.

    Taken before kwokctl runs: a stopped lab's old pid files name processes long gone and say
    nothing about this start, and its logs already hold the earlier runs' lines.
    """

    def __init__(self, cluster_dir: Path) -> None:
        self.dir = cluster_dir
        self.pids = self._pid_files()
        self.log_sizes: dict[str, int] = {}  # a log not there yet: this start's lines from 0
        for name in COMPONENTS:
            with contextlib.suppress(OSError):
                self.log_sizes[name] = self._log(name).stat().st_size

    def _log(self, name: str) -> Path:
        return self.dir / "logs" / f"{name}.log"

    def _pid_files(self) -> dict[str, str]:
        out = {}
        for name in COMPONENTS:
            with contextlib.suppress(OSError):
                out[name] = (self.dir / "pids" / f"{name}.pid").read_text().strip()
        return out

    def check(self) -> None:
        """Raise :class:`StartError` when a component this start launched is no longer alive."""
        failures = []
        for name, text in self._pid_files().items():
            if self.pids.get(name) == text or not text.isdigit():
                continue  # not (completely) written by this start yet
            if procs.pid_alive(self.dir / "pids" / f"{name}.pid"):
                continue
            line = telling_line(self._log(name), self.log_sizes.get(name, 0))
            match = _BIND_PORT.search(line)
            failures.append((name, line, int(match.group(1)) if match else None))
        if not failures:
            return
        # the one that explains the others: a port conflict, else the first in start order
        name, line, port = min(failures, key=lambda f: (f[2] is None, COMPONENTS.index(f[0])))
        if port is not None:
            raise StartError(
                f"{name} could not listen on port {port}: it is taken{ports.holder(port)}. "
                f"Its log says: {line}",
                name,
                port,
            )
        raise StartError(f"{name} exited during start-up. Its log says: {line}", name)


def run_kwokctl(
    cmd: list[str], env: dict[str, str], watch: Watch, deadline: float, what: str
) -> None:
    """Run kwokctl until it exits, failing fast when one of the components it started died.
    On any failure kwokctl itself is killed (by pid, our child) before this returns, so it
    starts nothing more behind the caller's clean-up."""
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:
            while True:
                rc = proc.poll()
                watch.check()
                if rc is not None:
                    break
                if time.monotonic() > deadline:
                    raise StartError(f"`kwokctl {what}` did not finish in time")
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if rc != 0:
            out.seek(0)
            tail = "\n".join(out.read().strip().splitlines()[-15:])
            raise StartError(f"`kwokctl {what}` failed (exit {rc}):\n{tail}")
