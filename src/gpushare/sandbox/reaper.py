"""The master and its per-run reapers; the design is in :mod:`gpushare.sandbox.supervisor`.

A master started as a fresh ``python -I -S`` (a grader with threads) imports this module, so it
imports only small stdlib modules (``dataclasses``, ``pathlib`` and ``subprocess`` alone would
cost tens of milliseconds on a slow machine), as a module, not a script, so its bytecode is
cached (a script is compiled from source at every start).
"""

from __future__ import annotations

import _socket
import ctypes
import errno
import os
import select
import sys
import time

from gpushare.sandbox import limits as _limits
from gpushare.sandbox import namespaces as _ns
from gpushare.sandbox import view as _view

TYPE_CHECKING = False  # mypy takes it as typing's, which this module does not import
if TYPE_CHECKING:
    import signal as _signal  # the same functions and constants, with types
else:
    # The C half of `signal`: same functions, plain-int constants, without `enum` (for
    # Signals/Handlers); `_socket` likewise. A spawned master (the pytest plugin's, a class
    # grade's: the grader has threads) starts 7 ms sooner on an idle machine, 26 ms (median)
    # on a loaded one, than with `signal` and `socket`.
    import _signal

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_ABORT_SIGNALS = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGINT)
# Give up on processes that ignore SIGKILL (stuck in uninterruptible sleep) after this long; the
# kernel still delivers the pending SIGKILL once they wake up.
_CLEANUP_GIVE_UP_S = 2.0
_EXEC_FAILED = 127


def _prctl(option: int, arg: int) -> None:
    """prctl(2) through libc: the stdlib has no binding, and ctypes is cheap to import."""
    _ns.check(_ns.libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")


def _read_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, session id, start time) of ``pid`` from /proc, or None if it is gone. The
    start time (clock ticks since boot) and the pid name one process for good: a pid recycled
    between a scan and a kill is told apart."""
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


def scan_processes() -> dict[int, tuple[str, int, int, int]]:
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
    for pid, (state, ppid, _sid, start) in scan_processes().items():
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


def kill_exact(pid: int, start: int) -> bool:
    """SIGKILL the process ``pid`` only if it is still the one that started at ``start``.

    A pidfd pins one process, so checking the start time after opening it closes the window in
    which a dead descendant's pid could be reused by an unrelated process of the same user.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # no pidfd support (kernel < 5.3): plain kill, tiny pid-reuse window
        pidfd = -1
    try:
        info = _read_stat(pid)
        if info is None or info[3] != start:
            return False
        if pidfd < 0:
            os.kill(pid, _signal.SIGKILL)
        else:
            _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
        return True
    except OSError:  # gone meanwhile, or not ours to kill (EPERM)
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _kill_tree(main_pid: int) -> tuple[int, dict[int, int]]:
    """The ``none`` level's cleanup: kill and reap every descendant; return (strays killed
    besides main_pid, wait statuses).

    A subreaper's live descendant always has a chain of parents up to us, so once waitpid says
    we have no child, nothing of the script's tree is left. Reaping first makes a script that
    left nothing cost no scan of /proc; killing the whole tree each round (not level by level)
    keeps a fork loop from outrunning us.
    """
    me = os.getpid()
    killed: set[int] = set()
    statuses: dict[int, int] = {}
    give_up = time.monotonic() + _CLEANUP_GIVE_UP_S
    while True:
        try:
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break  # a child of ours is still alive
                statuses[pid] = status
        except ChildProcessError:
            return len(killed), statuses
        if time.monotonic() > give_up:
            return len(killed), statuses
        for pid, start in _live_descendants(me):
            if kill_exact(pid, start) and pid != main_pid:
                killed.add(pid)
        time.sleep(0.001)  # let the SIGKILLed processes die before reaping them


def _drop_privileges(uid: int, gid: int) -> None:
    """Become the run's own uid and gid, with no supplementary group (the script's process,
    just before exec). From root only; a non-root grader passes -1 and keeps its uid."""
    if uid < 0:
        return
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


# keyctl(2) has no libc wrapper: its system call number per machine.
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "i686": 288, "armv7l": 311, "ppc64le": 311}
_KEYCTL_JOIN_SESSION_KEYRING, _KEYCTL_CLEAR = 1, 7
# The uid's own keyrings: they belong to the uid, not to a process, and outlive every run.
_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING = -4, -5


