"""The supervisor process of :mod:`gpushare.sandbox.supervisor`: the master and its per-run reapers.

:class:`gpushare.sandbox.supervisor.Supervisor` forks the master from a single-threaded grader,
or else starts it as a fresh ``python -I -S``. For that second way this module imports nothing but
small stdlib modules (``dataclasses``, ``pathlib`` and ``subprocess`` alone would cost tens of
milliseconds on a slow machine), and it is imported as a module, not run as a script, so its
bytecode is cached like any module's (a script is compiled from source at every start). See
:mod:`gpushare.sandbox.supervisor` for the design.
"""

from __future__ import annotations

# The C half of `signal`: same functions, plain-int constants, without the ~15 ms that importing
# `enum` (for Signals/Handlers) would add to the master's start-up.
import _signal
import _socket
import ctypes
import os
import select
import sys
import time
from collections.abc import Callable

from gpushare.sandbox import limits as _limits

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_ABORT_SIGNALS = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGINT)
# Give up on processes that ignore SIGKILL (stuck in uninterruptible sleep) after this long; the
# kernel still delivers the pending SIGKILL once they wake up.
_CLEANUP_GIVE_UP_S = 2.0
_EXEC_FAILED = 127
# How long bubblewrap's init may take to exit after its command did (it does at once).
_SANDBOX_EXIT_S = 0.05


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


def _kill_tree(main_pid: int, wake_fd: int = -1, grace: float = 0.0) -> tuple[int, dict[int, int]]:
    """Kill and reap every descendant; return (strays killed besides main_pid, wait statuses).

    Because we are a subreaper, a live descendant always has a chain of parents up to us, so once
    waitpid reports that we have no child at all, nothing of the script's tree is left. Reaping
    comes first, so a script that left nothing behind costs no scan of /proc. Killing the whole
    tree each round (not level by level) keeps a fork loop from outrunning us. ``grace``: how
    long children may take to exit by themselves first (SIGCHLD wakes ``wake_fd``): bubblewrap's
    init ends right after its command, and its pid namespace with it, with no scan needed.
    """
    me = os.getpid()
    killed: set[int] = set()
    statuses: dict[int, int] = {}
    now = time.monotonic()
    give_up = now + _CLEANUP_GIVE_UP_S
    grace_until = now + grace if wake_fd >= 0 else now
    while True:
        try:
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break  # a child of ours is still alive
                statuses[pid] = status
        except ChildProcessError:
            return len(killed), statuses
        now = time.monotonic()
        if now > give_up:
            return len(killed), statuses
        if now < grace_until:
            if select.select([wake_fd], [], [], grace_until - now)[0]:
                os.read(wake_fd, 512)
            continue
        for pid, start in _live_descendants(me):
            if _kill_exact(pid, start) and pid != main_pid:
                killed.add(pid)
        time.sleep(0.001)  # let the SIGKILLed processes die before reaping them


