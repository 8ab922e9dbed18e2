"""Install a real seccomp filter on this process, as a container runtime's profile would.

The tests of :mod:`gpushare.sandbox.diagnose` run the sandbox's probe under such a filter to
make bubblewrap fail for real, without a container runtime: ``sethostname`` refused (what
podman's default profile does) or new user namespaces refused (what Docker's and containerd's
do). A classic BPF program, x86_64 only; ``no_new_privs`` is set first, as the kernel requires
of a process without CAP_SYS_ADMIN.

Run as ``python -m tests.seccomp_filter KIND -- COMMAND...``: the filter, then ``exec``.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

AUDIT_ARCH_X86_64 = 0xC000003E
NR = {"clone": 56, "sethostname": 170, "unshare": 272, "clone3": 435}
CLONE_NEWUSER = 0x10000000
ALLOW = 0x7FFF0000
EPERM = 0x00050000 | 1
ENOSYS = 0x00050000 | 38
# classic BPF opcodes
LD_W_ABS = 0x20
JEQ_K = 0x15
JSET_K = 0x45
RET_K = 0x06
KILL = 0x00000000


def _program(kind: str) -> list[tuple[int, int, int, int]]:
    """(code, jt, jf, k) instructions; offsets into struct seccomp_data: nr 0, arch 4, args
    16 + 8 * i (the low 32 bits first on little-endian)."""
    head = [
        (LD_W_ABS, 0, 0, 4),
        (JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        (RET_K, 0, 0, KILL),
        (LD_W_ABS, 0, 0, 0),
    ]
    if kind == "sethostname":
        return [*head, (JEQ_K, 0, 1, NR["sethostname"]), (RET_K, 0, 0, EPERM), (RET_K, 0, 0, ALLOW)]
    if kind == "userns":
        return [
            *head,
            (JEQ_K, 0, 1, NR["unshare"]),
            (RET_K, 0, 0, EPERM),
            (JEQ_K, 0, 1, NR["clone3"]),
            (RET_K, 0, 0, ENOSYS),
            (JEQ_K, 0, 3, NR["clone"]),
            (LD_W_ABS, 0, 0, 16),
            (JSET_K, 0, 1, CLONE_NEWUSER),
            (RET_K, 0, 0, EPERM),
            (RET_K, 0, 0, ALLOW),
        ]
    raise ValueError(f"unknown filter {kind!r}")


def install(kind: str) -> None:
    if platform.machine() != "x86_64":
        raise OSError("these filters are written for x86_64")
    code = b"".join(struct.pack("=HBBI", *ins) for ins in _program(kind))
    buf = ctypes.create_string_buffer(code, len(code))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(code) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    if libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, MODE_FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


if __name__ == "__main__":
    kind, sep, *command = sys.argv[1:]
    assert sep == "--" and command, "usage: python -m tests.seccomp_filter KIND -- COMMAND..."
    install(kind)
    os.execvp(command[0], command)