def _keyctl(operation: int, arg: int | None) -> int:
    """keyctl(2) through syscall(2); 0 (nothing done) where its number is unknown."""
    number = _SYS_KEYCTL.get(os.uname().machine)
    return 0 if number is None else int(_ns.libc.syscall(number, operation, arg))


def _new_session_keyring() -> None:
    """Join a new, empty, anonymous session keyring: the grader's keys (and the keys of any
    keyring it possesses) are no longer possessed by the script. Where the kernel or a seccomp
    filter refuses keyctl, the script cannot reach any keyring either."""
    if _keyctl(_KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EPERM, errno.EACCES):
            raise OSError(err, f"keyctl(JOIN_SESSION_KEYRING): {os.strerror(err)}")


def _clear_user_keyrings() -> None:
    """Empty the user and user-session keyrings of our uid (the run's, at ``uid``). They are
    the uid's, kept by the kernel for as long as the user namespace lives (the host's: for
    good), so a key one run put there would be found by the next grade whose run has that uid
    (``security/keys/process_keys.c:look_up_user_keyrings``, torvalds/linux v6.12); at
    ``bubblewrap`` each run's user namespace has keyrings of its own."""
    for ring in (_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING):
        _keyctl(_KEYCTL_CLEAR, ring)  # refused (seccomp): nobody can add either


class _SetupFailed(OSError):
    """The run's namespaces or view could not be made (ours to fix, not the script's): an
    OSError without a file name, as a failed unshare is."""


def _spawn(request: _Request, reaper_pid: int, extra_fd: tuple[int, int] | None) -> int:
    """Fork and exec the script in a new session, stdin on /dev/null; raise OSError if exec
    fails, :class:`_SetupFailed` if its namespaces could not be made.

    Before exec the child sets its rlimits, joins a new session keyring and becomes the run's
    own uid (when given one): everything the script starts is capped, and none of it is the
    grader. ``extra_fd`` ``(fd, number)`` hands ``fd`` to the script as descriptor ``number``
    (bubblewrap's status pipe).

    At the ``uid`` level (``request.cleanup == "ns"``) the child is the init of the run's pid
    namespace (:mod:`gpushare.sandbox.namespaces`; the caller made it our children's): still
    root, it makes the run's other namespaces, forks the script and waits for it; it ends with
    the script, and the kernel ends the rest of the namespace.
    """
    namespaced = request.cleanup == "ns"
    err_r, err_w = os.pipe()  # close-on-exec: EOF without data means exec succeeded
    life_r, life_w = os.pipe() if namespaced else (-1, -1)  # EOF: the reaper is gone
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child, replaced by exec
        _child(request, reaper_pid, extra_fd, (err_r, err_w), (life_r, life_w))
    os.close(err_w)
    if namespaced:
        os.close(life_r)  # life_w stays open in us until we exit
    _check_exec(pid, err_r, request.argv[0])
    return pid


def _child(
    request: _Request,
    reaper_pid: int,
    extra_fd: tuple[int, int] | None,
    err: tuple[int, int],
    life: tuple[int, int],
) -> None:  # pragma: no cover - child, replaced by exec
    """The forked child of :func:`_spawn`, up to exec; never returns. Whatever fails is written
    to the error pipe (the parent's only news of it) and ends the child. Between fork and exec
    it runs only what is loaded already: no import, no new lock."""
    err_r, err_w = err
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
        _limits.apply_rlimits(processes=request.own_uid)
        _default_signals()
        parent = reaper_pid
        if request.cleanup == "ns":
            _become_init(request, err_w, life)
            parent = 1  # the script's parent: our init, pid 1 of the run's namespace
        _exec_script(request, parent)
    except OSError as exc:
        os.write(err_w, str(exc.errno or 0).encode())
    except BaseException:
        os.write(err_w, b"0")
    os._exit(_EXEC_FAILED)


def _default_signals() -> None:  # pragma: no cover - child, replaced by exec
    """Give the script a fresh process's signal state: no wakeup fd of ours, default
    dispositions, nothing blocked. Ignored signals and the mask survive exec, and Python ignores
    SIGPIPE and SIGXFSZ: left so, `yes | head -1` inside the script would never end."""
    _signal.set_wakeup_fd(-1)
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGCHLD, *_ABORT_SIGNALS):
        _signal.signal(sig, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())