def _spawn(
    argv: list[bytes],
    env: dict[bytes, bytes],
    reaper_pid: int,
    caps: _limits.Limits = _limits.NO_LIMITS,
    cgroup_procs: list[bytes] | None = None,
    extra_fd: tuple[int, int] | None = None,
) -> tuple[int, bool]:
    """Fork and exec the script in a new session, stdin on /dev/null; raise OSError if exec fails.

    Before exec the child joins the run's cgroups (``cgroup_procs``) and sets its rlimits, so
    everything the script starts is capped. ``extra_fd`` is ``(fd, number)``: ``fd`` is handed
    to the script as descriptor ``number`` (bubblewrap's status pipe). Returns the pid and
    whether joining the cgroups worked. A hand-written fork/exec rather than ``subprocess``:
    that module alone costs more to import than the rest of the supervisor.
    """
    err_r, err_w = os.pipe()  # close-on-exec: EOF without data means exec succeeded
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child, replaced by exec
        try:
            os.close(err_r)
            if extra_fd is not None:
                fd, number = extra_fd
                if err_w == number:  # keep our error pipe out of the way
                    err_w = os.dup(err_w)
                if fd == number:
                    os.set_inheritable(fd, True)
                else:
                    os.dup2(fd, number)  # inheritable
            if cgroup_procs and not _limits.join(cgroup_procs):
                os.write(err_w, b"c")  # runs on, with rlimits and the watchdog only
            _limits.apply_rlimits(caps)
            _signal.set_wakeup_fd(-1)
            # Python ignores SIGPIPE and SIGXFSZ, and ignored signals survive exec: restore them,
            # or e.g. `yes | head -1` inside the script would never end.
            for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGCHLD, *_ABORT_SIGNALS):
                _signal.signal(sig, _signal.SIG_DFL)
            _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
            os.setsid()
            # Dies with the reaper even if the reaper is SIGKILLed (kept across exec).
            _prctl(_PR_SET_PDEATHSIG, _signal.SIGKILL)
            if os.getppid() != reaper_pid:
                os._exit(_EXEC_FAILED)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)  # also drops the control pipe, which was our stdin
            os.close(devnull)
            os.execvpe(argv[0], argv, env)
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
    data = b"".join(chunks)
    joined = not data.startswith(b"c")
    data = data.lstrip(b"c")
    if data:
        os.waitpid(pid, 0)
        err = int(data) if data.isdigit() else 0
        raise OSError(err, os.strerror(err) if err else "cannot start", argv[0])
    return pid, joined


def _has_exited(pid: int) -> bool:
    """True once ``pid`` (our child) has exited, without reaping it (WNOWAIT)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _wait_for_script(
    pid: int,
    deadline: float,
    ctl_fd: int,
    wake_fd: int,
    max_procs: int = 0,
    count: Callable[[], int] | None = None,
) -> str:
    """Block until the script exits, the deadline passes or the grader intervenes.

    Returns "exit", "timeout", "kill" (the grader wants it ended: output cap reached), "abort"
    (the grader is gone or asked us to stop) or "procs" (more than ``max_procs`` processes at
    once: the watchdog of :mod:`gpushare.sandbox.limits`, used where no pids cgroup caps them;
    ``count`` counts the run's processes, by default our descendants in a scan of /proc). SIGCHLD
    and abort signals wake us through the signal wakeup fd, so none of them can be missed
    between a check and the poll.
    """
    poller = select.poll()
    poller.register(ctl_fd, select.POLLIN)
    poller.register(wake_fd, select.POLLIN)
    baseline = _limits.threads_total() if max_procs else -1
    watch = baseline >= 0
    while True:
        if _has_exited(pid):
            return "exit"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        wait_s = min(remaining, _limits.WATCH_INTERVAL_S) if watch else remaining
        for fd, _events in poller.poll(int(wait_s * 1000) + 1):
            if fd == ctl_fd:
                return "kill" if os.read(ctl_fd, 64) else "abort"
            if any(sig in _ABORT_SIGNALS for sig in os.read(wake_fd, 512)):
                return "abort"
        if watch:
            total = _limits.threads_total()
            if total - baseline > max_procs // 2:
                counted = count() if count else len(_live_descendants(os.getpid()))
                if counted > max_procs:
                    return "procs"
                # Others' processes (a busy machine) made the count: look again only after
                # as much growth again, or a busy machine would cost a scan every time.
                baseline = total - counted


def _report(fd: int, line: str) -> None:
    """One status line to the grader; it may be gone already, which is fine."""
    try:
        os.write(fd, line.encode() + b"\n")
    except OSError:
        return


def _wake_pipe() -> tuple[int, int]:
    """A pipe that SIGCHLD and the abort signals write to, so a poll() never misses one."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    # A full pipe (a storm of SIGCHLDs during cleanup) must not print warnings into the script's
    # stderr, which is also ours: one pending byte is enough to wake us.
    _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    for sig in (_signal.SIGCHLD, *_ABORT_SIGNALS):
        _signal.signal(sig, lambda _signum, _frame: None)  # the wakeup fd does the work
    return wake_r, wake_w


def _reap_one(request: _Request, master_pid: int) -> int:
    """A reaper: run one script under the rules of the module docstring, report, return.

    Runs in a fresh fork of the master with the run's pipes in place: control pipe on stdin,
    the script's stdout and stderr on 1 and 2, status lines on ``request.status_fd``:
    ``reaper N`` first, ``pid N`` once the script runs, then ``done RC|none TIMED_OUT N
    LIMITS`` (LIMITS: ``-`` or the caps it ran into, comma-separated), or ``exec ERRNO`` /
    ``cwd ERRNO`` if it could not be started, ``unstarted RC`` if bubblewrap could not start it
    (its stderr says why), or ``error MESSAGE``.
    """
    start = time.monotonic()
    status_fd = request.status_fd
    _report(status_fd, f"reaper {os.getpid()}")
    try:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        _prctl(_PR_SET_PDEATHSIG, _signal.SIGTERM)
    except OSError as exc:
        _report(status_fd, f"error {exc}")
        return 1
    if os.getppid() != master_pid:  # the master died before PDEATHSIG was armed
        return 1
    try:
        os.chdir(request.cwd)
    except OSError as exc:
        _report(status_fd, f"cwd {exc.errno or 0}")
        return 0
    wake_r, _wake_w = _wake_pipe()
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())  # blocked by the master around the fork
    caps = request.limits
    cgroup = _limits.RunCgroup(caps, os.getpid())
    try:
        code = _run_capped(request, start, wake_r, cgroup)
        _detach(status_fd)  # the grader has its result: it need not wait for what follows
        return code
    finally:
        cgroup.remove()


