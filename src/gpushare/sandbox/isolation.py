"""The ``bubblewrap`` level: what a learner's script may see, and whether bwrap can run here.

Each run is started by ``bwrap`` (Debian's ``bubblewrap``, the sandbox Flatpak uses) in new
user, pid, network, IPC, UTS and cgroup namespaces, with no capabilities, unable to create
further user namespaces, in a session of its own, ending with its reaper; as the run's own
uid when the grader is root (:mod:`gpushare.sandbox.ids`: the sandbox's uid maps to it on the
host, never to root). Its filesystem is the read-only view of :mod:`gpushare.sandbox.view`
(the ``uid`` level builds the same): ``/usr`` and a few files of ``/etc``, the runtime of
:mod:`gpushare.sandbox.runtime` first on ``PATH``, the run's files read-only at their own
paths, capped tmpfs scratch at ``/tmp`` and ``/dev/shm``, ``/proc`` of its own pid namespace,
read-only as a whole (``/proc/sys``, ``sysrq-trigger``...: bwrap's own cover is skipped where
``access(W_OK)`` fails), and a minimal, read-only ``/dev``. No ``/sys``.

When its pid namespace's first process ends (or bwrap is killed: ``--die-with-parent``), the
kernel kills everything else in it: that is this level's cleanup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpushare.sandbox import ids, limits, runtime
from gpushare.sandbox.diagnose import explain
from gpushare.sandbox.errors import SandboxError
from gpushare.sandbox.runtime import Runtime
from gpushare.sandbox.view import ETC as _ETC
from gpushare.sandbox.view import SCRATCH as SCRATCH
from gpushare.sandbox.view import SCRATCH_BYTES as SCRATCH_BYTES
from gpushare.sandbox.view import SHM_BYTES as SHM_BYTES
from gpushare.sandbox.view import TOP_LEVEL as _TOP_LEVEL

BWRAP_ENV = "GPUSHARE_BWRAP"  # a bwrap binary of one's own
PRLIMIT = "/usr/bin/prlimit"  # util-linux: caps the processes inside the user namespace
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install "
    "bubblewrap`), and allow unprivileged user namespaces if they are disabled "
    "(`sysctl kernel.unprivileged_userns_clone=1`; Ubuntu 24.04+: "
    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`)"
)
# Environment variables of the grader a script may keep (the locale shapes its messages).
_KEPT_ENV = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ")
_PROBE_TIMEOUT_S = 10.0


class IsolationUnavailable(SandboxError):
    """The sandbox is required but cannot run here; the message says why and what to do."""


def environment(runtime: Runtime, env: Mapping[str, str] | None, home: str) -> dict[str, str]:
    """A script's environment at any level: ``env`` (default: none of the grader's variables
    but the locale), with ``PATH`` (the runtime first), ``HOME`` and ``TMPDIR`` the run's."""
    if env is None:
        base = {k: v for k, v in os.environ.items() if k in _KEPT_ENV or k.startswith("LC_")}
    else:
        base = dict(env)
    base.update(runtime.env)
    base.update(PATH=f"{runtime.bin}:/usr/local/bin:/usr/bin:/bin", HOME=home, TMPDIR=home)
    base.pop("PWD", None)
    return base


def find_bwrap() -> str | None:
    """``$GPUSHARE_BWRAP``, else ``bwrap`` on ``PATH`` (or in /usr/bin), else None."""
    own = os.environ.get(BWRAP_ENV)
    if own:
        return own if os.access(own, os.X_OK) else None
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/bin"])
    found = shutil.which("bwrap", path=path)
    return os.path.abspath(found) if found else None


class Isolation:
    """A bubblewrap sandbox that works here (:func:`probe` checked that ``bwrap`` can create
    its namespaces): builds each run's ``bwrap`` command line."""

    def __init__(
        self,
        bwrap: str,
        runtime: Runtime,
        *,
        uid: int = -1,
        modern: bool = True,
        processes: int = 0,
    ) -> None:
        """``uid``: the run's own uid bwrap runs as (-1: the grader's, non-root). ``modern``:
        bwrap >= 0.8, which can forbid nested user namespaces and cap a tmpfs's size.
        ``processes``: the cap set inside the user namespace (by ``prlimit``) when the uid is
        the grader's (why: :mod:`gpushare.sandbox.limits`)."""
        self.bwrap = bwrap
        self.runtime = runtime
        self.uid = uid
        self.modern = modern
        self.processes = processes if uid < 0 and os.access(PRLIMIT, os.X_OK) else 0
        self._base = self._base_args()

    def _base_args(self) -> list[str]:
        # --unshare-all: user, ipc, pid, net, uts, cgroup; --unshare-user: required, not "try"
        args = [self.bwrap, "--unshare-all", "--unshare-user"]
        args += ["--disable-userns"] if self.modern else []
        args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
        args += ["--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
        for top in _TOP_LEVEL:
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        for path in _ETC:
            args += ["--ro-bind-try", path, path]
        args += ["--proc", "/proc", "--dev", "/dev"]
        if self.modern:  # POSIX shared memory, capped; read-only /dev below otherwise
            args += ["--size", str(SHM_BYTES), "--perms", "1777", "--tmpfs", "/dev/shm"]
            args += ["--size", str(SCRATCH_BYTES), "--perms", "1777"]
        args += ["--tmpfs", SCRATCH]
        # after the scratch tmpfs: a runtime under /tmp (a grader whose HOME is /tmp, as in the
        # grading pod) would be hidden by it, and PATH would find the system's python3 instead
        home = self.runtime.home
        if not home.startswith("/usr/"):
            args += ["--ro-bind", home, home]
        return args

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        binds: Sequence[tuple[str, str]] = (),
        status_fd: int | None = None,
    ) -> list[str]:
        """The ``bwrap`` command that runs ``argv`` in ``cwd``, on a read-only root with each
        ``(source, destination)`` of ``binds`` bound read-only. ``status_fd``: where bwrap
        writes its JSON status (the reaper tells a command that ran from one bwrap could not
        start)."""
        args = list(self._base)
        for source, dest in binds:
            if os.path.abspath(dest) == "/":
                raise SandboxError("refusing to expose the whole filesystem to the sandbox")
            args += ["--ro-bind", source, os.path.abspath(dest)]
        # not their mounts below; /proc as a whole: /proc/sys, sysrq-trigger and the others
        args += ["--remount-ro", "/", "--remount-ro", "/dev", "--remount-ro", "/proc"]
        args += ["--chdir", os.path.abspath(cwd) if cwd else SCRATCH]
        if status_fd is not None:
            args += ["--json-status-fd", str(status_fd)]
        if self.processes:
            args += ["--", PRLIMIT, f"--nproc={self.processes}"]
        return [*args, "--", *argv]


