"""What a learner's script sees of the filesystem: the list bubblewrap binds, and the ``uid``
level's own build of the same view in a private mount namespace.

Both levels show the script the same tree, read-only but for size-capped scratch:

* ``/usr`` (and the ``/bin``, ``/lib``... links or directories beside it) and the few files of
  ``/etc`` that programs need (:data:`ETC`): bash, coreutils, awk, sed, grep... as on the host;
* the runtime of :mod:`gpushare.sandbox.runtime` and the run's staged files, at their own paths;
* a ``/proc`` of the run's own pid namespace, a minimal ``/dev``;
* tmpfs scratch, ``nosuid`` and ``nodev``, capped in size: ``/tmp`` (``HOME`` and ``TMPDIR``;
  ``/var/tmp`` is the same), ``/dev/shm`` and, at ``uid``, ``/run/lock``.

Nothing else: not the grader's home, its checkout, gpushare's cache (a lab's keys and
kubeconfigs), another learner's files, ``/root``, ``/sys``. A file a script leaves there goes
with its namespace, a setuid or setgid copy does nothing there (``nosuid``), and a flood stops
at the cap.

The ``uid`` level's build (:func:`build`) runs in the run's init, root in a mount namespace of
its own (:mod:`gpushare.sandbox.namespaces`), and ends with ``pivot_root``: the host's tree is
then no longer reachable from the run. Imported by the sandbox master, which may be a fresh
``python -I -S``: small stdlib modules only.
"""

from __future__ import annotations

import os

from gpushare.sandbox import namespaces as ns

# Files of /etc the lab's tools need; each bound only if it exists.
ETC = (
    "/etc/alternatives",  # awk -> mawk/gawk on Debian
    "/etc/group",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
)
TOP_LEVEL = ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
SCRATCH = "/tmp"
SCRATCH_BYTES = 64 * 1024 * 1024
SHM_BYTES = 16 * 1024 * 1024  # /dev/shm: Python's multiprocessing locks, no more
LOCK_BYTES = 1024 * 1024  # /run/lock (world-writable on Debian): lock files, no more
# Devices of a minimal /dev, as bubblewrap's --dev has them.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_RO = ns.MS_RDONLY | ns.MS_NOSUID | ns.MS_NODEV
_SCRATCH = ns.MS_NOSUID | ns.MS_NODEV


def _point(path: str, like: str) -> None:
    """A mount point at ``path`` for what is at ``like``: a folder, or an empty file."""
    if os.path.isdir(like):
        os.makedirs(path, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def _bind(source: str, dest: str, flags: int = _RO) -> None:
    """``source`` at ``dest``, read-only, ``nosuid`` and ``nodev`` (a bind takes its flags from
    its source's mount until remounted)."""
    _point(dest, source)
    ns.mount(source, dest, None, ns.MS_BIND | ns.MS_REC)
    ns.mount(None, dest, None, ns.MS_REMOUNT | ns.MS_BIND | flags)


def _tmpfs(dest: str, size: int) -> None:
    os.makedirs(dest, 0o755, exist_ok=True)
    ns.mount("tmpfs", dest, "tmpfs", _SCRATCH, f"size={size},mode=1777")


def build(root: str, binds: list[tuple[str, str]], cwd: str) -> None:
    """Make the run's tree on a tmpfs at ``root`` (an empty folder of the host), with each
    ``(source, destination)`` of ``binds`` bound read-only, then make it ``/`` and enter
    ``cwd``. In the run's init: root, in its own mount and pid namespaces."""
    ns.mount(None, "/", None, ns.MS_REC | ns.MS_PRIVATE)  # nothing of ours reaches the host
    ns.mount("tmpfs", root, "tmpfs", _SCRATCH, "size=1m,mode=0755")

    def at(path: str) -> str:
        return root + os.path.abspath(path)

    _bind("/usr", at("/usr"))
    for top in TOP_LEVEL:
        if os.path.islink(top):
            os.symlink(os.readlink(top), at(top))
        elif os.path.isdir(top):
            _bind(top, at(top))
    os.mkdir(at("/etc"), 0o755)
    for path in ETC:
        if os.path.exists(path):
            _bind(path, at(path))
    os.mkdir(at("/proc"), 0o555)
    ns.mount("proc", at("/proc"), "proc", _RO | ns.MS_NOEXEC)  # of the run's pid namespace
    os.mkdir(at("/dev"), 0o755)
    ns.mount("tmpfs", at("/dev"), "tmpfs", ns.MS_NOSUID | ns.MS_NOEXEC, "size=64k,mode=0755")
    for name in DEVICES:
        _bind(f"/dev/{name}", at(f"/dev/{name}"), ns.MS_NOSUID | ns.MS_NOEXEC)
    os.symlink("/proc/self/fd", at("/dev/fd"))
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{fd}", at(f"/dev/{name}"))
    _tmpfs(at("/dev/shm"), SHM_BYTES)
    _tmpfs(at(SCRATCH), SCRATCH_BYTES)
    _bind(at(SCRATCH), at("/var/tmp"), _SCRATCH)  # one scratch, one cap
    _tmpfs(at("/run/lock"), LOCK_BYTES)
    for source, dest in binds:  # after /tmp: a runtime or a work dir under /tmp stays seen
        if os.path.abspath(dest) == "/":
            raise OSError(0, "refusing to expose the whole filesystem to the sandbox")
        _bind(source, at(dest))
    ns.mount(None, root, None, ns.MS_REMOUNT | _RO)
    os.chdir(root)
    ns.pivot_root(".", ".")  # the host's tree is stacked under ours, then let go
    ns.umount(".", ns.MNT_DETACH)
    os.chdir(cwd)
