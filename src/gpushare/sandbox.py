"""Run a learner's untrusted script for real, with a time limit, an output cap and full cleanup.

The grader executes ``bin/check-request.sh <manifest>`` as the learner wrote it. Such a script may
hang, flood its output, or leave processes behind — including daemons that double-fork and call
``setsid``, which escape any process group or session we could kill. Left alone, those strays
would outlive the grading run, hold our pipes open (so reading the output would never finish) and
pile up on a shared machine.

Design: the grader never runs the script directly. It starts a small supervisor, this very file
run as ``python -I -S sandbox.py``, which

* marks itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so every orphan in the
  script's tree — double-forked daemons included — is re-parented to it rather than to init, and
  is therefore still found by walking the supervisor's descendants;
* asks to receive ``SIGTERM`` when the grader dies (``PR_SET_PDEATHSIG``), and also treats the
  end of its control pipe from the grader as "abort", so no run outlives the grader;
* starts the script in a new session with stdin on ``/dev/null`` and stdout/stderr on pipes read
  by the grader, enforces the time limit, and in the end SIGKILLs every descendant, repeating
  until it has no child left (only then can no descendant remain).

Only the supervisor is a subreaper, never the grader: a subreaper grader would silently collect
every orphan of every tool it runs. The supervisor path imports nothing but small stdlib modules
(``dataclasses``, ``pathlib`` and ``subprocess`` alone would cost tens of milliseconds per run on
a slow machine), which is why it sits at the top of this file and exits before the grader-side
imports below.

This is hygiene, not a security boundary: the script runs as the grader's user, with its
filesystem and network, and could signal the grader itself. Linux only.
"""

from __future__ import annotations

# The C half of `signal`: same functions, plain-int constants, without the ~15 ms that importing
# `enum` (for Signals/Handlers) costs the supervisor at every run.
import _signal
import ctypes
import os
import select
import sys
import time

# ---------------------------------------------------------------------------------------------
# Supervisor side ("reaper"): runs in its own short-lived Python process, stdlib-light on purpose.
# ---------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_ABORT_SIGNALS = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGINT)
# Give up on processes that ignore SIGKILL (stuck in uninterruptible sleep) after this long; the
# kernel still delivers the pending SIGKILL once they wake up.
_CLEANUP_GIVE_UP_S = 2.0
_EXEC_FAILED = 127


def _prctl(option: int, arg: int) -> None:
    """Call prctl(2) through libc: the stdlib has no binding, and ctypes is cheap to import."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def _read_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, session id, start time) of ``pid`` from /proc, or None if it is gone.

    The start time (in clock ticks since boot) together with the pid identifies one process for
    good, which lets us detect a pid that was recycled between a scan and a kill.
    """
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[1]), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _scan_processes() -> dict[int, tuple[str, int, int, int]]:
    """All processes visible in /proc (/proc/PID/task/TID/children needs a kernel option)."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _read_stat(int(name))
            if info is not None:
                procs[int(name)] = info
    return procs


def _live_descendants(root: int) -> list[tuple[int, int]]:
    """(pid, start time) of every non-zombie descendant of ``root``, parents before children."""
    children: dict[int, list[tuple[int, int]]] = {}
    for pid, (state, ppid, _sid, start) in _scan_processes().items():
        # A zombie has no children of its own (they were re-parented when it died).
        if state not in ("Z", "X"):
            children.setdefault(ppid, []).append((pid, start))
    found: list[tuple[int, int]] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, start in children.get(parent, ()):
            found.append((pid, start))
            frontier.append(pid)
    return found


def _kill_exact(pid: int, start: int) -> bool:
    """SIGKILL the process ``pid`` only if it is still the one that started at ``start``.

    A pidfd pins one process, so checking the start time after opening it closes the window in
    which a dead descendant's pid could be reused by an unrelated process of the same user.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # no pidfd support (kernel < 5.3): plain kill, tiny pid-reuse window
        info = _read_stat(pid)
        if info is None or info[3] != start:
            return False
        try:
            os.kill(pid, _signal.SIGKILL)
        except OSError:
            return False
        return True
    try:
        info = _read_stat(pid)
        if info is None or info[3] != start:
            return False
        _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
        return True
    except OSError:  # gone meanwhile, or not ours to kill (EPERM)
        return False
    finally:
        os.close(pidfd)


