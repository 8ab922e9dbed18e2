"""Tests for ``gpushare.sandbox.supervisor``: real scripts, real processes, no mocks.

Every run gets a unique marker in its environment; the ``sandbox`` fixture kills any process
still carrying it when the test ends, so a failing test (or a sandbox bug) cannot leave strays on
the machine. Time bounds are deliberately generous: the machine is shared and noisy.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from gpushare.sandbox.supervisor import (
    RunResult,
    SandboxError,
    Supervisor,
    check_runnable,
)

MARKER = "GPUSHARE_SANDBOX_TEST"
SLACK_S = 5.0  # on top of the run's own timeout, for a loaded machine

Runner = Callable[..., RunResult]


def _marked(token: str) -> list[psutil.Process]:
    """Processes whose environment carries this test's marker."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(MARKER) == token:
                found.append(proc)
    return found


def _is_dead(pid: int, token: str) -> bool:
    """Gone, a zombie, or the pid now belongs to a process that is not ours."""
    try:
        proc = psutil.Process(pid)
        return proc.status() == psutil.STATUS_ZOMBIE or proc.environ().get(MARKER) != token
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return True  # cannot be ours


def _wait_dead(pid: int, token: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while not _is_dead(pid, token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _read_pid(path: Path, within: float = 10.0) -> int:
    """A pid that a script writes to ``path`` (written to a temporary name, then renamed)."""
    deadline = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return int(path.read_text().split()[0])


def _script(path: Path, body: str, shebang: str = "#!/bin/sh") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{shebang}\n{body}")
    path.chmod(0o755)
    return path


@pytest.fixture
def token() -> Iterator[str]:
    token = uuid.uuid4().hex
    yield token
    for _ in range(3):  # kill whatever this test left behind, even on failure
        procs = _marked(token)
        if not procs:
            break
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(procs, timeout=2)


@pytest.fixture
def env(token: str) -> dict[str, str]:
    return {**os.environ, MARKER: token, "PYTHON": sys.executable}


@pytest.fixture(params=["fork", "spawn"])
def sandbox(request: pytest.FixtureRequest, tmp_path: Path, env: dict[str, str]) -> Runner:
    """One run under a supervisor of its own, with this test's marked environment and
    ``tmp_path`` as cwd; once with the master forked from us, once spawned fresh."""

    def run(argv: list[str], **kwargs: object) -> RunResult:
        kwargs.setdefault("cwd", tmp_path)
        kwargs.setdefault("env", env)
        with Supervisor(start=request.param) as supervisor:
            assert supervisor._proc.how == request.param
            return supervisor.run(argv, **kwargs)  # type: ignore[arg-type]

    return run


# --- ordinary runs ----------------------------------------------------------------------------


def test_normal_script_output_and_returncode(sandbox: Runner, tmp_path: Path) -> None:
    script = _script(tmp_path / "check.sh", 'echo "out line"\necho "err line" >&2\nexit 1\n')
    result = sandbox([str(script)])
    assert result.returncode == 1
    assert result.stdout == "out line\n"
    assert result.stderr == "err line\n"
    assert not result.timed_out
    assert not result.truncated
    assert result.leftover_killed == 0
    assert 0 < result.duration < SLACK_S


def test_stdin_is_empty_dev_null(sandbox: Runner, tmp_path: Path) -> None:
    script = _script(
        tmp_path / "s.sh", "data=$(cat)\nprintf '[%s]' \"$data\"\nreadlink /proc/self/fd/0\n"
    )
    result = sandbox([str(script)], timeout=10)
    assert not result.timed_out
    assert result.stdout == "[]/dev/null\n"


def test_death_by_signal_is_negative_returncode(sandbox: Runner, tmp_path: Path) -> None:
    script = _script(tmp_path / "s.sh", "kill -TERM $$\nsleep 5\n")
    result = sandbox([str(script)])
    assert result.returncode == -signal.SIGTERM
    assert not result.timed_out


def test_env_and_cwd_are_the_given_ones(token: str, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    script = _script(tmp_path / "s.sh", 'pwd\necho "${ONLY-unset} ${HOME-unset}"\n')
    env = {"PATH": os.environ["PATH"], "ONLY": "here", MARKER: token}
    with Supervisor() as supervisor:
        result = supervisor.run([str(script)], cwd=workdir, env=env)
    assert result.stdout == f"{workdir}\nhere unset\n"


def test_arguments_are_passed_literally_without_shell(sandbox: Runner, tmp_path: Path) -> None:
    script = _script(
        tmp_path / "dir with spaces" / "check request.sh",
        'for a in "$@"; do printf \'<%s>\\n\' "$a"; done\n',
    )
    args = [
        "manifests/my request.yaml",
        "$(touch pwned); `touch pwned2` | tee y && echo * > z; $HOME",
        "",
        "--",
        "'quoted' \"double\"\nnewline",
    ]
    result = sandbox([str(script), *args])
    assert result.returncode == 0
    assert result.stdout == "".join(f"<{arg}>\n" for arg in args)
    for name in ("pwned", "pwned2", "y", "z"):
        assert not (tmp_path / name).exists()


def test_relative_script_path_resolves_against_cwd(sandbox: Runner, tmp_path: Path) -> None:
    _script(tmp_path / "bin" / "check-request.sh", 'echo "got $1"\n')
    result = sandbox(["bin/check-request.sh", "m.yaml"])
    assert (result.returncode, result.stdout) == (0, "got m.yaml\n")


# --- time limit -------------------------------------------------------------------------------


def test_sleeping_forever_times_out(sandbox: Runner, tmp_path: Path, token: str) -> None:
    pidfile = tmp_path / "sleep.pid"
    script = _script(
        tmp_path / "s.sh",
        "trap '' TERM HUP INT\necho start\n"
        'sleep 1000 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"\nwait $!\n',
    )
    result = sandbox([str(script), str(pidfile)], timeout=1.0)
    assert result.timed_out
    assert result.returncode is None
    assert result.stdout == "start\n"
    assert 1.0 <= result.duration < 1.0 + SLACK_S
    assert result.leftover_killed >= 1
    assert _is_dead(_read_pid(pidfile), token)


def test_hung_supervisor_is_killed_at_the_hard_limit(
    sandbox: Runner, tmp_path: Path, token: str
) -> None:
    """A script that stops its own supervisor: the grader's hard limit must still end it all."""
    pidfile = tmp_path / "sleep.pid"
    script = _script(
        tmp_path / "s.sh",
        'sleep 1000 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"\nkill -STOP $PPID\nwait\n',
    )
    started = time.monotonic()
    with pytest.raises(SandboxError, match="killed"):
        sandbox([str(script), str(pidfile)], timeout=1.0)
    assert time.monotonic() - started < 1.0 + 3.0 + SLACK_S
    # The script dies with its supervisor (PDEATHSIG); its child is found by session id.
    assert _wait_dead(_read_pid(pidfile), token, within=5)


# --- leftover processes -----------------------------------------------------------------------

DAEMON = """\
"$PYTHON" - "$1" <<'EOF'
import os, sys, time
old_sid = os.getsid(0)
if os.fork() == 0:
    os.setsid()                      # leave the script's session and process group
    if os.fork() == 0:               # and its parent: re-parented as an orphan
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(f"{os.getpid()} {os.getsid(0)} {old_sid}")
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(1000)             # still holding the script's stdout and stderr
    os._exit(0)
os.wait()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
EOF
echo launched
"""


def test_setsid_double_forked_daemon_is_killed(sandbox: Runner, tmp_path: Path, token: str) -> None:
    pidfile = tmp_path / "daemon.pid"
    script = _script(tmp_path / "s.sh", DAEMON)
    result = sandbox([str(script), str(pidfile)], timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "launched\n"
    assert not result.timed_out
    assert result.leftover_killed >= 1
    pid, sid, script_sid = map(int, pidfile.read_text().split())
    assert sid != script_sid  # it really left the script's session
    assert _is_dead(pid, token)
    assert result.duration < SLACK_S


def test_background_child_of_exited_script_is_killed(
    sandbox: Runner, tmp_path: Path, token: str
) -> None:
    pidfile = tmp_path / "bg.pid"
    script = _script(
        tmp_path / "s.sh", 'sleep 1000 &\necho $! > "$1.tmp" && mv "$1.tmp" "$1"\necho done\n'
    )
    result = sandbox([str(script), str(pidfile)], timeout=30)
    assert (result.returncode, result.stdout, result.timed_out) == (0, "done\n", False)
    assert result.leftover_killed == 1
    assert _is_dead(_read_pid(pidfile), token)
    assert result.duration < SLACK_S


def test_grader_death_ends_the_run(tmp_path: Path, env: dict[str, str], token: str) -> None:
    """If the grading process is SIGKILLed mid-run, supervisor and script must not linger."""
    pidfile = tmp_path / "bg.pid"
    script = _script(
        tmp_path / "s.sh", 'sleep 1000 &\necho "$$ $!" > "$1.tmp" && mv "$1.tmp" "$1"\nwait\n'
    )
    driver_code = (
        "import sys\nfrom pathlib import Path\n"
        "from gpushare.sandbox.supervisor import Supervisor\n"
        "Supervisor().run(sys.argv[1:3], cwd=Path(sys.argv[3]), timeout=300)\n"
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", driver_code, str(script), str(pidfile), str(tmp_path)], env=env
    )
    try:
        pids = [int(word) for word in _read_pid_line(pidfile)]
        supervisors = [p for p in _marked(token) if p.pid not in (*pids, driver.pid)]
        driver.kill()
        driver.wait()
        for pid in pids + [p.pid for p in supervisors]:
            assert _wait_dead(pid, token, within=10), f"pid {pid} survived the grader"
    finally:
        driver.kill()
        driver.wait()


def _read_pid_line(path: Path) -> list[str]:
    _read_pid(path)
    return path.read_text().split()


def test_parallel_runs_from_threads(env: dict[str, str], tmp_path: Path, token: str) -> None:
    """Runs from worker threads must not interfere (PDEATHSIG follows the spawning thread)."""
    script = _script(tmp_path / "s.sh", DAEMON)
    pidfiles = [tmp_path / f"d{i}.pid" for i in range(4)]

    def one(pidfile: Path) -> RunResult:
        with Supervisor() as supervisor:  # one per thread
            return supervisor.run([str(script), str(pidfile)], cwd=tmp_path, env=env, timeout=30)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, pidfiles))
    for result, pidfile in zip(results, pidfiles, strict=True):
        assert (result.returncode, result.stdout) == (0, "launched\n"), result.stderr
        assert _is_dead(int(pidfile.read_text().split()[0]), token)


def test_grader_does_not_become_a_subreaper(sandbox: Runner, tmp_path: Path) -> None:
    sandbox([str(_script(tmp_path / "s.sh", "exit 0\n"))])
    libc = ctypes.CDLL(None, use_errno=True)
    value = ctypes.c_int(-1)
    assert libc.prctl(37, ctypes.byref(value), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
    assert value.value == 0


# --- output flooding --------------------------------------------------------------------------


def test_endless_output_is_capped_and_ended(sandbox: Runner, tmp_path: Path) -> None:
    script = _script(tmp_path / "s.sh", "yes\n")
    result = sandbox([str(script)], timeout=30)
    assert result.truncated
    assert not result.timed_out
    assert result.stdout == "y\n" * (64 * 1024 // 2)
    assert result.duration < SLACK_S


def test_huge_burst_on_stderr_is_capped(sandbox: Runner, tmp_path: Path) -> None:
    rss_before = psutil.Process().memory_info().rss
    script = _script(tmp_path / "s.sh", "echo ok\nhead -c 100000000 /dev/zero | tr '\\0' x >&2\n")
    result = sandbox([str(script)], timeout=30, output_cap=1000)
    assert result.truncated
    assert result.stdout == "ok\n"
    assert result.stderr == "x" * 1000
    assert result.duration < SLACK_S
    assert psutil.Process().memory_info().rss - rss_before < 50 * 1024 * 1024


def test_output_exactly_at_the_cap_is_not_truncated(sandbox: Runner, tmp_path: Path) -> None:
    script = _script(tmp_path / "s.sh", "printf 1234567890\n")
    result = sandbox([str(script)], output_cap=10)
    assert (result.stdout, result.truncated, result.returncode) == ("1234567890", False, 0)


# --- scripts that cannot run ------------------------------------------------------------------


def test_missing_script_raises_file_not_found(sandbox: Runner, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        sandbox([str(tmp_path / "nope.sh")])


def test_script_without_shebang_raises_enoexec(sandbox: Runner, tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    with pytest.raises(OSError) as excinfo:
        sandbox([str(script)])
    assert excinfo.value.errno == errno.ENOEXEC


def test_bad_arguments_are_rejected(tmp_path: Path) -> None:
    with Supervisor() as supervisor:
        with pytest.raises(ValueError):
            supervisor.run([], cwd=tmp_path)
        with pytest.raises(ValueError):
            supervisor.run(["/bin/true"], cwd=tmp_path, timeout=0)
        with pytest.raises(ValueError):
            supervisor.run(["/bin/echo", "a\0b"], cwd=tmp_path)


# --- check_runnable ---------------------------------------------------------------------------


def test_check_runnable_keys(tmp_path: Path) -> None:
    good = _script(tmp_path / "good.sh", "exit 0\n")
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to(tmp_path / "absent")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "to-good").symlink_to(good)
    (tmp_path / "to-dir").symlink_to(tmp_path / "dir")

    assert check_runnable(good) is None
    assert check_runnable(tmp_path / "to-good") is None
    assert check_runnable(tmp_path / "absent") == "missing"
    assert check_runnable(good / "below-a-file") == "missing"
    assert check_runnable(tmp_path / "dangling") == "dangling_link"
    assert check_runnable(tmp_path / "loop") == "dangling_link"
    assert check_runnable(tmp_path / "dir") == "directory"
    assert check_runnable(tmp_path / "to-dir") == "directory"
    assert check_runnable(plain) == "not_executable"
    assert check_runnable(tmp_path / "fifo") == "not_regular"
    assert check_runnable(Path("/dev/null")) == "not_regular"
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)  # the fifo was never opened


# --- one supervisor, many runs ----------------------------------------------------------------

# The script's parent is its reaper; the reaper's parent must be the supervisor's one master.
PARENTS = 'echo "reaper-parent $(cut -d" " -f4 /proc/$PPID/stat)"\n'


def test_one_master_serves_many_runs_from_threads(
    tmp_path: Path, env: dict[str, str], token: str
) -> None:
    """Runs share one master process (no interpreter start per run) yet stay apart."""
    script = _script(tmp_path / "s.sh", PARENTS + DAEMON)
    pidfiles = [tmp_path / f"d{i}.pid" for i in range(6)]
    with Supervisor() as supervisor, ThreadPoolExecutor(max_workers=3) as pool:
        master = supervisor._proc.pid
        results = list(
            pool.map(
                lambda p: supervisor.run([str(script), str(p)], cwd=tmp_path, env=env, timeout=30),
                pidfiles,
            )
        )
    for result, pidfile in zip(results, pidfiles, strict=True):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"reaper-parent {master}\nlaunched\n"
        assert result.leftover_killed >= 1
        assert _is_dead(int(pidfile.read_text().split()[0]), token)
    assert supervisor._proc.returncode == 0  # closing ended the master


def test_the_master_is_forked_only_from_a_single_threaded_grader() -> None:
    """Forking a process with other threads is unsafe: then the master is spawned fresh."""
    with Supervisor() as alone:
        assert alone._proc.how == ("fork" if threading.active_count() == 1 else "spawn")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with Supervisor() as crowded:
            assert crowded._proc.how == "spawn"
    finally:
        stop.set()
        other.join()


@pytest.mark.parametrize("pidfd", ["pidfd", "refused"])
def test_the_masters_exit_is_waited_for(
    pidfd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing waits on the master's pidfd; where pidfd_open is refused (a seccomp filter, an
    old kernel) the exit is polled for: either way the master is reaped with its status, and a
    master still running after the timeout is said to be (None)."""
    if pidfd == "refused":

        def refuse(pid: int, flags: int = 0) -> int:
            raise OSError(errno.ENOSYS, "pidfd_open refused")

        monkeypatch.setattr(os, "pidfd_open", refuse)
    supervisor = Supervisor()
    assert supervisor.run(["/bin/true"], cwd=tmp_path).returncode == 0
    assert supervisor._proc.wait(timeout=0.05) is None  # serving: still running
    supervisor.close()
    assert supervisor._proc.returncode == 0
    with pytest.raises(ChildProcessError):
        os.waitpid(supervisor._proc.pid, os.WNOHANG)  # reaped, no zombie left


def test_missing_cwd_raises_file_not_found(tmp_path: Path) -> None:
    with Supervisor() as supervisor:
        with pytest.raises(FileNotFoundError) as excinfo:
            supervisor.run(["/bin/true"], cwd=tmp_path / "nope")
        assert excinfo.value.filename == str(tmp_path / "nope")
        assert supervisor.run(["/bin/true"], cwd=tmp_path).returncode == 0  # still serving


def test_closing_the_supervisor_ends_runs_in_flight(
    tmp_path: Path, env: dict[str, str], token: str
) -> None:
    pidfile = tmp_path / "sleep.pid"
    script = _script(
        tmp_path / "s.sh", 'sleep 1000 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"\nwait\n'
    )
    supervisor = Supervisor()
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(
            supervisor.run, [str(script), str(pidfile)], cwd=tmp_path, env=env, timeout=300
        )
        sleeper = _read_pid(pidfile)
        started = time.monotonic()
        supervisor.close()
        result = future.result(timeout=SLACK_S)
    assert time.monotonic() - started < SLACK_S
    assert result.returncode is None and result.leftover_killed >= 1
    assert _is_dead(sleeper, token)
    with pytest.raises(SandboxError, match="closed"):
        supervisor.run(["/bin/true"], cwd=tmp_path)


def test_script_that_kills_the_master_loses_its_run_only(
    tmp_path: Path, env: dict[str, str], token: str
) -> None:
    """A hostile script may end the master: its run fails, nothing is left, and the grader is
    told clearly that the supervisor is gone instead of hanging."""
    pidfile = tmp_path / "sleep.pid"
    script = _script(
        tmp_path / "s.sh",
        'sleep 1000 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"\n'
        'kill -9 "$(cut -d" " -f4 /proc/$PPID/stat)"\nwait\n',
    )
    with Supervisor() as supervisor:
        result = supervisor.run([str(script), str(pidfile)], cwd=tmp_path, env=env, timeout=30)
        assert result.returncode is None  # aborted: its reaper lost the master
        assert _is_dead(_read_pid(pidfile), token)
        assert supervisor._proc.wait(timeout=5) == -signal.SIGKILL
        with pytest.raises(SandboxError, match="gone"):
            supervisor.run(["/bin/true"], cwd=tmp_path)


# --- cost -------------------------------------------------------------------------------------


def test_overhead_of_a_trivial_run_is_small(sandbox: Runner) -> None:
    """Generous bound (shared machine); the design target is well under 0.1 s."""
    best = min(sandbox(["/bin/true"]).duration for _ in range(5))
    assert best < 1.0
