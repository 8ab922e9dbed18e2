"""Why bubblewrap could not start here, in words an operator can act on.

bwrap says what failed (``Can't mount proc on /newroot/proc: Operation not permitted``), not
which setting of the machine, the container runtime or the Kubernetes pod made it fail. Each
failure below was provoked for real (``make images`` runs the grading image under podman with
one setting of the printed pod removed at a time, see ``deploy/images.py``; the tests provoke
the others on the host) and is mapped to its cause and the setting that fixes it (a
:class:`Cause`):

* ``/proc`` masked by the container runtime (paths under it covered by mounts): the kernel
  refuses a new ``proc`` mount in a user namespace where the old one is not fully visible;
* a seccomp filter: podman's default profile lets ``unshare`` through but not ``sethostname``
  (``Can't set hostname``); Docker's and containerd's refuse the new namespace itself (EPERM,
  ``No permissions to create new namespace``);
* user namespaces turned off by a sysctl (``user.max_user_namespaces=0``: ENOSPC;
  ``kernel.unprivileged_userns_clone=0``: EPERM) or by AppArmor (Ubuntu 24.04+);
* a grader of uid 0 without CAP_SETFCAP (a root container with every capability dropped): the
  kernel (5.12+) refuses to map uid 0 into the sandbox's user namespace (``setting up uid
  map: Operation not permitted``).

The same EPERM comes from a seccomp filter and from a sysctl, so :func:`facts` reads the
process's own seccomp mode, uid and capabilities, and the sysctls, to tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Cause:
    """One reason bwrap cannot start: ``key`` (stable, for tests and logs), what it is, and
    the setting that fixes it."""

    key: str
    cause: str
    fix: str

    def __str__(self) -> str:
        return f"{self.cause}; fix: {self.fix}"


@dataclass(frozen=True)
class Facts:
    """What this process can see of the settings that decide whether bwrap may start."""

    seccomp_filtered: bool = False  # /proc/self/status "Seccomp: 2"
    root_without_setfcap: bool = False  # uid 0 whose effective capabilities lack CAP_SETFCAP
    sysctls: dict[str, str] = field(default_factory=dict)  # name -> value, for those that exist


_SYSCTLS = (
    "user/max_user_namespaces",
    "kernel/unprivileged_userns_clone",
    "kernel/apparmor_restrict_unprivileged_userns",
)

PROC_MASKED = Cause(
    "proc-masked",
    "the container runtime masks paths under /proc, so the kernel refuses the sandbox its own "
    "/proc",
    "Kubernetes: securityContext.procMount: Unmasked (needs hostUsers: false); "
    "podman: --security-opt unmask=/proc/*; Docker: --security-opt systempaths=unconfined",
)
SECCOMP = Cause(
    "seccomp",
    "a seccomp filter forbids the system calls of user namespaces (sethostname, unshare, "
    "clone, mount)",
    "a seccomp profile that allows user namespaces: Kubernetes: securityContext."
    "seccompProfile.type: Unconfined (or a Localhost profile that allows them); "
    "podman/Docker: --security-opt seccomp=unconfined (or such a profile)",
)
USERNS_LIMIT = Cause(
    "userns-off",
    "user namespaces are turned off (sysctl user.max_user_namespaces is 0 or used up)",
    "sysctl -w user.max_user_namespaces=15000 on the node (the host, not the container)",
)
USERNS_SYSCTL = Cause(
    "userns-off",
    "unprivileged user namespaces are turned off (sysctl kernel.unprivileged_userns_clone=0)",
    "sysctl -w kernel.unprivileged_userns_clone=1 on the node (the host, not the container)",
)
ROOT_NO_SETFCAP = Cause(
    "root-no-setfcap",
    "the grader runs as uid 0 without CAP_SETFCAP, and the kernel maps uid 0 into a new user "
    "namespace only for a process that has it",
    "run the grader as a non-root uid (Kubernetes: runAsUser: 1000, as deploy/job.py's Job "
    "has it), or keep CAP_SETFCAP",
)
APPARMOR = Cause(
    "apparmor",
    "AppArmor restricts unprivileged user namespaces "
    "(kernel.apparmor_restrict_unprivileged_userns=1)",
    "Kubernetes: securityContext.appArmorProfile.type: Unconfined (or a profile with a "
    "userns rule); on the node: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
)


def facts() -> Facts:
    """Read this process's seccomp mode and the user-namespace sysctls (those that exist)."""
    status: dict[str, str] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            status[key] = value.strip()
    except OSError:
        pass
    filtered = status.get("Seccomp") == "2"
    uid = status.get("Uid", "").split()[1:2]  # the effective uid
    try:
        setfcap = bool(int(status.get("CapEff", "0"), 16) & (1 << 31))
    except ValueError:
        setfcap = False
    sysctls: dict[str, str] = {}
    for name in _SYSCTLS:
        try:
            sysctls[name.replace("/", ".")] = Path("/proc/sys", name).read_text().strip()
        except OSError:
            continue
    return Facts(
        seccomp_filtered=filtered,
        root_without_setfcap=uid == ["0"] and not setfcap,
        sysctls=sysctls,
    )


def diagnose(stderr: str, seen: Facts | None = None) -> Cause | None:
    """The cause of bwrap's failure from its stderr (and, for EPERM on a new namespace, from
    ``seen``, default :func:`facts`), or None when the message is none of the known ones."""
    text = stderr.lower()
    if "can't mount proc" in text:
        return PROC_MASKED
    if "can't set hostname" in text:
        return SECCOMP
    if "namespace" in text and ("no space left on device" in text or "enospc" in text):
        return USERNS_LIMIT  # bwrap 0.8: "... max_*_namespaces exceeded (ENOSPC)"
    namespace_denied = "no permissions to create new namespace" in text or (
        "creating new namespace failed" in text and "operation not permitted" in text
    )
    uid_map_denied = "setting up uid map" in text and (
        "permission denied" in text or "operation not permitted" in text
    )
    if not (namespace_denied or uid_map_denied):
        return None
    seen = seen if seen is not None else facts()
    if seen.sysctls.get("user.max_user_namespaces") == "0":
        return USERNS_LIMIT
    if seen.sysctls.get("kernel.unprivileged_userns_clone") == "0":
        return USERNS_SYSCTL
    if seen.sysctls.get("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return APPARMOR
    if uid_map_denied:
        return ROOT_NO_SETFCAP if seen.root_without_setfcap else None
    return SECCOMP if seen.seccomp_filtered else USERNS_SYSCTL


def explain(reason: str, seen: Facts | None = None) -> str:
    """``reason`` (bwrap's last line) followed by its cause and fix, when known."""
    found = diagnose(reason, seen)
    return f"{reason} ({found})" if found else reason