def _become_init(
    request: _Request, err_w: int, life: tuple[int, int]
) -> None:  # pragma: no cover - the run's init
    """At the ``uid`` level, in the child, still root: make the run's namespaces and view, arm
    death with the reaper, fork the script. The init stays here for good (:func:`_init`); the
    script returns, to go on to exec. A failure to make the namespaces is written as
    ``!MESSAGE`` (ours to fix, not an exec failure); if the reaper died before death with it
    was armed, the child ends at once."""
    life_r, life_w = life
    os.close(life_w)
    try:
        _enter_namespaces(request)
    except OSError as exc:
        os.write(err_w, b"!" + str(exc).encode())
        os._exit(_EXEC_FAILED)
    _prctl(_PR_SET_PDEATHSIG, _signal.SIGKILL)
    if select.select([life_r], [], [], 0)[0]:  # the reaper died before that
        os._exit(_EXEC_FAILED)
    script = os.fork()
    if script != 0:
        os.close(err_w)  # the script's copy alone says whether exec worked
        _init(script, request.uid, request.gid)


def _exec_script(request: _Request, parent: int) -> None:  # pragma: no cover - replaced by exec
    """The script's last steps before exec, in this order: a new session; the run's uid, then,
    as that uid, a new session keyring of its own (at ``uid`` also its user keyrings emptied,
    and no new privileges); death with ``parent`` (armed after the uid change, which clears
    it); stdin on /dev/null. Returns only by raising."""
    os.setsid()
    _drop_privileges(request.uid, request.gid)
    _new_session_keyring()
    if request.cleanup == "ns":
        _clear_user_keyrings()  # what a run of a killed grade may have left
        # a setuid or setgid file it finds (or plants) gives nothing (as in bubblewrap's sandbox)
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _prctl(_PR_SET_PDEATHSIG, _signal.SIGKILL)  # even if the reaper is SIGKILLed; kept by exec
    if os.getppid() != parent:
        os._exit(_EXEC_FAILED)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # also drops the control pipe, which was our stdin
    os.close(devnull)
    os.execvpe(request.argv[0], request.argv, request.env)


def _check_exec(pid: int, err_r: int, name: bytes) -> None:
    """Read the child's close-on-exec error pipe to its end: nothing means exec succeeded;
    else reap the child and raise what it wrote (``!MESSAGE``: :class:`_SetupFailed`)."""
    with open(err_r, "rb") as fh:
        data = fh.read()
    if data:
        os.waitpid(pid, 0)
        if data.startswith(b"!"):
            raise _SetupFailed(data[1:].decode("utf-8", "replace"))
        err = int(data) if data.isdigit() else 0
        raise OSError(err, os.strerror(err) if err else "cannot start", name)


def _enter_namespaces(request: _Request) -> None:
    """In the run's init (pid 1 of its namespace, root): the run's own mount, IPC, network, UTS
    and cgroup namespaces, and its view of the filesystem (:func:`gpushare.sandbox.view.build`)."""
    _ns.unshare(_ns.OWN)
    _ns.sethostname(_ns.HOSTNAME)
    root, *binds = (os.fsdecode(entry) for entry in request.view)
    pairs = list(zip(binds[0::2], binds[1::2], strict=True))
    _view.build(root, pairs, os.fsdecode(request.cwd))


def _init(script: int, uid: int, gid: int) -> None:  # pragma: no cover - the run's init
    """Wait for ``script``, reaping the namespace's orphans meanwhile, empty the run's uid's
    keyrings, and exit as the script did (``128 + N`` for death by signal N, as a shell and
    bubblewrap's init say it): the kernel then kills what is left in the namespace."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(_EXEC_FAILED)
        if pid == script:
            code = os.waitstatus_to_exitcode(status)
            try:
                _drop_privileges(uid, gid)  # the run's keyrings are addressed as the run's uid
                _clear_user_keyrings()
            finally:
                os._exit(128 - code if code < 0 else code)


def _wait_for_script(pid: int, deadline: float, ctl_fd: int, wake_fd: int) -> str:
    """Block until the script exits ("exit"), the deadline passes ("timeout"), the grader wants
    it ended at the output cap ("kill") or is gone or asks us to stop ("abort"). SIGCHLD and the
    abort signals wake us through the wakeup fd: none is missed between a check and the poll.
    """
    poller = select.poll()
    poller.register(ctl_fd, select.POLLIN)
    poller.register(wake_fd, select.POLLIN)
    while True:
        # exited, not reaped yet (WNOWAIT): the cleanup still knows its pid
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
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
    """A reaper, in a fresh fork of the master: run one script, report, return.

    Control pipe on stdin, the script's stdout and stderr on 1 and 2, status lines on
    ``request.status_fd``: ``reaper N`` first, ``pid N`` once the script runs, then ``done
    RC|none TIMED_OUT N``, or ``exec ERRNO`` / ``cwd ERRNO`` if it could not be started,
    ``unstarted RC`` if bubblewrap could not start it (its stderr says why), or ``error MESSAGE``.
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
    code = _run(request, start, wake_r)
    _detach(status_fd)  # the grader has its result: it need not wait for what follows
    _reap_orphans()
    return code