def _kill_tree(main_pid: int) -> tuple[int, dict[int, int]]:
    """Kill and reap every descendant; return (strays killed besides main_pid, wait statuses).

    Because we are a subreaper, a live descendant always has a chain of parents up to us, so once
    waitpid reports that we have no child at all, nothing of the script's tree is left. Killing
    the whole tree each round (not level by level) keeps a fork loop from outrunning us.
    """
    me = os.getpid()
    killed: set[int] = set()
    statuses: dict[int, int] = {}
    give_up = time.monotonic() + _CLEANUP_GIVE_UP_S
    while True:
        for pid, start in _live_descendants(me):
            if _kill_exact(pid, start) and pid != main_pid:
                killed.add(pid)
        try:
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                statuses[pid] = status
        except ChildProcessError:
            return len(killed), statuses
        if time.monotonic() > give_up:
            return len(killed), statuses
        time.sleep(0.001)  # let the SIGKILLed processes die before the next scan


def _spawn(argv: list[str], reaper_pid: int) -> int:
    """Fork and exec the script in a new session, stdin on /dev/null; raise OSError if exec fails.

    A hand-written fork/exec rather than ``subprocess``: that module alone costs more to import
    than the rest of the supervisor.
    """
    err_r, err_w = os.pipe()  # close-on-exec: EOF without data means exec succeeded
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child, replaced by exec
        try:
            os.close(err_r)
            _signal.set_wakeup_fd(-1)
            # Python ignores SIGPIPE and SIGXFSZ, and ignored signals survive exec: restore them,
            # or e.g. `yes | head -1` inside the script would never end.
            for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGCHLD, *_ABORT_SIGNALS):
                _signal.signal(sig, _signal.SIG_DFL)
            os.setsid()
            # Dies with the supervisor even if the supervisor is SIGKILLed (kept across exec).
            _prctl(_PR_SET_PDEATHSIG, _signal.SIGKILL)
            if os.getppid() != reaper_pid:
                os._exit(_EXEC_FAILED)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)  # also drops the control pipe, which was our stdin
            os.close(devnull)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(err_w, str(exc.errno or 0).encode())
        except BaseException:
            os.write(err_w, b"0")
        os._exit(_EXEC_FAILED)
    os.close(err_w)
    try:
        chunks = []
        while chunk := os.read(err_r, 64):
            chunks.append(chunk)
    finally:
        os.close(err_r)
    if chunks:
        os.waitpid(pid, 0)
        err = int(b"".join(chunks) or b"0")
        raise OSError(err, os.strerror(err) if err else "cannot start", argv[0])
    return pid


