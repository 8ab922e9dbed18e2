"""Resource caps of one untrusted run: memory, processes, CPU time, file size.

The learner's script may allocate without end, fork without end or spin; on the instructor's
machine, grading a class runs many of them. The run's reaper (:mod:`gpushare.sandbox.reaper`)
applies these caps, each where it works:

* **rlimits**, set in the script's process just before exec and inherited by everything it
  starts: ``RLIMIT_AS`` (address space of each process), ``RLIMIT_CPU`` (CPU seconds of each
  process), ``RLIMIT_FSIZE`` (largest file it may write) and no core dumps. Not
  ``RLIMIT_NPROC``: it counts every process of the user on the whole machine (the grader's own
  included), and root — also root mapped into a user namespace — is exempt from it.
* **a cgroup of its own** per run, where the grader may create one (root with cgroup v1, or a
  delegated cgroup v2 subtree): ``pids.max`` caps the processes of the whole tree (a fork bomb's
  forks fail with EAGAIN), and the memory limit caps all of them together, tmpfs pages included.
  The script joins it before exec, so nothing it starts is outside.
* **a watchdog** where no pids cgroup is available: the reaper reads the machine's thread count
  (one small read of ``/proc/loadavg``) every few milliseconds, and only when it has grown by
  more than half the cap counts the run's own processes; over the cap, the run is ended. In the
  bubblewrap sandbox that kills the sandbox's pid namespace as a whole, which no fork loop
  outruns.

This module is imported by the sandbox master, which may be a fresh ``python -I -S``: it
imports nothing but small builtin modules.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

# Files of a cgroup directory, per controller and cgroup version.
_PIDS_MAX = {1: "pids.max", 2: "pids.max"}
_MEMORY_MAX = {1: "memory.limit_in_bytes", 2: "memory.max"}
# How often the watchdog looks.
WATCH_INTERVAL_S = 0.01
# A run's cgroup is named after its reaper: gpushare-run-<reaper pid>.
RUN_GROUP_PREFIX = "gpushare-run-"


@dataclass(init=False)
class Limits:
    """Caps of one run; 0 means "no cap" for each.

    ``memory``: bytes of memory of the whole run, where a cgroup is available (tmpfs included).
    ``address_space``: bytes of address space per process (RLIMIT_AS): a process over it fails
    to allocate. Keep it at 1 GiB or more: a Go program (``yq``, ``kubectl``) reserves some
    600 MiB of address space at start and dies below that. ``processes``: processes of the run
    at once (a cgroup's pids.max, else the watchdog). ``cpu_seconds``: CPU time per process
    (RLIMIT_CPU; SIGXCPU, then SIGKILL one second later). ``file_size``: bytes of the largest
    file (RLIMIT_FSIZE).
    """

    address_space: int
    cpu_seconds: int
    file_size: int
    memory: int
    processes: int

    def __init__(
        self,
        *,
        memory: int = 0,
        address_space: int = 0,
        processes: int = 0,
        cpu_seconds: int = 0,
        file_size: int = 0,
    ) -> None:
        values = (memory, address_space, processes, cpu_seconds, file_size)
        for name, value in zip(self._FIELDS, values, strict=True):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, not {value!r}")
        self.memory = memory
        self.address_space = address_space
        self.processes = processes
        self.cpu_seconds = cpu_seconds
        self.file_size = file_size

    _FIELDS = ("memory", "address_space", "processes", "cpu_seconds", "file_size")

    def encode(self) -> bytes:
        """The wire form for the master: the fields of :attr:`_FIELDS`, comma-separated."""
        return b",".join(b"%d" % getattr(self, name) for name in self._FIELDS)

    @classmethod
    def decode(cls, data: bytes) -> Limits:
        values = [int(x) for x in data.split(b",")]
        if len(values) != len(cls._FIELDS):
            raise ValueError("malformed limits")
        return cls(**dict(zip(cls._FIELDS, values, strict=True)))


NO_LIMITS = Limits()


def apply_rlimits(limits: Limits) -> None:
    """Set the per-process caps in the calling process (the script's, just before exec)."""
    import resource

    def cap(kind: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        _cur_soft, cur_hard = resource.getrlimit(kind)
        if cur_hard != resource.RLIM_INFINITY:  # never above what we were given ourselves
            soft, hard = min(soft, cur_hard), min(hard, cur_hard)
        resource.setrlimit(kind, (soft, hard))

    cap(resource.RLIMIT_CORE, 0)
    if limits.address_space:
        cap(resource.RLIMIT_AS, limits.address_space)
    if limits.cpu_seconds:
        cap(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1)
    if limits.file_size:
        cap(resource.RLIMIT_FSIZE, limits.file_size)


# --- cgroups ----------------------------------------------------------------------------------

_bases: dict[str, tuple[int, str]] | None = None


def cgroup_bases() -> dict[str, tuple[int, str]]:
    """``{controller: (version, directory)}`` for ``pids`` and ``memory`` where we may create a
    child cgroup: the directory of our own cgroup, when it is writable. Found once per process,
    which then also removes the groups left by reapers that were killed (see :func:`sweep`).

    cgroup v2 counts only where the controller is enabled for our cgroup's children
    (``cgroup.subtree_control``); a v1 hierarchy of that controller is used otherwise.
    """
    global _bases
    if _bases is not None:
        return _bases
    _bases = _find_bases()
    sweep(_bases)
    return _bases


def _find_bases() -> dict[str, tuple[int, str]]:
    found: dict[str, tuple[int, str]] = {}
    try:
        with open("/proc/self/cgroup", "rb") as fh:
            membership = fh.read().decode("utf-8", "replace").splitlines()
        with open("/proc/self/mountinfo", "rb") as fh:
            mounts = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return found
    paths_v1: dict[str, str] = {}
    path_v2 = None
    for line in membership:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            path_v2 = parts[2]
        for controller in parts[1].split(","):
            paths_v1[controller] = parts[2]
    for line in mounts:
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        root, mountpoint, fstype, options = fields[3], fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup2" and path_v2 is not None:
            directory = _inside(mountpoint, root, path_v2)
            if directory is None:
                continue
            try:
                with open(os.path.join(directory, "cgroup.subtree_control"), "rb") as fh:
                    enabled = fh.read().split()
            except OSError:
                continue
            for controller in ("pids", "memory"):
                if controller.encode() in enabled and os.access(directory, os.W_OK):
                    found[controller] = (2, directory)
        elif fstype == "cgroup":
            for controller in ("pids", "memory"):
                if controller in options and controller in paths_v1 and controller not in found:
                    directory = _inside(mountpoint, root, paths_v1[controller])
                    if directory is not None and os.access(directory, os.W_OK):
                        found[controller] = (1, directory)
    return found


def sweep(bases: dict[str, tuple[int, str]]) -> None:
    """Remove the run groups whose reaper is gone (a reaper that was SIGKILLed cannot remove
    its own). A group still in use cannot be removed (EBUSY), so this never harms a run."""
    for _version, base in set(bases.values()):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            pid = name[len(RUN_GROUP_PREFIX) :]
            if name.startswith(RUN_GROUP_PREFIX) and pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(base, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's
    return True


def _inside(mountpoint: str, root: str, path: str) -> str | None:
    """Where cgroup ``path`` is under a mount of the hierarchy's ``root``, or None if outside."""
    root = root.rstrip("/")
    if root and not (path == root or path.startswith(root + "/")):
        return None
    return os.path.join(mountpoint, path[len(root) :].lstrip("/")).rstrip("/")


class RunCgroup:
    """The cgroup(s) of one run: created by its reaper, joined by its script, removed at the end.

    ``procs_files`` are the ``cgroup.procs`` files the script writes its pid to; empty when no
    controller is available (then only rlimits and the watchdog apply).
    """

    def __init__(self, limits: Limits, reaper_pid: int) -> None:
        name = f"{RUN_GROUP_PREFIX}{reaper_pid}"
        self.dirs: list[tuple[str, int, str]] = []  # (controller, version, directory)
        bases = cgroup_bases()
        wanted = (("pids", limits.processes), ("memory", limits.memory))
        for controller, value in wanted:
            if not value or controller not in bases:
                continue
            version, base = bases[controller]
            directory = os.path.join(base, name)
            try:
                # Exists: v2 has one group for both controllers; v1, left by a killed reaper.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(directory)
                self._set(controller, version, directory, value)
            except OSError:
                continue
            self.dirs.append((controller, version, directory))

    @staticmethod
    def _set(controller: str, version: int, directory: str, value: int) -> None:
        if controller == "pids":
            _write(os.path.join(directory, _PIDS_MAX[version]), str(value))
            return
        _write(os.path.join(directory, _MEMORY_MAX[version]), str(value))
        swap = "memory.memsw.limit_in_bytes" if version == 1 else "memory.swap.max"
        with contextlib.suppress(OSError):  # no swapping past the cap, where swap is counted
            _write(os.path.join(directory, swap), str(value) if version == 1 else "0")

    @property
    def procs_files(self) -> list[bytes]:
        return [os.fsencode(os.path.join(d, "cgroup.procs")) for d in self._unique()]

    def _unique(self) -> list[str]:
        return list(dict.fromkeys(d for _c, _v, d in self.dirs))

    @property
    def caps_processes(self) -> bool:
        return any(c == "pids" for c, _v, _d in self.dirs)

    def hits(self) -> list[str]:
        """Which caps the run ran into: ``processes`` (a fork failed), ``memory`` (OOM kill)."""
        hit = []
        for controller, version, directory in self.dirs:
            if controller == "pids" and _event(directory, "pids.events", b"max") > 0:
                hit.append("processes")
            if controller == "memory":
                events = "memory.oom_control" if version == 1 else "memory.events"
                if _event(directory, events, b"oom_kill") > 0:
                    hit.append("memory")
        return hit

    def remove(self) -> None:
        """Remove the run's cgroups once they are empty (after the reaper killed the tree)."""
        for directory in self._unique():
            # A process stuck in D state keeps it: the directory stays, empty once it dies.
            with contextlib.suppress(OSError):
                os.rmdir(directory)


def join(procs_files: list[bytes]) -> bool:
    """Move the calling process into each cgroup; False if any move failed."""
    ok = True
    me = str(os.getpid()).encode()
    for path in procs_files:
        try:
            _write(path, me)
        except OSError:
            ok = False
    return ok


def _write(path: str | bytes, value: str | bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode() if isinstance(value, str) else value)
    finally:
        os.close(fd)


def _event(directory: str, name: str, key: bytes) -> int:
    """The counter ``key`` of a cgroup events file, 0 if absent."""
    try:
        with open(os.path.join(directory, name), "rb") as fh:
            for line in fh.read().splitlines():
                words = line.split()
                if len(words) == 2 and words[0] == key:
                    return int(words[1])
    except (OSError, ValueError):
        return 0
    return 0


# --- watchdog ---------------------------------------------------------------------------------


def threads_total() -> int:
    """Threads on the machine (the 4th field of /proc/loadavg), -1 if unreadable.

    One read of a tiny file: cheap enough to poll often, unlike a scan of /proc.
    """
    try:
        fd = os.open("/proc/loadavg", os.O_RDONLY)
        try:
            data = os.read(fd, 256)
        finally:
            os.close(fd)
        return int(data.split()[3].split(b"/")[1])
    except (OSError, IndexError, ValueError):
        return -1
