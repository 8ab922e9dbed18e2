"""The ``uid`` level's namespaces: what root gives a run without a user namespace.

Where bubblewrap cannot start (no unprivileged user namespaces, a seccomp profile that refuses
them, ``GPUSHARE_BWRAP`` pointing nowhere), a root grader still holds CAP_SYS_ADMIN, and
``unshare(2)`` of the network, IPC, mount and pid namespaces needs that capability and no user
namespace (``kernel/nsproxy.c:unshare_nsproxy_namespaces``: ``ns_capable(current_user_ns(),
CAP_SYS_ADMIN)``, torvalds/linux v6.12). So each run at that level gets, before it drops to
its own uid:

* a network namespace of its own: only a loopback that is down, no route anywhere (no lab's
  etcd on the host's loopback, no metadata address, no internet);
* an IPC namespace of its own: its SysV objects and POSIX queues go with it
  (``ipc/namespace.c:free_ipc_ns``), never to the next learner;
* a pid namespace of its own, whose first process is a small init of ours: when the script
  ends (or its reaper kills that init), the kernel kills everything else in it
  (``kernel/pid_namespace.c:zap_pid_ns_processes``) before the init's end is reported;
* a mount namespace of its own (the view is built by :mod:`gpushare.sandbox.view`);
* UTS and cgroup namespaces, as bubblewrap's: the host name is ``sandbox``.

Imported by the sandbox master, which may be a fresh ``python -I -S``: small stdlib modules
only.
"""

from __future__ import annotations

import ctypes
import os

# linux/sched.h
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
# linux/mount.h
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
# pivot_root(2) has no glibc wrapper: its system call number per machine.
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "i686": 217, "armv7l": 218, "ppc64le": 203}

libc = ctypes.CDLL(None, use_errno=True)


def check(rc: int, what: str) -> None:
    """Raise the OSError of a libc call that returned ``rc`` (anything but 0 is a failure)."""
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    check(libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    """mount(2); ``source``/``fstype`` None for a remount or a propagation change."""
    check(
        libc.mount(
            None if source is None else os.fsencode(source),
            os.fsencode(target),
            None if fstype is None else os.fsencode(fstype),
            ctypes.c_ulong(flags),
            os.fsencode(data) if data else None,
        ),
        f"mount {target}",
    )


def umount(target: str, flags: int = 0) -> None:
    check(libc.umount2(os.fsencode(target), ctypes.c_int(flags)), f"umount {target}")


def sethostname(name: bytes) -> None:
    check(libc.sethostname(name, ctypes.c_size_t(len(name))), "sethostname")


def pivot_root(new_root: str, put_old: str) -> None:
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(0, f"pivot_root: no system call number known for {os.uname().machine}")
    check(
        libc.syscall(ctypes.c_long(number), os.fsencode(new_root), os.fsencode(put_old)),
        "pivot_root",
    )


# Before the fork of the run's init, by its reaper: the init is the new namespace's pid 1.
FOR_CHILDREN = CLONE_NEWPID
# By that init itself, still root: the others (UTS and cgroup as bubblewrap's: the host's
# name and cgroup path are not the script's business).
OWN = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWCGROUP
HOSTNAME = b"sandbox"


_unavailable: str | None = None
_probed = False


def unavailable() -> str | None:
    """None when a run's namespaces can be made here (root with CAP_SYS_ADMIN, allowed by any
    seccomp profile and LSM), else why not, in a few words; cached per process. A trial in a
    forked child: the namespaces, a private mount tree, a tmpfs and a new pid namespace's /proc.
    """
    global _unavailable, _probed
    if _probed:
        return _unavailable
    _probed = True
    if os.geteuid() != 0:
        _unavailable = "not root"
        return _unavailable
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the trial, reported through the pipe
        message = b""
        try:
            os.close(read)
            unshare(FOR_CHILDREN | OWN)
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k")
            init = os.fork()
            if init == 0:
                code = 1
                try:
                    mount("proc", "/tmp", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
                    code = 0
                finally:
                    os._exit(code)
            if os.waitstatus_to_exitcode(os.waitpid(init, 0)[1]) != 0:
                message = b"mount proc: refused"
        except OSError as exc:
            message = (exc.strerror or str(exc)).encode()
        except BaseException:
            message = b"failed"
        os.write(write, message)
        os._exit(0)
    os.close(write)
    with open(read, "rb") as fh:
        why = fh.read(1000).decode("utf-8", "replace")
    os.waitpid(pid, 0)
    _unavailable = why or None
    return _unavailable
