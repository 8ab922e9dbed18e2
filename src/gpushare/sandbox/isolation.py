"""The bubblewrap sandbox around a learner's script: what it may see, and whether it can run here.

In class grading every learner's ``bin/check-request.sh`` runs on the instructor's machine, and
whatever it prints ends up in feedback the learner reads. So on top of the reaper of
:mod:`gpushare.sandbox.supervisor` (time limit, output cap, every process ended) and the caps
of :mod:`gpushare.sandbox.limits`, each run is started by ``bwrap`` (Debian's ``bubblewrap``,
the sandbox Flatpak uses) in new user, pid, network, IPC, UTS and cgroup namespaces, with no
capabilities (not even inside its own namespaces: root's mapped uid could otherwise remount a
read-only bind
writable), unable to create further user namespaces, in a session of its own, and ending with
its reaper. Its filesystem is a read-only tmpfs holding only:

* ``/usr`` (and the ``/bin``, ``/lib``... links or directories beside it) and a few files of
  ``/etc`` that programs need (the dynamic linker's cache, ``alternatives`` for ``awk``,
  ``passwd``/``group``, the time zone): bash, coreutils, awk, sed, grep... as on the host;
* the grader's own Python interpreter (its install prefix) and PyYAML, as a small virtual
  environment at :data:`PYTHON_DIR` whose ``bin`` comes first on ``PATH``, so ``python3`` (and
  ``#!/usr/bin/env python3``) finds ``yaml.safe_load_all`` as the lab tells learners to use. Not
  the rest of the grader's home (a pyenv install lives under ``/root``) nor its other packages;
* the run's working directory (the learner's work dir) and the files it is given (the
  manifest), read-only, at their own paths;
* a private tmpfs at ``/tmp`` (``HOME`` and ``TMPDIR``), capped in size: the only writable place
  (besides a small ``/dev/shm``);
* ``/proc`` of its own pid namespace (it sees only its own processes) and a minimal, read-only
  ``/dev`` (``null``, ``zero``, ``urandom``... still work).

So no other submission, no instructor's home, no kubeconfig (``~/.kube``) and no lab keys
(``~/.cache/gpushare/...``), and no network at all: its network namespace has only its own
loopback, so even an apiserver on the host's 127.0.0.1 is out of reach, and abstract Unix
sockets are per namespace too. When its pid namespace's first process ends, the kernel kills
everything else in it, so nothing it starts, ``setsid`` daemons included, outlives the run.

:func:`probe` says whether this works here (``bwrap`` installed and allowed to create user
namespaces: some kernels, containers and AppArmor profiles forbid it); the policy of when to
refuse to grade without it is in :func:`require` and :func:`for_own_work`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from gpushare.sandbox.diagnose import explain
from gpushare.sandbox.supervisor import SandboxError

BWRAP_ENV = "GPUSHARE_BWRAP"  # a bwrap binary of one's own
PYTHON_DIR = "/opt/gpushare-python"  # the sandbox's python3 virtual environment
SCRATCH = "/tmp"
SCRATCH_BYTES = 64 * 1024 * 1024
SHM_BYTES = 16 * 1024 * 1024  # /dev/shm: Python's multiprocessing locks, no more
SANDBOX_PATH = f"{PYTHON_DIR}/bin:/usr/local/bin:/usr/bin:/bin"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install "
    "bubblewrap`), and allow unprivileged user namespaces if they are disabled "
    "(`sysctl kernel.unprivileged_userns_clone=1`; Ubuntu 24.04+: "
    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`)"
)
# Environment variables of the grader a script may keep (the locale shapes its messages).
_KEPT_ENV = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ")
# Files of /etc the lab's tools need; each bound only if it exists. Each bind costs a mount in
# every run (some 0.3 ms): ``ld.so.conf`` (read by ldconfig, not at run time) and
# ``nsswitch.conf`` (glibc reads the files without it) are left out.
_ETC = (
    "/etc/alternatives",  # awk -> mawk/gawk on Debian
    "/etc/group",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
)
_TOP_LEVEL = ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
_PROBE_TIMEOUT_S = 10.0


class IsolationUnavailable(SandboxError):
    """The sandbox is required but cannot run here; the message says why and what to do."""


@dataclass
class Runtime:
    """The Python the sandbox offers as ``python3``: the grader's own interpreter and PyYAML.

    ``executable`` is the real interpreter (symlinks resolved), ``prefix`` its install prefix,
    both bound read-only at their own paths. ``venv_cfg`` is a ``pyvenv.cfg`` to place in
    :data:`PYTHON_DIR` (None if none is needed), ``packages`` the directories bound into its
    ``site-packages`` (``yaml`` and ``_yaml``). Versions are those of these very files.
    """

    _: KW_ONLY
    executable: str
    prefix: str
    venv_cfg: str | None
    packages: list[str]
    site_packages: str
    python_version: str
    pyyaml_version: str | None


def find_runtime() -> Runtime:
    """The grader's interpreter and the PyYAML it imports (without importing it).

    The interpreter behind ``sys.executable`` (a venv's ``python`` is a symlink to it; a pyenv
    shim never is ``sys.executable``). PyYAML is located by the import system; a venv's
    ``pyvenv.cfg`` is reused so that the sandbox's ``python3`` is a venv with only PyYAML in it.
    """
    import importlib.util

    executable = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    version = ".".join(str(part) for part in sys.version_info[:3])
    site = f"{PYTHON_DIR}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
    packages: list[str] = []
    pyyaml_version = None
    for name in ("yaml", "_yaml"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            packages.append(os.path.realpath(next(iter(spec.submodule_search_locations))))
    if packages:
        pyyaml_version = _yaml_version(Path(packages[0]) / "__init__.py")
    venv_cfg = None
    if sys.prefix != sys.base_prefix and os.path.isfile(os.path.join(sys.prefix, "pyvenv.cfg")):
        venv_cfg = os.path.realpath(os.path.join(sys.prefix, "pyvenv.cfg"))
    else:
        venv_cfg = _write_venv_cfg(os.path.dirname(executable))
    return Runtime(
        executable=executable,
        prefix=prefix,
        venv_cfg=venv_cfg,
        packages=packages,
        site_packages=site,
        python_version=version,
        pyyaml_version=pyyaml_version,
    )


def _yaml_version(init: Path) -> str | None:
    """``yaml.__version__`` read from its source, so the grader need not import it."""
    try:
        for line in init.read_text(encoding="utf-8").splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("'\"")
    except OSError:
        return None
    return None


def _write_venv_cfg(home: str) -> str | None:
    """A ``pyvenv.cfg`` pointing at ``home`` (when the grader runs outside a venv), in the
    per-user cache; None if it cannot be written (then python3 runs without the venv)."""
    import zlib

    from gpushare.lab.binaries import cache_dir

    path = cache_dir() / "sandbox" / f"pyvenv-{zlib.crc32(home.encode()):08x}.cfg"
    text = f"home = {home}\ninclude-system-site-packages = true\n"
    try:
        if path.is_file() and path.read_text() == text:
            return str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    except OSError:
        return None
    return str(path)


def find_bwrap() -> str | None:
    """``$GPUSHARE_BWRAP``, else ``bwrap`` on ``PATH`` (or in /usr/bin), else None."""
    own = os.environ.get(BWRAP_ENV)
    if own:
        return own if os.access(own, os.X_OK) else None
    dirs = [*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin", "/bin"]
    for directory in dirs:
        path = os.path.join(directory or ".", "bwrap")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


class Isolation:
    """A bubblewrap sandbox that works here: builds each run's ``bwrap`` command line.

    Get one from :func:`probe` (or :func:`require`/:func:`for_own_work`), which checked that
    ``bwrap`` can create its namespaces on this machine; pass it to
    :class:`gpushare.sandbox.supervisor.Supervisor`.
    """

    def __init__(
        self,
        bwrap: str,
        runtime: Runtime,
        *,
        scratch_bytes: int = SCRATCH_BYTES,
        modern: bool = True,
    ) -> None:
        """``modern``: bwrap >= 0.8, which can forbid nested user namespaces and cap the size
        of a tmpfs; older ones (Ubuntu 22.04 has 0.6) still isolate, without those two."""
        self.bwrap = bwrap
        self.runtime = runtime
        self.scratch_bytes = scratch_bytes
        self.modern = modern
        self._base = self._base_args()

    def __repr__(self) -> str:
        return f"Isolation(bwrap={self.bwrap!r}, python3={self.runtime.python_version})"

    def _base_args(self) -> list[str]:
        args = [
            self.bwrap,
            "--unshare-all",  # user, ipc, pid, net, uts, cgroup
            "--unshare-user",  # required, not just "try"
            *(["--disable-userns"] if self.modern else []),
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for top in _TOP_LEVEL:
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        for path in _ETC:
            args += ["--ro-bind-try", path, path]
        rt = self.runtime
        args += ["--ro-bind", rt.prefix, rt.prefix]
        if not _is_under(rt.executable, rt.prefix):
            args += ["--ro-bind", rt.executable, rt.executable]
        for name in ("python3", "python"):
            args += ["--symlink", rt.executable, f"{PYTHON_DIR}/bin/{name}"]
        if rt.venv_cfg:
            args += ["--ro-bind", rt.venv_cfg, f"{PYTHON_DIR}/pyvenv.cfg"]
        for package in rt.packages:
            args += ["--ro-bind", package, f"{rt.site_packages}/{os.path.basename(package)}"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        if self.modern:  # POSIX shared memory, capped; read-only /dev below otherwise
            args += ["--size", str(SHM_BYTES), "--perms", "1777", "--tmpfs", "/dev/shm"]
            args += ["--size", str(self.scratch_bytes), "--perms", "1777"]
        args += ["--tmpfs", SCRATCH]
        return args

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | str | None,
        readable: Sequence[Path | str] = (),
        status_fd: int | None = None,
    ) -> list[str]:
        """The ``bwrap`` command that runs ``argv`` in ``cwd`` (bound read-only, as is each path
        of ``readable``), on a read-only root. ``status_fd``: where bwrap writes its JSON status
        (the reaper tells a command that ran from one bwrap could not start)."""
        args = list(self._base)
        for path in ([cwd] if cwd is not None else []) + list(readable):
            absolute = os.path.abspath(os.fspath(path))
            if absolute == "/":
                raise SandboxError("refusing to expose the whole filesystem to the sandbox")
            args += ["--ro-bind", absolute, absolute]
        args += ["--remount-ro", "/", "--remount-ro", "/dev"]  # not their mounts below
        args += ["--chdir", os.path.abspath(cwd) if cwd else SCRATCH]
        if status_fd is not None:
            args += ["--json-status-fd", str(status_fd)]
        return [*args, "--", *argv]

    def environment(self, env: Mapping[str, str] | None) -> dict[str, str]:
        """The script's environment: ``env`` (default: none of the grader's variables but the
        locale), with ``PATH``, ``HOME`` and ``TMPDIR`` those of the sandbox."""
        if env is None:
            base = {k: v for k, v in os.environ.items() if k in _KEPT_ENV or k.startswith("LC_")}
        else:
            base = dict(env)
        base.update(PATH=SANDBOX_PATH, HOME=SCRATCH, TMPDIR=SCRATCH)
        base.pop("PWD", None)
        return base

    def versions(self) -> dict[str, str | None]:
        """``{"python3": "3.11.7", "pyyaml": "6.0.4"}``: what a script finds in the sandbox,
        to compare with what the learner had (recorded in the snapshot). No run needed: the
        sandbox binds these very files."""
        return {"python3": self.runtime.python_version, "pyyaml": self.runtime.pyyaml_version}


def _is_under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


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
_trial: tuple[Isolation, _Trial | str] | None = None  # started by probe_soon(), not yet collected


def probe_soon() -> None:
    """Start the trial run of :func:`probe` now and return at once; :func:`probe` collects it.

    The trial is a few milliseconds of waiting on the kernel (new namespaces and mounts);
    ``gpushare grade`` starts it before importing the grader, so it is over by the time the
    learner's runs need its answer. Does nothing when the answer is known or on its way.
    """
    global _probed, _trial
    if _probed is not None or _trial is not None:
        return
    bwrap = find_bwrap()
    if bwrap is None:
        _probed = Probe(None, "bwrap (bubblewrap) not found")
        return
    isolation = Isolation(bwrap, find_runtime())
    _trial = (isolation, _Trial.start(isolation.command(["true"], cwd=None)))


def probe(*, refresh: bool = False) -> Probe:
    """Find ``bwrap`` and start the real sandbox once (``true`` in it); cached per process.

    A few milliseconds (none when :func:`probe_soon` started it early enough). Fails with a
    reason when bwrap is missing or may not create its namespaces here (``bwrap: No
    permissions to create new namespace...``).
    """
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
            isolation = Isolation(isolation.bwrap, isolation.runtime, modern=False)
            error = _finish(_Trial.start(isolation.command(["true"], cwd=None)))
        if error is not None:
            _probed = Probe(None, f"bubblewrap cannot create its sandbox here: {explain(error)}")
        else:
            _probed = Probe(isolation, "")
    assert _probed is not None
    return _probed


class _Trial:
    """A command started with no shell, stdin and stdout on /dev/null, its stderr kept."""

    def __init__(self, pid: int, err_r: int) -> None:
        self.pid, self.err_r = pid, err_r

    @classmethod
    def start(cls, argv: list[str]) -> _Trial | str:
        """The started command, or why it could not start."""
        err_r, err_w = os.pipe()
        try:
            pid = os.posix_spawn(
                argv[0],
                argv,
                {"PATH": SANDBOX_PATH},
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_DUP2, err_w, 2),
                ],
            )
        except OSError as exc:
            os.close(err_r)
            return str(exc)
        finally:
            os.close(err_w)
        return cls(pid, err_r)


def _finish(trial: _Trial | str) -> str | None:
    """Wait for ``trial`` (killed after :data:`_PROBE_TIMEOUT_S`); None if it exited 0, else
    why."""
    if isinstance(trial, str):
        return trial
    deadline = time.monotonic() + _PROBE_TIMEOUT_S
    status = None
    while status is None:
        done, raw = os.waitpid(trial.pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
        elif time.monotonic() > deadline:
            os.kill(trial.pid, 9)
            os.waitpid(trial.pid, 0)
            status = -9
        else:
            time.sleep(0.002)
    with os.fdopen(trial.err_r, "rb") as fh:
        message = fh.read(4096).decode("utf-8", "replace").strip().splitlines()
    if status == 0:
        return None
    return (message[-1] if message else "") or f"exit status {status}"


# --- policy -----------------------------------------------------------------------------------

_noticed = False


def require(*, unsafe_no_sandbox: bool = False) -> Isolation | None:
    """The sandbox for grading someone else's work (a snapshot, a class): refuse without it.

    Returns the isolation to use, or None when ``unsafe_no_sandbox`` (the instructor's explicit
    ``--unsafe-no-sandbox``: run without the sandbox, as asked). Raises
    :class:`IsolationUnavailable` when the sandbox cannot run here and no such flag was given.
    """
    if unsafe_no_sandbox:
        return None
    found = probe()
    if found.isolation is None:
        raise IsolationUnavailable(
            f"refusing to run learners' scripts without a sandbox: {found.reason}; "
            f"{INSTALL_HINT}; or pass --unsafe-no-sandbox to run them unsandboxed (only for "
            "trusted work)"
        )
    return found.isolation


def for_own_work() -> tuple[Isolation | None, str | None]:
    """The sandbox for a learner grading their own work in their pod: used where it runs,
    skipped otherwise. Returns ``(isolation or None, notice)``: ``notice`` is one line to print
    when running unsandboxed, given only once per process (so a grade says it once)."""
    global _noticed
    found = probe()
    if found.isolation is not None:
        return found.isolation, None
    if _noticed:
        return None, None
    _noticed = True
    return None, f"note: bin/check-request.sh runs without a sandbox here ({found.reason})"


def choose(*, snapshot: bool, unsafe_no_sandbox: bool) -> Isolation | None:
    """The sandbox for the learner's runs, by whose work is graded.

    Someone else's work (a snapshot) runs only in the sandbox, unless the instructor passed
    ``--unsafe-no-sandbox`` (:func:`require`; IsolationUnavailable otherwise); a learner grading
    their own work in their pod uses it where it runs, and is told once on stderr when it does
    not (:func:`for_own_work`). Light to import: ``gpushare grade`` calls it before anything
    else, so that the runs start first.
    """
    if snapshot:
        return require(unsafe_no_sandbox=unsafe_no_sandbox)
    if unsafe_no_sandbox:
        return None
    found, notice = for_own_work()
    if notice:
        print(f"gpushare: {notice}", file=sys.stderr)
    return found
