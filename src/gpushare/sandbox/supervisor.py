"""Run a learner's untrusted script for real, with a time limit, an output cap and full cleanup.

A learner's script may hang, flood its output, or leave processes behind, daemons that
double-fork and call ``setsid`` included, which escape any process group or session we could
kill: left alone they would outlive the grade, hold our pipes open (the output would never end)
and pile up on a shared machine.

Design: the grader never runs the script itself. A :class:`Supervisor` starts one *master* per
grade (:mod:`gpushare.sandbox.reaper`, forked from the grader when that is safe, else a fresh
``python -I -S``) and hands it each run, the run's pipes included, through a socket. For each
run the master forks a *reaper*, which

* is a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): every orphan of the script's tree,
  double-forked daemons included, is re-parented to it rather than to init, so it is still
  found among the reaper's descendants;
* gets ``SIGTERM`` when the master dies (``PR_SET_PDEATHSIG``; the master asks the same of the
  grader) and takes the end of its control pipe from the grader as "abort": no run outlives
  the grader;
* starts the script in a new session, stdin on ``/dev/null``, stdout and stderr on pipes the
  grader reads, keeps the time limit, and at the end ends all it started the way its isolation
  level does (:mod:`gpushare.sandbox.levels`).

One reaper per run keeps runs apart: each cleans up its own run only, and a script that kills
its reaper loses its own run only. Forking the master costs about a millisecond where a Python
interpreter per run cost some 30 ms of CPU, a good part of a one-second grade on two cores.
Only reapers are subreapers, never the grader: a subreaper grader would silently collect every
orphan of every tool it runs. Every run is capped too (:mod:`gpushare.sandbox.limits`).

At level ``none`` this is hygiene, not a security boundary: the script runs as the grader's
user, with its filesystem and network (the levels that are a boundary:
:mod:`gpushare.sandbox.levels`). Linux only.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import select
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from gpushare.sandbox import reaper, runtime
from gpushare.sandbox.errors import SandboxError as SandboxError  # raised to the graders
from gpushare.sandbox.isolation import SCRATCH, environment
from gpushare.sandbox.levels import NO_SANDBOX, Level, Sandbox
from gpushare.sandbox.staging import Stage

# Where the ``gpushare`` package lives, for the master's ``sys.path`` (``-I`` leaves it out).
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MASTER_CODE = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from gpushare.sandbox.reaper import main; main(int(sys.argv[2]))"
)
# Beyond the script's own limit, how long a reaper may take before we end it ourselves:
# SIGTERM (it still cleans up), then SIGKILL one second later.
_HARD_TERM_AFTER_S = 2.0
_HARD_KILL_AFTER_S = 3.0
# After the supervisor reported, how long its pipes may take to reach EOF.
_DRAIN_S = 1.0
_READ_CHUNK = 64 * 1024
_STATUS_CAP = 4096
# How long closing a Supervisor waits for the master (and any reaper still cleaning up).
_MASTER_EXIT_S = 5.0
# Descriptors a forked master closes: all of ours above stdin, stdout and stderr.
_MAX_FD = os.sysconf("SC_OPEN_MAX")
# The descriptor on which bubblewrap writes its status (a pipe the reaper reads).
_BWRAP_STATUS_FD = 3


@dataclass
class RunResult:
    """What one run of an untrusted script did.

    ``returncode``: None when the run was ended at its time limit, -N when the script died of
    signal N (-9 when ended for flooding its output); ``128 + N`` in the bubblewrap sandbox, as
    a shell says it. ``stdout``/``stderr``: at most ``output_cap`` bytes each, decoded as UTF-8
    with replacement; ``truncated``: whether either had more. ``duration``: wall seconds from
    the request to the end of the cleanup. ``leftover_killed``: the processes other than the
    script still alive at the end and killed (background jobs and daemons it left, and after a
    timeout or a flood the children it was running; mostly 0 in the bubblewrap sandbox, whose
    pid namespace dies with the script). ``isolation``: the run's level
    (:mod:`gpushare.sandbox.levels`). A process over a cap just fails to fork or allocate.
    """

    _: KW_ONLY
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration: float
    leftover_killed: int
    isolation: str = "none"


def check_runnable(path: Path) -> str | None:
    """None if ``path`` is a regular executable file (symlinks followed), else a stable key
    (``missing``, ``dangling_link``, ``directory``, ``not_executable``, ``not_regular``), so the
    grader tells the learner what is wrong with the script rather than an exec error."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "dangling_link" if os.path.islink(path) else "missing"
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink loop never resolves to a file
            return "dangling_link"
        if exc.errno == errno.EACCES:  # a directory on the way is not searchable
            return "not_executable"
        return "missing"
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if not stat.S_ISREG(st.st_mode):
        return "not_regular"
    if not os.access(path, os.X_OK):
        return "not_executable"
    return None