def _run_capped(request: _Request, start: float, wake_r: int, cgroup: _limits.RunCgroup) -> int:
    """Start, watch and end the script of one run, inside its cgroup; report how it went."""
    status_fd = request.status_fd
    caps = request.limits
    json_r = json_w = -1
    if request.status_fd_number >= 0:  # bubblewrap's own status, on a pipe of ours
        json_r, json_w = os.pipe()
        os.set_blocking(json_r, False)
    try:
        try:
            pid, joined = _spawn(
                request.argv,
                request.env,
                os.getpid(),
                caps,
                cgroup.procs_files,
                (json_w, request.status_fd_number) if json_w >= 0 else None,
            )
        except OSError as exc:
            _report(status_fd, f"exec {exc.errno or 0}")
            return 0
        finally:
            if json_w >= 0:
                os.close(json_w)
        _report(status_fd, f"pid {pid}")
        watch = caps.processes if not (joined and cgroup.caps_processes) else 0
        count = _SandboxCount(json_r) if watch and json_r >= 0 else None
        outcome = _wait_for_script(pid, start + request.timeout, 0, wake_r, watch, count)
        for sig in _ABORT_SIGNALS:  # cleanup must not be interrupted half-way
            _signal.signal(sig, _signal.SIG_IGN)
        if outcome != "exit":
            os.kill(pid, _signal.SIGKILL)  # our unreaped child: its pid cannot have been reused
        grace = _SANDBOX_EXIT_S if json_r >= 0 and outcome == "exit" else 0.0
        leftovers, statuses = _kill_tree(pid, wake_r, grace)
        # bubblewrap writes the exit code only of a command it did start.
        status_json = (
            count.rest() if count is not None else _read_all(json_r) if json_r >= 0 else b""
        )
        started = json_r < 0 or b'"exit-code"' in status_json
    finally:
        if json_r >= 0:
            os.close(json_r)
    status = statuses.get(pid)
    if outcome == "exit" and status is not None and not started and os.WIFEXITED(status):
        # bwrap exits with a message when it cannot start the command (killed by a signal,
        # e.g. by the OOM killer, it is a run like any other).
        _report(status_fd, f"unstarted {os.waitstatus_to_exitcode(status)}")
        return 0
    if outcome in ("timeout", "abort") or status is None:
        rc = "none"
        timed_out = int(outcome in ("timeout", "abort"))
    else:
        rc = str(os.waitstatus_to_exitcode(status))
        timed_out = 0
    hits = cgroup.hits() + (["processes"] if outcome == "procs" else [])
    limits_hit = ",".join(dict.fromkeys(hits)) or "-"
    _report(status_fd, f"done {rc} {timed_out} {leftovers} {limits_hit}")
    return 0