def _has_exited(pid: int) -> bool:
    """True once ``pid`` (our child) has exited, without reaping it (WNOWAIT)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _wait_for_script(pid: int, deadline: float, ctl_fd: int, wake_fd: int) -> str:
    """Block until the script exits, the deadline passes or the grader intervenes.

    Returns "exit", "timeout", "kill" (the grader wants it ended: output cap reached) or "abort"
    (the grader is gone or asked us to stop). SIGCHLD and abort signals wake us through the
    signal wakeup fd, so none of them can be missed between a check and the poll.
    """
    poller = select.poll()
    poller.register(ctl_fd, select.POLLIN)
    poller.register(wake_fd, select.POLLIN)
    while True:
        if _has_exited(pid):
            return "exit"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        for fd, _events in poller.poll(int(remaining * 1000) + 1):
            if fd == ctl_fd:
                return "kill" if os.read(ctl_fd, 64) else "abort"
            if any(sig in _ABORT_SIGNALS for sig in os.read(wake_fd, 512)):
                return "abort"


def _report(fd: int, line: str) -> None:
    """One status line to the grader; it may be gone already, which is fine."""
    try:
        os.write(fd, line.encode() + b"\n")
    except OSError:
        return


def _reaper_main(args: list[str]) -> int:
    """Supervisor entry: ``TIMEOUT GRADER_PID STATUS_FD -- ARGV...`` (stdin = control pipe).

    Status lines on STATUS_FD: ``pid N`` once the script runs, then ``done RC|none TIMED_OUT N``,
    or ``exec ERRNO`` if it could not be started, or ``error MESSAGE``.
    """
    timeout, grader_pid, status_fd = float(args[0]), int(args[1]), int(args[2])
    argv = args[4:]
    os.set_inheritable(status_fd, False)  # the script must not hold it open
    try:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        _prctl(_PR_SET_PDEATHSIG, _signal.SIGTERM)
    except OSError as exc:
        _report(status_fd, f"error {exc}")
        return 1
    if os.getppid() != grader_pid:  # the grader died before PDEATHSIG was armed
        return 1
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    # A full pipe (a storm of SIGCHLDs during cleanup) must not print warnings into the script's
    # stderr, which is also ours: one pending byte is enough to wake us.
    _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    for sig in (_signal.SIGCHLD, *_ABORT_SIGNALS):
        _signal.signal(sig, lambda _signum, _frame: None)  # the wakeup fd does the work
    start = time.monotonic()
    try:
        pid = _spawn(argv, os.getpid())
    except OSError as exc:
        _report(status_fd, f"exec {exc.errno or 0}")
        return 0
    _report(status_fd, f"pid {pid}")
    outcome = _wait_for_script(pid, start + timeout, 0, wake_r)
    for sig in _ABORT_SIGNALS:  # cleanup must not be interrupted half-way
        _signal.signal(sig, _signal.SIG_IGN)
    if outcome != "exit":
        os.kill(pid, _signal.SIGKILL)  # our unreaped child: its pid cannot have been reused
    leftovers, statuses = _kill_tree(pid)
    status = statuses.get(pid)
    if outcome in ("timeout", "abort") or status is None:
        rc = "none"
        timed_out = int(outcome != "exit")
    else:
        rc = str(os.waitstatus_to_exitcode(status))
        timed_out = 0
    _report(status_fd, f"done {rc} {timed_out} {leftovers}")
    return 0


if __name__ == "__main__":
    try:
        _exit_code = _reaper_main(sys.argv[1:])
    except Exception as exc:  # tell the grader why instead of dying with a bare traceback
        if len(sys.argv) > 3 and sys.argv[3].isdigit():
            _report(int(sys.argv[3]), f"error {type(exc).__name__}: {exc}")
        raise
    # Skip interpreter teardown (10-30 ms on a busy machine): nothing is buffered, and the grader
    # waits for our pipes to close. This also keeps the grader-side code below from running.
    os._exit(_exit_code)

# ---------------------------------------------------------------------------------------------
# Grader side. Imported only when used as a module: the supervisor has exited above by now.
# ---------------------------------------------------------------------------------------------

import contextlib  # noqa: E402
import errno  # noqa: E402
import math  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

_REAPER_PATH = os.path.abspath(__file__)
# Beyond the script's own limit, how long the supervisor may take before we end it ourselves:
# SIGTERM (it still cleans up), then SIGKILL one second later.
_HARD_TERM_AFTER_S = 2.0
_HARD_KILL_AFTER_S = 3.0
# After the supervisor reported, how long its pipes may take to reach EOF.
_DRAIN_S = 1.0
_READ_CHUNK = 64 * 1024
_STATUS_CAP = 4096


@dataclass(frozen=True)
class RunResult:
    """What one run of an untrusted script did.

    ``returncode`` is None when the run was ended for exceeding its time limit, negative (-N) when
    the script died of signal N (e.g. -9 after being ended for flooding its output).
    ``stdout``/``stderr`` hold at most ``output_cap`` bytes each, decoded as UTF-8 with
    replacement; ``truncated`` says whether either stream had more. ``duration`` is the wall time
    of the whole run in seconds, supervisor start-up included. ``leftover_killed`` counts the
    processes other than the script's own that were still alive at the end and had to be killed:
    background jobs and daemons it left behind, plus, after a timeout or an output flood, the
    children it was still running.
    """

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration: float
    leftover_killed: int


class SandboxError(RuntimeError):
    """The supervisor failed (died, hung or could not set up); cleanup was best-effort only.

    Distinct from a bad script, which yields a RunResult: this one is the grader's problem — or a
    script that killed its own supervisor.
    """


def check_runnable(path: Path) -> str | None:
    """None if ``path`` is a regular executable file (symlinks followed), else a stable key.

    Keys: ``missing``, ``dangling_link``, ``directory``, ``not_executable``, ``not_regular``.
    Lets the grader tell the learner what is wrong with the script before trying to run it,
    instead of surfacing an exec error.
    """
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


def run_untrusted(
    argv: list[str],
    *,
    cwd: Path,
    timeout: float = 5.0,
    output_cap: int = 64 * 1024,
    env: dict[str, str] | None = None,
) -> RunResult:
    """Run ``argv`` (no shell) in ``cwd`` under a supervisor; see the module docstring for why.

    stdin is /dev/null. ``env`` defaults to the grader's environment, as with ``subprocess``; pass
    a trimmed one to keep secrets from the script. The run is ended when it exceeds ``timeout``
    seconds or writes more than ``output_cap`` bytes to either stream; in all cases every process
    it started is killed before this returns.

    Raises OSError (e.g. FileNotFoundError, or ENOEXEC for a script without ``#!``) when the
    script cannot be executed, and SandboxError when the supervisor itself fails.
    """
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
    if not sys.executable:
        raise SandboxError("no Python interpreter path (sys.executable) to run the supervisor")

    start = time.monotonic()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()
    ctl_r, ctl_w = os.pipe()
    ours = [out_r, err_r, st_r, ctl_w]
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-I",  # isolated: no PYTHON* variables from `env`, no user site, no cwd on path
                "-S",  # no site: faster start-up, and the supervisor needs only the stdlib
                _REAPER_PATH,
                repr(float(timeout)),
                str(os.getpid()),
                str(st_w),
                "--",
                *argv,
            ],
            stdin=ctl_r,
            stdout=out_w,
            stderr=err_w,
            pass_fds=(st_w,),
            cwd=cwd,
            env=env,
            close_fds=True,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in (out_w, err_w, st_w, ctl_r):
            os.close(fd)

    try:
        out, err, status, truncated, hard_killed = _collect(
            proc, out_r, err_r, st_r, ctl_w, start + timeout, output_cap
        )
    finally:
        for fd in ours:
            os.close(fd)
        _reap_supervisor(proc)
    duration = time.monotonic() - start

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
            )
        elif word == "exec":
            if rest.isdigit() and int(rest):
                raise OSError(int(rest), os.strerror(int(rest)), argv[0])
            raise OSError(errno.ENOEXEC, "cannot start", argv[0])
        elif word == "error":
            raise SandboxError(f"sandbox supervisor failed: {rest}")
    stray = _kill_session(script_pid) if script_pid is not None else 0
    why = "had to be killed" if hard_killed else f"exited with status {proc.returncode}"
    raise SandboxError(
        f"sandbox supervisor {why} without a result; {stray} stray process(es) killed "
        f"best-effort; stderr: {err[-2000:].decode('utf-8', 'replace')!r}"
    )


def _collect(
    proc: subprocess.Popen[bytes],
    out_r: int,
    err_r: int,
    st_r: int,
    ctl_w: int,
    deadline: float,
    output_cap: int,
) -> tuple[bytes, bytes, bytes, bool, bool]:
    """Read the script's output and the supervisor's status until all reach EOF.

    Keeps at most ``output_cap`` bytes per stream, asks the supervisor to end the run at the first
    excess byte and discards the rest, so memory stays bounded whatever the script writes.
    Returns (stdout, stderr, status, truncated, supervisor_was_hard_killed).
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
            proc.kill()
            return bytes(bufs[out_r]), bytes(bufs[err_r]), bytes(status), truncated, True
        if now >= hard_term and not term_sent:
            proc.terminate()  # the supervisor treats it as "abort" and still cleans up
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
                if fd == st_r:  # supervisor exiting: its pipes close with it
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
                    with contextlib.suppress(OSError):  # supervisor already gone
                        os.write(ctl_w, b"k")
    return bytes(bufs[out_r]), bytes(bufs[err_r]), bytes(status), truncated, False


def _reap_supervisor(proc: subprocess.Popen[bytes]) -> None:
    """Make sure the supervisor is gone; by now it normally has exited on its own."""
    try:
        proc.wait(timeout=_HARD_KILL_AFTER_S - _HARD_TERM_AFTER_S + _DRAIN_S)
        return
    except subprocess.TimeoutExpired:
        proc.terminate()  # control pipe is closed too: it aborts and cleans up
    try:
        proc.wait(timeout=_HARD_KILL_AFTER_S - _HARD_TERM_AFTER_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _kill_session(sid: int) -> int:
    """Fallback when the supervisor died: kill what is left of the script's session.

    Catches the script's ordinary children (now orphans of init), not daemons that made their own
    session; a session id cannot be handed out again while a process still uses it.
    """
    killed: set[int] = set()
    for _ in range(10):
        victims = [
            (pid, start)
            for pid, (state, _ppid, session, start) in _scan_processes().items()
            if session == sid and state not in ("Z", "X")
        ]
        if not victims:
            break
        killed.update(pid for pid, start in victims if _kill_exact(pid, start))
        time.sleep(0.01)
    return len(killed)