class _Master:
    """The master process: forked from the grader when the grader has no other thread (the
    usual case: `gpushare grade` starts it first thing), else a fresh interpreter.

    A fork costs about a millisecond; a fresh ``python -I -S`` some 30 ms of CPU before the first
    run, on the two cores the runs need. Forking a process with other threads is unsafe (a lock
    another thread holds stays locked in the child), hence the fallback, started with
    ``posix_spawn``: a bare pid, waited for here like a forked one (a ``subprocess.Popen`` left
    to the garbage collector would reap it behind our back). Either way its stdin is the request
    socket, its stdout /dev/null, its stderr ours (for a bug's traceback), and nothing else of
    ours.
    """

    def __init__(self, sock_fd: int, start: str = "auto") -> None:
        if start == "auto":
            start = "fork" if threading.active_count() == 1 else "spawn"
        self.how = start
        self.pid = self._fork(sock_fd) if start == "fork" else self._spawn(sock_fd)
        self.returncode: int | None = None

    @staticmethod
    def _fork(sock_fd: int) -> int:
        grader = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the master, covered through the runs it serves
            try:
                os.dup2(sock_fd, 0)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.closerange(3, _MAX_FD)  # the grader's files, sockets and pipes
                reaper.main(grader)  # never returns
            finally:
                os._exit(1)
        return pid

    @staticmethod
    def _spawn(sock_fd: int) -> int:
        argv = [
            sys.executable,
            "-I",  # isolated: no PYTHON* variables, no user site, no cwd on the path
            "-S",  # no site: faster start-up, and the master needs only the stdlib
            "-c",
            _MASTER_CODE,
            _PACKAGE_ROOT,
            str(os.getpid()),
        ]
        # Every other descriptor of ours is close-on-exec (PEP 446): none leaks into it.
        return os.posix_spawn(
            sys.executable,
            argv,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, sock_fd, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            ],
        )

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status, or None if the master still runs after ``timeout`` s. A pidfd is
        readable the moment the process exits, so the grade's end is not a polling interval
        late (Linux 5.3; polled for where a seccomp filter or an old kernel refuses it)."""
        if self.poll() is None:
            try:
                fd = os.pidfd_open(self.pid)
            except OSError:
                deadline = None if timeout is None else time.monotonic() + timeout
                delay = 0.0005
                while self.poll() is None and (deadline is None or time.monotonic() < deadline):
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
            else:
                try:
                    select.select([fd], [], [], timeout)
                finally:
                    os.close(fd)
        return self.poll()

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)  # our unreaped child: the pid is still its own


class Supervisor:
    """The master process that serves every run of one grade (see the module docstring).

    Start it from a thread that outlives its runs, typically the main thread: the master's
    ``PR_SET_PDEATHSIG`` fires when the thread that started it ends. :meth:`run` may then be
    called from any number of threads at once. Use it as a context manager, or call
    :meth:`close`, which also ends runs still going.
    """

    def __init__(self, *, start: str = "auto", sandbox: Sandbox | None = None) -> None:
        """``start``: ``fork``, ``spawn`` or ``auto`` (see :class:`_Master`); tests use the
        first two. ``sandbox``: the level of every run (:func:`gpushare.sandbox.levels.choose`;
        None: ``none``, the grader's uid); every run has the caps of
        :data:`gpushare.sandbox.limits.DEFAULT_LIMITS`."""
        self.sandbox = sandbox or NO_SANDBOX
        if start not in ("auto", "fork", "spawn"):
            raise ValueError(f"start must be auto, fork or spawn, not {start!r}")
        if start != "fork" and not sys.executable:
            raise SandboxError("no Python interpreter path (sys.executable) to run the supervisor")
        self._stage = Stage(self.sandbox) if self.sandbox.own_uid else None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = _Master(theirs.fileno(), start)
        except BaseException:
            ours.close()
            if self._stage is not None:
                self._stage.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._send_lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the master: runs still going are aborted, their processes killed."""
        if self._closed:
            return
        self._closed = True
        self._sock.close()  # EOF for the master
        if self._proc.wait(timeout=_MASTER_EXIT_S) is None:
            self._proc.kill()  # its reapers get SIGTERM (PDEATHSIG) and still clean up
            self._proc.wait()
        if self._stage is not None:
            self._stage.close()

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout: float = 5.0,
        output_cap: int = 64 * 1024,
        env: dict[str, str] | None = None,
        readable: Sequence[Path] = (),
    ) -> RunResult:
        """Run ``argv`` (no shell) in ``cwd`` (:meth:`submit`) and wait for it.

        The run is ended when it exceeds ``timeout`` seconds or writes more than ``output_cap``
        bytes to either stream; every process it started is killed before this returns. Raises
        OSError (e.g. FileNotFoundError, or ENOEXEC for a script without ``#!``) when the script
        cannot be executed, SandboxError when the supervisor itself fails.
        """
        return self.submit(
            argv, cwd=cwd, timeout=timeout, output_cap=output_cap, env=env, readable=readable
        ).result()

    def submit(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout: float = 5.0,
        output_cap: int = 64 * 1024,
        env: dict[str, str] | None = None,
        readable: Sequence[Path] = (),
    ) -> Pending:
        """Start a run now; :meth:`Pending.result` (from any thread) waits for it. Its reaper
        keeps its time limit whoever collects it and whenever; collect every submitted run, or
        close the supervisor (which ends them).

        At ``bubblewrap`` and ``uid`` the script may read ``cwd`` and the paths in ``readable``
        (e.g. the manifest it is given) and nothing else of the grader's; its environment is
        ``env`` (default: only the locale of ours) with the run's ``PATH``, ``HOME`` and
        ``TMPDIR``. At ``none``, ``readable`` changes nothing and ``env`` defaults to ours.
        """
        argv = _checked(argv, timeout, output_cap)
        level = self.sandbox.level
        if level is not Level.NONE:
            problem = _exec_problem(argv[0], cwd)
            if problem is not None:
                return Pending(argv, cwd, 0.0, 0.0, 0, [], error=problem)
        uid, gid, pairs = self._place(cwd, readable)
        argv, env, status_fd, view = self._command(argv, cwd, env, pairs)
        cleanup = {Level.BUBBLEWRAP: "pidns", Level.UID: "ns"}.get(level, "tree")
        request = _encode_request(
            argv,
            cwd,
            timeout,
            os.environ if env is None else env,
            status_fd,
            (cleanup, uid, gid),
            view,
        )
        start = time.monotonic()
        ours = self._send(request, uid)
        release = functools.partial(self._stage.slot.give, uid) if self._stage else None
        return Pending(
            argv,
            cwd,
            start,
            start + timeout,
            output_cap,
            ours,
            isolation=level.value,
            release=release,
        )

    def _place(self, cwd: Path, readable: Sequence[Path]) -> tuple[int, int, list[tuple[str, str]]]:
        """The run's uid and gid (-1: the grader's) and its (source, destination) binds: at a
        level with a uid per run, a uid taken from the slot and ``cwd`` and ``readable`` staged
        where that uid can read them (the uid is given back if staging fails); else the paths
        themselves, bound in place."""
        if self._stage is None:
            return -1, -1, [(os.path.abspath(p), os.path.abspath(p)) for p in [cwd, *readable]]
        slot = self._stage.slot
        try:
            uid = slot.take()
        except OSError as exc:
            raise SandboxError(f"no uid for this run: {exc}") from None
        try:
            pairs = self._stage.place(cwd, readable)
        except OSError as exc:
            slot.give(uid)
            raise SandboxError(f"could not stage the run's files: {exc}") from None
        return uid, slot.gid, pairs

    def _command(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str] | None,
        pairs: list[tuple[str, str]],
    ) -> tuple[list[str], dict[str, str] | None, int | None, list[str]]:
        """What the reaper runs at this level: (argv, environment, descriptor of bubblewrap's
        status pipe, view). At ``bubblewrap``, the script wrapped in bwrap with the binds; at
        ``uid``, the script itself, with the view its init builds (the view's root, then
        source and destination of each bind, the runtime's home first unless under /usr,
        which is shown anyway); both with the run's environment. At ``none``, as given."""
        level = self.sandbox.level
        if level is Level.BUBBLEWRAP:
            assert self.sandbox.isolation is not None
            env = environment(self.sandbox.isolation.runtime, env, SCRATCH)
            argv = self.sandbox.isolation.command(
                argv, cwd=os.fspath(cwd), binds=pairs, status_fd=_BWRAP_STATUS_FD
            )
            return argv, env, _BWRAP_STATUS_FD, []
        if level is Level.UID:
            assert self._stage is not None
            found = runtime.find()
            env = environment(found, env, SCRATCH)
            shown = [] if found.home.startswith("/usr/") else [(found.home, found.home)]
            view = [self._stage.view_root]
            for source, dest in [*shown, *pairs]:
                view += [source, dest]
            return argv, env, None, view
        return argv, env, None, []

    def _send(self, request: bytes, uid: int) -> list[int]:
        """Hand ``request`` to the master with the run's four pipes (their other ends); return
        our ends (stdout, stderr, status, control). If it cannot be sent, our ends are closed
        and the run's uid given back; the master's ends are closed here in any case."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        st_r, st_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        ours = [out_r, err_r, st_r, ctl_w]
        try:
            with self._send_lock:
                if self._closed:
                    raise SandboxError("the sandbox supervisor is closed")
                socket.send_fds(self._sock, [request], [ctl_r, out_w, err_w, st_w])
        except BaseException as exc:
            for fd in ours:
                os.close(fd)
            if self._stage is not None:
                self._stage.slot.give(uid)
            if isinstance(exc, OSError):
                raise SandboxError(
                    f"the sandbox supervisor is gone (exit status {self._proc.poll()}): {exc}"
                ) from None
            raise
        finally:
            for fd in (out_w, err_w, st_w, ctl_r):
                os.close(fd)
        return ours


def _exec_problem(path: str, cwd: Path) -> OSError | None:
    """Why execve would refuse ``path``, checked before a sandboxed run; None if it would not.

    Inside the sandbox the command is started by bwrap's ``execvp``, which runs a file without
    ``#!`` through ``/bin/sh`` instead of failing with ENOEXEC as unsandboxed runs do. Checking
    here keeps both modes alike (the file is the same: bound read-only). Names without a slash
    are searched on the sandbox's PATH, by bwrap.
    """
    if "/" not in path:
        return None
    full = os.path.join(cwd, path)
    try:
        st = os.stat(full)
        if stat.S_ISDIR(st.st_mode) or not os.access(full, os.X_OK):
            return PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        with open(full, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        return type(exc)(exc.errno, exc.strerror, path)
    if head[:2] != b"#!" and head != b"\x7fELF":
        return OSError(errno.ENOEXEC, os.strerror(errno.ENOEXEC), path)
    return None


@dataclass
class Pending:
    """A submitted run: its pipes, until :meth:`result` has read them (once); or, with
    ``error``, a run refused before it started, whose :meth:`result` raises why. ``release``
    gives back the run's own uid once it is over (nothing else of it is left: it ended with its
    namespaces)."""

    argv: list[str]
    cwd: Path
    start: float
    deadline: float
    output_cap: int
    fds: list[int]
    _: KW_ONLY
    isolation: str = "none"
    release: Callable[[], None] | None = None
    error: OSError | None = None

    def result(self) -> RunResult:
        """Wait for the run; raise OSError if it could not start, SandboxError on our failure."""
        if self.error is not None:
            raise self.error
        out_r, err_r, st_r, ctl_w = self.fds
        try:
            out, err, status, truncated, hard_killed = _collect(
                out_r, err_r, st_r, ctl_w, self.deadline, self.output_cap
            )
        finally:
            for fd in self.fds:
                os.close(fd)
        duration = time.monotonic() - self.start
        release, self.release = self.release, None
        # a run its reaper did not end keeps its uid: it is not given to another run
        if release is not None and b"\ndone " in b"\n" + status:
            release()

        script_pid = None
        for line in status.decode("utf-8", "replace").splitlines():
            word, _, rest = line.partition(" ")
            if word == "pid" and rest.isdigit():
                script_pid = int(rest)
            elif word == "done":
                rc, timed_out, leftovers = rest.split()
                return RunResult(
                    returncode=None if rc == "none" else int(rc),
                    stdout=out.decode("utf-8", "replace"),
                    stderr=err.decode("utf-8", "replace"),
                    timed_out=timed_out == "1",
                    truncated=truncated,
                    duration=duration,
                    leftover_killed=int(leftovers),
                    isolation=self.isolation,
                )
            elif word == "unstarted":
                raise _bwrap_failure(err.decode("utf-8", "replace"))
            elif word in ("exec", "cwd"):
                code = int(rest) if rest.isdigit() else 0
                where = str(self.cwd) if word == "cwd" else self.argv[0]
                if code:
                    raise OSError(code, os.strerror(code), where)
                raise OSError(errno.ENOEXEC, "cannot start", where)
            elif word == "error":
                raise SandboxError(f"sandbox supervisor failed: {rest}")
        stray = _kill_session(script_pid) if script_pid is not None else 0
        why = "had to be killed" if hard_killed else "ended"
        raise SandboxError(
            f"sandbox supervisor {why} without a result; {stray} stray process(es) killed "
            f"best-effort; stderr: {err[-2000:].decode('utf-8', 'replace')!r}"
        )


# "bwrap: execvp NAME: STRERROR" back to an errno, so a sandboxed exec failure reads as one.
_ERRNO_OF = {os.strerror(code): code for code in errno.errorcode}


def _bwrap_failure(stderr: str) -> Exception:
    """What bubblewrap's last message means when it could not start the command.

    ``execvp`` failures (the script or its interpreter is not found in the sandbox) become the
    OSError an unsandboxed exec raises; anything else (a bind that failed...) is ours.
    """
    lines = [line for line in stderr.splitlines() if line.startswith("bwrap: ")]
    last = lines[-1][len("bwrap: ") :] if lines else stderr.strip()[-500:]
    if last.startswith("execvp "):
        name, _, why = last[len("execvp ") :].rpartition(": ")
        code = _ERRNO_OF.get(why)
        if code is not None:
            return OSError(code, why, name)
    return SandboxError(f"the sandbox could not start the script: {last}")


def _checked(argv: list[str], timeout: float, output_cap: int) -> list[str]:
    argv = list(argv)
    if not argv:
        raise ValueError("argv must not be empty")
    if not all(isinstance(arg, str) for arg in argv):
        raise TypeError("argv must be a list of str")
    if any("\0" in arg for arg in argv):
        raise ValueError("argv must not contain NUL characters")
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if output_cap < 0:
        raise ValueError(f"output_cap must not be negative, not {output_cap!r}")
    return argv


def _encode_request(
    argv: list[str],
    cwd: Path,
    timeout: float,
    env: Mapping[str, str],
    status_fd: int | None,
    who: tuple[str, int, int],
    view: Sequence[str],
) -> bytes:
    """The master's wire format (see ``_Request``), refusing what execve could not take."""
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ValueError(f"illegal environment variable: {key!r}")
    if "\0" in os.fspath(cwd):
        raise ValueError("cwd must not contain NUL characters")
    if any("\0" in entry for entry in view):
        raise ValueError("a path of the view must not contain NUL characters")
    fields = [
        "run",
        repr(float(timeout)),
        os.fspath(cwd),
        "" if status_fd is None else str(status_fd),
        *map(str, who),
        str(len(argv)),
        *argv,
        str(len(view)),
        *view,
        *(f"{key}={value}" for key, value in env.items()),
    ]
    return b"\0".join(map(os.fsencode, fields))