class _SandboxCount:
    """Counts the processes of a bubblewrap sandbox: the entries of its own /proc.

    The sandbox's first process (``child-pid`` in bwrap's status) sees the sandbox's root, and
    in it a /proc of the sandbox's pid namespace, listing its processes only: one directory
    read, where a scan of the machine's /proc reads a file per process (too slow to keep up with
    a fork bomb). Falls back to that scan if the status is not there yet or the path is denied.
    """

    def __init__(self, status_fd: int) -> None:
        self.status_fd = status_fd
        self.status = b""
        self.proc: str | None = None

    def __call__(self) -> int:
        if self.proc is None:
            self.status += _read_all(self.status_fd)
            marker = b'"child-pid":'
            at = self.status.find(marker)
            digits = self.status[at + len(marker) :].lstrip().split(b",")[0].split(b"}")[0]
            if at >= 0 and digits.strip().isdigit():
                self.proc = f"/proc/{int(digits)}/root/proc"
        if self.proc:
            try:
                return sum(name.isdigit() for name in os.listdir(self.proc))
            except OSError:
                self.proc = ""  # not allowed here: scan instead
        return len(_live_descendants(os.getpid()))

    def rest(self) -> bytes:
        """What bwrap wrote after what was read here (the exit code comes last)."""
        return self.status + _read_all(self.status_fd)


def _detach(status_fd: int) -> None:
    """Close our ends of the run's pipes (status, and the script's stdout and stderr on 1 and
    2), so the grader reads their end now rather than when we exit."""
    os.close(status_fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def _read_all(fd: int) -> bytes:
    """What a non-blocking pipe holds now (bounded: a status is small)."""
    chunks = []
    size = 0
    try:
        while size < 65536 and (chunk := os.read(fd, 4096)):
            chunks.append(chunk)
            size += len(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks)


class _Request:
    """One run as the grader sent it: NUL-separated fields plus four file descriptors.

    Fields: ``run``, timeout, cwd, limits (:meth:`gpushare.sandbox.limits.Limits.encode`), the
    descriptor number on which the command (bubblewrap) wants a status pipe or empty, argc,
    argv..., then ``KEY=VALUE`` environment entries. Descriptors: control pipe (read end),
    stdout and stderr pipes, status pipe (write ends).
    """

    def __init__(self, data: bytes, fds: list[int]) -> None:
        if len(fds) != 4:
            raise ValueError(f"expected 4 descriptors, got {len(fds)}")
        self.ctl_fd, self.out_fd, self.err_fd, self.status_fd = fds
        fields = data.split(b"\0")
        if fields[0] != b"run" or len(fields) < 7:
            raise ValueError("malformed request")
        self.timeout = float(fields[1])
        self.cwd = fields[2]
        self.limits = _limits.Limits.decode(fields[3])
        self.status_fd_number = int(fields[4]) if fields[4] else -1
        if not (-1 <= self.status_fd_number < 1024) or self.status_fd_number in (0, 1, 2):
            raise ValueError("malformed request")
        argc = int(fields[5])
        self.argv = fields[6 : 6 + argc]
        self.env = dict(entry.split(b"=", 1) for entry in fields[6 + argc :] if entry)
        if len(self.argv) != argc or not argc:
            raise ValueError("malformed request")


def _received_fds(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, usable, 4)]
    return fds