def _reap_orphans(within: float = 0.5) -> None:
    """Reap what is still coming to us, a subreaper (bubblewrap's init dies just after bwrap),
    and end what does not come within ``within`` seconds: left to init, either would count
    against the run's uid in the next grade that has it (its ``RLIMIT_NPROC``).

    What does not come is bubblewrap's own race: a ``bwrap`` ended in its first milliseconds
    (the grade aborted, its deadline, Ctrl-C) leaves its init blocked for good on an eventfd
    read nobody will answer, before that init asked to die with its parent (18 grades killed
    just after submitting 7 runs each left 5 behind). It is our descendant: ended as
    :func:`_kill_tree` ends the ``none`` level's tree.
    """
    give_up = time.monotonic() + within
    while time.monotonic() < give_up:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.001)
        except ChildProcessError:
            return
    _kill_tree(0)  # pid 0 is no one's: every descendant left is a stray


def _run(request: _Request, start: float, wake_r: int) -> int:
    """Start, watch and end the script of one run; report how it went.

    The end is the level's (``request.cleanup``): ``pidns``, bubblewrap's pid namespace, ends
    with its first process (killed if need be; ``--die-with-parent`` takes the rest); ``ns``,
    the ``uid`` level's, made here for our child, with its init (killed if need be: the kernel
    kills the rest before the init's end is reported, so nothing is left once it is reaped);
    ``tree``, every descendant of ours, found in /proc (:func:`_kill_tree`: level ``none``).
    """
    status_fd = request.status_fd
    json_r = json_w = -1
    if request.status_fd_number >= 0:  # bubblewrap's own status, on a pipe of ours
        json_r, json_w = os.pipe()
        os.set_blocking(json_r, False)
    try:
        pid = _start_script(request, json_w)
        if pid is None:
            return 0
        _report(status_fd, f"pid {pid}")
        outcome = _wait_for_script(pid, start + request.timeout, 0, wake_r)
        leftovers, statuses = _end_script(request, pid, outcome)
        # bubblewrap writes the exit code only of a command it did start; one read takes all
        # its status (a pipe holds 64 KiB, and a read returns all that is in it).
        try:
            started = json_r < 0 or b'"exit-code"' in os.read(json_r, 65536)
        except BlockingIOError:  # nothing written
            started = False
    finally:
        if json_r >= 0:
            os.close(json_r)
    status = statuses.get(pid)
    if outcome == "exit" and status is not None and not started and os.WIFEXITED(status):
        # bwrap exits with a message when it cannot start the command (killed by a signal,
        # e.g. by the OOM killer, it is a run like any other).
        _report(status_fd, f"unstarted {os.waitstatus_to_exitcode(status)}")
        return 0
    timed_out = outcome in ("timeout", "abort")
    rc = "none" if timed_out or status is None else str(os.waitstatus_to_exitcode(status))
    _report(status_fd, f"done {rc} {int(timed_out)} {max(0, leftovers)}")
    return 0


def _start_script(request: _Request, json_w: int) -> int | None:
    """Start the script (at ``uid``, in a pid namespace made for it); its pid, or None once the
    grader is told why not: ``exec ERRNO`` (the script's fault), ``error ...`` (the namespaces,
    ours). Our copy of ``json_w`` (bubblewrap's status pipe, -1: none) is closed either way: the
    script holds the only one left, so its end is the pipe's."""
    status_fd = request.status_fd
    try:
        if request.cleanup == "ns":  # our next child is pid 1 of a namespace of its own
            _ns.unshare(_ns.FOR_CHILDREN)
        return _spawn(
            request, os.getpid(), (json_w, request.status_fd_number) if json_w >= 0 else None
        )
    except OSError as exc:
        if request.cleanup == "ns" and exc.filename is None:  # the namespaces, not exec
            _report(status_fd, f"error the uid level's namespaces: {exc}")
        else:
            _report(status_fd, f"exec {exc.errno or 0}")
        return None
    finally:
        if json_w >= 0:
            os.close(json_w)