def _collect(
    out_r: int,
    err_r: int,
    st_r: int,
    ctl_w: int,
    deadline: float,
    output_cap: int,
) -> tuple[bytes, bytes, bytes, bool, bool]:
    """Read the script's output and the reaper's status until all reach EOF.

    Keeps at most ``output_cap`` bytes per stream, asks the reaper to end the run at the first
    excess byte and discards the rest, so memory stays bounded whatever the script writes.
    Returns (stdout, stderr, status, truncated, reaper_was_hard_killed).
    """
    hard_term = deadline + _HARD_TERM_AFTER_S
    hard_kill = deadline + _HARD_KILL_AFTER_S
    bufs = {out_r: bytearray(), err_r: bytearray()}
    status = bytearray()
    truncated = kill_sent = term_sent = False
    drain_until = math.inf
    poller = select.poll()
    open_fds = {out_r, err_r, st_r}
    for fd in open_fds:
        poller.register(fd, select.POLLIN)
    while open_fds:
        now = time.monotonic()
        if now >= drain_until:
            break
        if now >= hard_kill:
            _signal_reaper(status, signal.SIGKILL)
            return bytes(bufs[out_r]), bytes(bufs[err_r]), bytes(status), truncated, True
        if now >= hard_term and not term_sent:
            _signal_reaper(status, signal.SIGTERM)  # it treats it as "abort", still cleans up
            term_sent = True
        wake = min(drain_until, hard_kill if term_sent else hard_term)
        for fd, _events in poller.poll(max(0, math.ceil((wake - now) * 1000))):
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
                if fd == st_r:  # reaper exiting: its pipes close with it
                    drain_until = time.monotonic() + _DRAIN_S
                continue
            if fd == st_r:
                status += chunk[: max(0, _STATUS_CAP - len(status))]
                continue
            buf = bufs[fd]
            room = output_cap - len(buf)
            buf += chunk[:room]
            if len(chunk) > room:
                truncated = True
                if not kill_sent:
                    kill_sent = True
                    with contextlib.suppress(OSError):  # reaper already gone
                        os.write(ctl_w, b"k")
    return bytes(bufs[out_r]), bytes(bufs[err_r]), bytes(status), truncated, False


def _signal_reaper(status: bytearray, sig: int) -> None:
    """Signal the run's reaper, known from its first status line, if it is still there.

    The reaper is the master's child, not ours, but while it holds the status pipe open (we are
    still waiting on it) it is alive or an unreaped zombie, so its pid cannot name anyone else.
    """
    first = bytes(status).split(b"\n", 1)[0].split()
    if len(first) == 2 and first[0] == b"reaper" and first[1].isdigit():
        with contextlib.suppress(OSError):
            os.kill(int(first[1]), sig)


def _kill_session(sid: int) -> int:
    """Fallback when the supervisor died: kill what is left of the script's session.

    Catches the script's ordinary children (now orphans of init), not daemons that made their own
    session; a session id cannot be handed out again while a process still uses it.
    """
    killed: set[int] = set()
    for _ in range(10):
        victims = [
            (pid, start)
            for pid, (state, _ppid, session, start) in reaper.scan_processes().items()
            if session == sid and state not in ("Z", "X")
        ]
        if not victims:
            break
        killed.update(pid for pid, start in victims if reaper.kill_exact(pid, start))
        time.sleep(0.01)
    return len(killed)