def _start_reaper(request: _Request, sock_fd: int, wake: tuple[int, int]) -> int:
    """Fork a reaper for ``request``; return its pid. The master keeps none of the run's fds."""
    _limits.cgroup_bases()  # found once, in the master: every reaper forked after has them
    blocked = (_signal.SIGCHLD, *_ABORT_SIGNALS)
    _signal.pthread_sigmask(_signal.SIG_BLOCK, blocked)  # until the child has its own wake pipe
    try:
        try:
            pid = os.fork()
        except OSError as exc:  # EAGAIN: too many processes; this run fails, not the master
            _report(request.status_fd, f"error cannot fork a reaper: {exc}")
            return -1
        if pid == 0:  # pragma: no cover - the reaper, covered through the grader's tests
            code = 1
            try:
                master = os.getppid()
                _signal.set_wakeup_fd(-1)
                for fd in (sock_fd, *wake):
                    os.close(fd)
                os.dup2(request.ctl_fd, 0)
                os.dup2(request.out_fd, 1)
                os.dup2(request.err_fd, 2)
                for fd in (request.ctl_fd, request.out_fd, request.err_fd):
                    os.close(fd)
                os.set_inheritable(request.status_fd, False)  # the script must not hold it
                code = _reap_one(request, master)
            except BaseException as exc:  # tell the grader why instead of a bare traceback
                _report(request.status_fd, f"error {type(exc).__name__}: {exc}")
            os._exit(code)
    finally:
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, blocked)
        for fd in (request.ctl_fd, request.out_fd, request.err_fd, request.status_fd):
            os.close(fd)
    return pid


def _master_main(grader_pid: int) -> int:
    """The master: fork a reaper per request read from stdin (a SEQPACKET socket) until EOF.

    At EOF, or when the grader dies (``PR_SET_PDEATHSIG``) or signals us, every reaper still
    running is sent SIGTERM, which it treats as "abort" (it still kills its tree), and waited for.
    """
    _prctl(_PR_SET_PDEATHSIG, _signal.SIGTERM)
    if os.getppid() != grader_pid:  # the grader died before PDEATHSIG was armed
        return 1
    sock = _socket.socket(fileno=0)
    wake = _wake_pipe()
    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(wake[0], select.POLLIN)
    reapers: set[int] = set()
    running = True
    while running:
        for fd, _events in poller.poll():
            if fd == wake[0]:
                if any(sig in _ABORT_SIGNALS for sig in os.read(wake[0], 512)):
                    running = False
                continue
            try:
                data, ancdata, flags, _addr = sock.recvmsg(_MAX_REQUEST, _socket.CMSG_SPACE(4 * 4))
            except OSError:
                running = False  # the grader's end is broken: treat it as closed
                continue
            fds = _received_fds(ancdata)
            if not data and not fds:
                running = False  # the grader closed its end: no more runs
                continue
            try:
                if flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC):
                    raise ValueError("request too large")
                request = _Request(data, fds)
            except ValueError as exc:
                if len(fds) == 4:
                    _report(fds[3], f"error {exc}")
                for fd in fds:
                    os.close(fd)
                continue
            pid = _start_reaper(request, 0, wake)
            if pid > 0:
                reapers.add(pid)
        _reap_children(reapers, block=False)
    for pid in reapers:
        os.kill(pid, _signal.SIGTERM)  # our unreaped children: their pids cannot be reused
    _reap_children(reapers, block=True)
    return 0


def _reap_children(reapers: set[int], *, block: bool) -> None:
    """Collect finished reapers (without blocking unless ``block``, then until none is left)."""
    while reapers:
        try:
            pid, _status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            reapers.clear()
            return
        if pid == 0:
            return
        reapers.discard(pid)
        _limits.sweep(_limits.cgroup_bases())  # the groups of a reaper that was killed


_MAX_REQUEST = 1 << 20  # a request holds argv and the environment: far below this


def main(grader_pid: int) -> None:
    """Entry point of the master process; never returns.

    Skips interpreter teardown (10-30 ms on a busy machine): nothing is buffered, and the
    grader waits for our pipes to close.
    """
    try:
        code = _master_main(grader_pid)
    except BaseException:  # a bug of ours: say so on the grader's stderr, then still exit
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        code = 1
    os._exit(code)