def _end_script(request: _Request, pid: int, outcome: str) -> tuple[int, dict[int, int]]:
    """End the run as its level does, deaf to abort signals from now on (a cleanup must not be
    interrupted half-way): kill the script unless it exited, then reap it alone (``pidns``,
    ``ns``: its namespace ends with it) or the whole tree (``tree``); (strays killed, statuses).
    """
    for sig in _ABORT_SIGNALS:
        _signal.signal(sig, _signal.SIG_IGN)
    if outcome != "exit":
        os.kill(pid, _signal.SIGKILL)  # our unreaped child: its pid cannot have been reused
    if request.cleanup in ("pidns", "ns"):
        return 0, {pid: os.waitpid(pid, 0)[1]}
    return _kill_tree(pid)


def _detach(status_fd: int) -> None:
    """Close our ends of the run's pipes (status, and the script's stdout and stderr on 1 and
    2), so the grader reads their end now rather than when we exit."""
    os.close(status_fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


class _Request:
    """One run as the grader sent it: NUL-separated fields plus four file descriptors.

    Fields: ``run``, timeout, cwd, the descriptor number on which bubblewrap wants a status pipe
    or empty, the cleanup (``pidns``, ``ns`` or ``tree``), the run's uid and gid (-1: the
    grader's), argc, argv..., the count of the view's entries and the entries (at ``ns``: the
    folder the run's root is built on, then source and destination of each read-only bind),
    then ``KEY=VALUE`` environment entries. Descriptors: control pipe (read end), stdout,
    stderr and status pipes (write ends).
    """

    def __init__(self, data: bytes, fds: list[int]) -> None:
        if len(fds) != 4:
            raise ValueError(f"expected 4 descriptors, got {len(fds)}")
        self.ctl_fd, self.out_fd, self.err_fd, self.status_fd = fds
        fields = data.split(b"\0")
        if fields[0] != b"run" or len(fields) < 9:
            raise ValueError("malformed request")
        self.timeout = float(fields[1])
        self.cwd = fields[2]
        self.status_fd_number = int(fields[3]) if fields[3] else -1
        if not (-1 <= self.status_fd_number < 1024) or self.status_fd_number in (0, 1, 2):
            raise ValueError("malformed request")
        self.cleanup = fields[4].decode()
        self.uid, self.gid = int(fields[5]), int(fields[6])
        if self.cleanup not in ("pidns", "ns", "tree") or (self.cleanup == "ns" and self.uid <= 0):
            raise ValueError("malformed request")
        # RLIMIT_NPROC counts per uid: set here only when the uid is the run's own.
        self.own_uid = self.uid > 0
        argc = int(fields[7])
        self.argv = fields[8 : 8 + argc]
        if len(self.argv) != argc or not argc or len(fields) < 9 + argc:
            raise ValueError("malformed request")
        count = int(fields[8 + argc])
        self.view = fields[9 + argc : 9 + argc + count]
        if len(self.view) != count or (self.cleanup == "ns") != (count % 2 == 1):
            raise ValueError("malformed request")
        self.env = dict(entry.split(b"=", 1) for entry in fields[9 + argc + count :] if entry)


def _received_fds(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, usable, 4)]
    return fds


def _start_reaper(request: _Request, sock_fd: int, wake: tuple[int, int]) -> int:
    """Fork a reaper for ``request``; return its pid. The master keeps none of the run's fds."""
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
    running gets SIGTERM ("abort": it still kills its tree) and is waited for."""
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


_MAX_REQUEST = 1 << 20  # a request holds argv and the environment: far below this


def main(grader_pid: int) -> None:
    """Entry point of the master process; never returns. Skips interpreter teardown (10-30 ms
    on a busy machine): nothing is buffered, and the grader waits for our pipes to close."""
    try:
        code = _master_main(grader_pid)
    except BaseException:  # a bug of ours: say so on the grader's stderr, then still exit
        # lazy: traceback (re, tokenize, linecache) costs 4-45 ms, median 20, in a fresh
        # `python -I -S` master, and serves only a bug's report
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        code = 1
    os._exit(code)