@dataclass
class Probe:
    """Whether the sandbox runs here: ``isolation`` when it does, else ``reason`` (one short
    line; :data:`INSTALL_HINT` says what to do about it)."""

    isolation: Isolation | None
    reason: str

    @property
    def available(self) -> bool:
        return self.isolation is not None


_probed: Probe | None = None
_trial: tuple[Isolation, _Trial] | None = None  # started by probe_soon(), not yet collected


def _new_isolation(bwrap: str, *, modern: bool = True) -> Isolation:
    uid = ids.uid_range()[1] if ids.can_switch() else -1  # the trial run's uid
    return Isolation(
        bwrap, runtime.find(), uid=uid, modern=modern, processes=limits.DEFAULT_LIMITS.processes
    )


def probe_soon() -> None:
    """Start the trial run of :func:`probe` and return at once; :func:`probe` collects it.
    ``gpushare grade`` starts it before importing the grader, so it is over when the learner's
    runs need its answer, and collects it whatever the grade became (:func:`settle`). Does
    nothing when the answer is known or on its way."""
    global _probed, _trial
    if _probed is not None or _trial is not None:
        return
    bwrap = find_bwrap()
    if bwrap is None:
        _probed = Probe(None, "bwrap (bubblewrap) not found")
        return
    try:
        isolation = _new_isolation(bwrap)
    except OSError as exc:
        _probed = Probe(None, f"the sandbox's python3 could not be prepared: {exc}")
        return
    _trial = (isolation, _start_trial(isolation.command(["true"], cwd=None), isolation.uid))


def probe(*, refresh: bool = False) -> Probe:
    """Find ``bwrap`` and start the real sandbox once (``true`` in it, as the run's uid would
    be); cached per process. Fails with a reason when bwrap is missing or may not create its
    namespaces here (``bwrap: No permissions to create new namespace...``)."""
    global _probed, _trial
    if refresh:
        _probed = None
        if _trial is not None:
            _finish(_trial[1])
            _trial = None
    probe_soon()
    if _trial is not None:
        (isolation, trial), _trial = _trial, None
        error = _finish(trial)
        if error is not None and "nknown option" in error:  # bwrap < 0.8
            isolation = _new_isolation(isolation.bwrap, modern=False)
            error = _finish(_start_trial(isolation.command(["true"], cwd=None), isolation.uid))
        if error is not None:
            _probed = Probe(None, f"bubblewrap cannot create its sandbox here: {explain(error)}")
        else:
            _probed = Probe(isolation, "")
    assert _probed is not None
    return _probed


def settle() -> None:
    """Collect the trial :func:`probe_soon` started if no one asked for its answer (a grade of
    steps that run no learner code, or one refused first): it ends before the grader does,
    never left running behind it as an orphan."""
    if _trial is not None:
        probe()


# A trial run: started, or why it could not start.
_Trial = subprocess.Popen[bytes] | str


def _start_trial(argv: list[str], uid: int) -> _Trial:
    """``argv`` with no shell, stdin and stdout on /dev/null, its stderr kept; as ``uid`` (and
    its gid, no other group) when given one."""
    own = uid >= 0
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin"},
            user=uid if own else None,
            group=uid if own else None,
            extra_groups=[] if own else None,
        )
    except OSError as exc:
        return str(exc)


def _finish(trial: _Trial) -> str | None:
    """Wait for ``trial`` (killed after :data:`_PROBE_TIMEOUT_S`); None if it exited 0, else why."""
    if isinstance(trial, str):
        return trial
    try:
        status = trial.wait(_PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        trial.kill()
        status = trial.wait()
    assert trial.stderr is not None  # stderr=PIPE
    with trial.stderr as fh:
        message = fh.read(4096).decode("utf-8", "replace").strip().splitlines()
    if status == 0:
        return None
    return (message[-1] if message else "") or f"exit status {status}"
