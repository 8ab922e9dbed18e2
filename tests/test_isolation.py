"""Tests for ``gpushare.sandbox.isolation``: a learner's script tries every escape, for real.

Each test runs a real script in the real bubblewrap sandbox, under the real reaper, and checks
from outside (files, sockets, psutil) that the escape failed, that the run ended with the right
status, that nothing it started is still running, and that the supervisor goes on serving the
next run ("grading goes on"). Skipped, saying why, where bubblewrap cannot run (``make setup``
installs it where it can).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gpulab import requestcases
from gpushare.lab import binaries
from gpushare.sandbox import isolation, limits
from gpushare.sandbox.isolation import Isolation, IsolationUnavailable
from gpushare.sandbox.supervisor import RunResult, SandboxError, Supervisor
from tests.test_sandbox import MARKER, SLACK_S, _marked, _script

ROOT = Path(__file__).resolve().parents[1]
PROBE = isolation.probe()
pytestmark = pytest.mark.skipif(
    not PROBE.available, reason=f"no bubblewrap sandbox here: {PROBE.reason}"
)


@pytest.fixture
def token() -> Iterator[str]:
    """A marker for this test's processes; whatever still carries it at the end is killed, so
    a failing test cannot leave strays on the machine."""
    token = uuid.uuid4().hex
    yield token
    for proc in _marked(token):
        with contextlib.suppress(psutil.Error):
            proc.kill()


@pytest.fixture
def env_token(token: str) -> dict[str, str]:
    """Our environment with the test's marker (for unsandboxed runs)."""
    return {**os.environ, MARKER: token}


@pytest.fixture
def iso() -> Isolation:
    assert PROBE.isolation is not None
    return PROBE.isolation


@pytest.fixture
def klass(tmp_path: Path) -> tuple[Path, Path]:
    """Two submissions side by side, as class grading has them: (alice's, bob's)."""
    alice, bob = tmp_path / "class" / "alice", tmp_path / "class" / "bob"
    for workdir in (alice, bob):
        (workdir / "bin").mkdir(parents=True)
    (bob / "secret.txt").write_text("BOB-SECRET\n")
    return alice, bob


class Runner:
    """Alice's ``bin/check-request.sh`` run by one sandboxed supervisor, marked for cleanup."""

    def __init__(self, supervisor: Supervisor, workdir: Path, env: dict[str, str]) -> None:
        self.supervisor, self.workdir, self.env = supervisor, workdir, env

    def __call__(
        self, body: str, *args: str, shebang: str = "#!/bin/bash", **kwargs: object
    ) -> RunResult:
        script = _script(self.workdir / "bin" / "check-request.sh", body, shebang)
        kwargs.setdefault("timeout", 10.0)
        kwargs.setdefault("env", self.env)
        return self.supervisor.run([str(script), *args], cwd=self.workdir, **kwargs)  # type: ignore[arg-type]

    def still_serves(self) -> None:
        """Grading goes on: the next run of the same supervisor works normally."""
        result = self("echo fine\n")
        assert (result.returncode, result.stdout) == (0, "fine\n"), result


@pytest.fixture
def run(iso: Isolation, klass: tuple[Path, Path], token: str) -> Iterator[Runner]:
    env = iso.environment({MARKER: token})
    with Supervisor(isolation=iso) as supervisor:
        runner = Runner(supervisor, klass[0], env)
        yield runner
        runner.still_serves()
    assert _gone(token), "a process of the run outlived it"


def _gone(token: str, within: float = 5.0) -> bool:
    """No process carrying this test's marker is alive (zombies being reaped count as gone)."""
    deadline = time.monotonic() + within
    while True:
        alive = [p for p in _marked(token) if _status(p) != psutil.STATUS_ZOMBIE]
        if not alive:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _status(proc: psutil.Process) -> str:
    try:
        return proc.status()
    except psutil.Error:
        return psutil.STATUS_ZOMBIE


# --- what it can read ---------------------------------------------------------------------------


def test_cannot_read_another_submission(run: Runner, klass: tuple[Path, Path]) -> None:
    _alice, bob = klass
    result = run(
        'cat "$1/secret.txt"; ls "$1"; ls "$(dirname "$PWD")"; '
        "find / -name secret.txt 2>/dev/null; echo end\n",
        str(bob),
    )
    assert "BOB-SECRET" not in result.stdout + result.stderr
    assert result.stdout.endswith("alice\nend\n")  # its parent holds only alice's mount point
    assert "No such file or directory" in result.stderr


@pytest.fixture
def secrets() -> Iterator[dict[str, Path]]:
    """Secrets where an instructor has them: a file in the home directory, a kubeconfig and a
    lab's key in gpushare's cache (the kwok cluster's certificates live there)."""
    tag = uuid.uuid4().hex[:8]
    home_file = Path.home() / f".gpushare-sandbox-test-{tag}"
    lab_dir = binaries.cache_dir() / f"sandbox-test-{tag}"
    paths = {
        "home": home_file,
        "kubeconfig": lab_dir / "kubeconfig.yaml",
        "key": lab_dir / "pki" / "admin.key",
    }
    try:
        for name, path in paths.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"SECRET-{name.upper()}-{tag}\n")
        yield paths
    finally:
        home_file.unlink(missing_ok=True)
        shutil.rmtree(lab_dir, ignore_errors=True)


def test_cannot_read_home_kubeconfigs_or_lab_keys(
    run: Runner, iso: Isolation, secrets: dict[str, Path]
) -> None:
    home = Path.home()
    result = run(
        'for f in "$@"; do cat "$f"; done\n'
        f"ls -A {home}/.kube {home}/.cache 2>&1 | head -5\n"
        f"python3 -c 'print(open(\"{secrets['home']}\").read())'\n"
        f'echo "home: $(ls -A {home} | tr "\\n" " ")"\n'
        "grep -rl --exclude-dir=proc --exclude-dir=dev --exclude-dir=usr SECRET / 2>/dev/null\n"
        "echo end\n",
        *map(str, secrets.values()),
        Path.home().joinpath(".kube", "config").as_posix(),
    )
    out = result.stdout + result.stderr
    assert "SECRET-" not in out.replace("grep -rl SECRET", "")
    assert result.stdout.endswith("end\n")
    # Of the grader's home, only what holds the sandbox's python3 (pyenv) may appear.
    listed = next(line for line in result.stdout.splitlines() if line.startswith("home:"))
    prefix = Path(iso.runtime.prefix)
    allowed = {prefix.relative_to(home).parts[0]} if prefix.is_relative_to(home) else set()
    assert set(listed.split()[1:]) <= allowed


def test_environment_holds_none_of_the_graders_variables(
    iso: Isolation, klass: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/root/.kube/config")
    monkeypatch.setenv("GPUSHARE_SECRET_TOKEN", "t0ken")
    monkeypatch.setenv("LANG", "C.UTF-8")
    script = _script(klass[0] / "bin" / "env.sh", "env | sort\n")
    with Supervisor(isolation=iso) as supervisor:
        result = supervisor.run([str(script)], cwd=klass[0])  # env=None: the sandbox's own
    variables = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert "KUBECONFIG" not in variables and "GPUSHARE_SECRET_TOKEN" not in variables
    assert variables["HOME"] == variables["TMPDIR"] == "/tmp"
    assert variables["PATH"] == isolation.SANDBOX_PATH
    assert variables["LANG"] == "C.UTF-8"


def test_sees_only_its_own_processes_and_cannot_signal_the_grader(run: Runner) -> None:
    grader = os.getpid()
    result = run(
        f"kill -0 {grader} && echo signalled || echo no-such-process\nls /proc | grep -c '^[0-9]'\n"
    )
    lines = result.stdout.split()
    assert lines[0] == "no-such-process"
    assert int(lines[1]) < 10  # bwrap's init, bash, ls, grep


# --- what it can write --------------------------------------------------------------------------


def test_cannot_write_outside_scratch(run: Runner, tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text("kind: Pod\n")
    tag = uuid.uuid4().hex[:8]
    targets = [
        f"$PWD/pwned-{tag}",
        f"$PWD/bin/pwned-{tag}",
        f"/pwned-{tag}",
        f"/usr/pwned-{tag}",
        f"/etc/pwned-{tag}",
        f"/opt/gpushare-python/pwned-{tag}",
        f"/dev/pwned-{tag}",
        f"{Path.home()}/pwned-{tag}",
    ]
    body = "".join(f'echo x > "{t}" 2>/dev/null && echo "wrote {t}"\n' for t in targets)
    body += 'echo more >> "$1" 2>/dev/null && echo "wrote manifest"\n'
    body += 'chmod 777 "$1" 2>/dev/null && echo "chmod manifest"\n'
    body += f'echo x > "/tmp/ok-{tag}" && echo x > "$HOME/home-{tag}" && echo scratch-ok\n'
    result = run(body, str(manifest), readable=[manifest])
    assert result.stdout == "scratch-ok\n", result
    assert manifest.read_text() == "kind: Pod\n"
    workdir = run.workdir
    for path in [
        workdir / f"pwned-{tag}",
        workdir / "bin" / f"pwned-{tag}",
        Path(f"/pwned-{tag}"),
        Path(f"/usr/pwned-{tag}"),
        Path.home() / f"pwned-{tag}",
        Path(f"/tmp/ok-{tag}"),  # the scratch dir was the sandbox's own, now gone
    ]:
        assert not path.exists(), path


@pytest.mark.parametrize(
    ("where", "cap"), [("/tmp", isolation.SCRATCH_BYTES), ("/dev/shm", isolation.SHM_BYTES)]
)
def test_scratch_is_capped_in_size(run: Runner, where: str, cap: int) -> None:
    result = run(f"head -c 200000000 /dev/zero > {where}/big; echo $?; du -m {where}/big\n")
    status, size_mib, _path = result.stdout.split()
    assert status != "0"
    assert int(size_mib) <= cap // (1024 * 1024)
    assert run("echo x > /dev/null && echo ok\n").stdout == "ok\n"  # devices still work


# --- network ------------------------------------------------------------------------------------


def test_cannot_reach_a_listener_on_the_hosts_loopback(run: Runner) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        result = run(
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo bash-connected\n"
            f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' "
            "2>/dev/null && echo python-connected\n"
            "(exec 3<>/dev/tcp/1.1.1.1/53) 2>&1 | grep -m1 -o 'Network is unreachable'\n"
            "echo end\n",
            timeout=20,
        )
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody ever connected
    assert result.stdout == "Network is unreachable\nend\n", result
    assert result.duration < 5  # refused at once, not after a timeout


# --- processes ----------------------------------------------------------------------------------

DAEMON = """\
python3 - <<'EOF'
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open("/tmp/daemon-up", "w").close()
        time.sleep(1000)
    os._exit(0)
os.wait()
while not os.path.exists("/tmp/daemon-up"):
    time.sleep(0.01)
EOF
echo launched
"""


def test_setsid_daemon_does_not_outlive_its_run(run: Runner, token: str) -> None:
    result = run(DAEMON, timeout=30)
    assert (result.returncode, result.stdout, result.timed_out) == (0, "launched\n", False)
    assert _gone(token, within=0.5)  # gone when the run ended, not later
    assert result.duration < SLACK_S


def test_sleep_that_never_ends_is_timed_out(run: Runner, token: str) -> None:
    result = run("echo start\nsleep infinity & wait\n", timeout=1.0)
    assert result.timed_out and result.returncode is None
    assert result.stdout == "start\n"
    assert 1.0 <= result.duration < 1.0 + SLACK_S
    assert _gone(token, within=0.5)


FORK_BOMB = "echo bomb\nb() { b | b & }; b\nsleep 60\n"  # the script itself stays


def test_fork_bomb_is_capped_and_ended(run: Runner, token: str) -> None:
    result = run(FORK_BOMB, timeout=3.0)
    assert result.stdout.startswith("bomb\n")
    assert result.timed_out or result.returncode is not None
    assert result.duration < 3.0 + SLACK_S
    assert _gone(token)
    if "pids" in limits.cgroup_bases():  # else the watchdog: see the next test
        assert "processes" in result.limits_hit


def test_fork_bomb_without_cgroups_is_ended_by_the_watchdog(
    iso: Isolation,
    klass: tuple[Path, Path],
    token: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where no pids cgroup may be created (an unprivileged grader, most containers), the
    reaper's watchdog ends the run: the master forked from here inherits "no cgroups"."""
    monkeypatch.setattr(limits, "_bases", {})
    runner_env = iso.environment({MARKER: token})
    script = _script(klass[0] / "bin" / "check-request.sh", FORK_BOMB, "#!/bin/bash")
    with Supervisor(start="fork", isolation=iso) as supervisor:
        started = time.monotonic()
        result = supervisor.run([str(script)], cwd=klass[0], env=runner_env, timeout=30)
        elapsed = time.monotonic() - started
        assert supervisor.run(["/bin/true"], cwd=klass[0]).returncode == 0  # goes on
    assert result.limits_hit == ("processes",)
    assert result.returncode == -9 and not result.timed_out  # killed, as for an output flood
    assert elapsed < SLACK_S  # ended by the watchdog, long before the time limit
    assert _gone(token)


def test_too_many_processes_unsandboxed_without_cgroups(
    tmp_path: Path, env_token: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watchdog also guards unsandboxed runs (a learner's own grade where bwrap cannot run),
    counting the reaper's descendants. A bounded burst, so a failure cannot hurt the machine."""
    monkeypatch.setattr(limits, "_bases", {})
    script = _script(tmp_path / "s.sh", "for i in $(seq 100); do sleep 30 & done\nwait\n")
    with Supervisor(start="fork") as supervisor:
        result = supervisor.run([str(script)], cwd=tmp_path, env=env_token, timeout=30)
    assert result.limits_hit == ("processes",) and result.returncode == -9, result
    assert result.duration < SLACK_S
    assert _gone(env_token[MARKER])


def test_memory_hog_fails_to_allocate(run: Runner) -> None:
    result = run(
        "python3 -c 'x = bytearray(4 * 1024**3)' 2>&1 | tail -1\n"
        "python3 -c 'import sys; sys.exit(0)' && echo python-still-fine\n"
    )
    assert result.stdout == "MemoryError\npython-still-fine\n", result


def test_memory_hog_in_many_processes_is_capped(run: Runner, token: str) -> None:
    """Eight processes of 400 MiB each: each under RLIMIT_AS, together over the run's cgroup,
    whose OOM killer ends some of them; the script itself goes on."""
    if "memory" not in limits.cgroup_bases():
        pytest.skip("no memory cgroup may be created here: only RLIMIT_AS caps each process")
    hog = "python3 -c 'import time; x = bytearray(400 * 1024**2); time.sleep(2)' &\n"
    result = run(hog * 8 + "wait\necho done\n", timeout=20)
    assert result.stdout == "done\n"
    assert not result.timed_out
    assert "memory" in result.limits_hit
    assert _gone(token)


def test_go_programs_start_under_the_caps(tmp_path: Path) -> None:
    """A Go program (a learner may use ``yq``) reserves ~600 MiB of address space at start: the
    default caps must let it run. Our kubectl is one (unsandboxed: it is not in the sandbox)."""
    kubectl = binaries.find("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not built (make setup)")
    with Supervisor() as supervisor:
        result = supervisor.run([str(kubectl), "version", "--client"], cwd=tmp_path)
    assert result.returncode == 0 and "Client Version" in result.stdout, result


# --- the lab's runtime --------------------------------------------------------------------------


def test_python_check_script_with_pyyaml_passes(iso: Isolation, tmp_path: Path) -> None:
    """The reference check-request.sh (bash + python3 + yaml.safe_load_all) judged on the three
    sample manifests and the unseen cases, sandboxed, exactly as unsandboxed."""
    workdir = tmp_path / "work"
    shutil.copytree(ROOT / "solutions" / "workdir" / "bin", workdir / "bin")
    cases = requestcases.sample_cases(ROOT / "fixtures" / "check-request")
    cases += requestcases.judged(requestcases.drafts(7))
    script = str(workdir / "bin" / "check-request.sh")
    outcomes: dict[bool, list[tuple[int | None, str]]] = {}
    for sandboxed in (True, False):
        with Supervisor(isolation=iso if sandboxed else None) as supervisor:
            pending = []
            for case in cases:
                manifest = tmp_path / "cases" / case.name / "manifest.yaml"
                manifest.parent.mkdir(parents=True, exist_ok=True)
                manifest.write_text(case.manifest)
                pending.append(
                    supervisor.submit(
                        [script, str(manifest)], cwd=workdir, timeout=20, readable=[manifest]
                    )
                )
            results = [p.result() for p in pending]
        for case, result in zip(cases, results, strict=True):
            assert result.isolated is sandboxed
            assert requestcases.judge(case, result.returncode or 0, result.stdout) == (
                True,
                "ok",
            ), (case.name, result)
        outcomes[sandboxed] = [(r.returncode, r.stdout) for r in results]
    assert outcomes[True] == outcomes[False]


def test_versions_are_those_a_script_finds(iso: Isolation, run: Runner) -> None:
    result = run(
        "import sys, yaml\n"
        "print('.'.join(map(str, sys.version_info[:3])), yaml.__version__)\n"
        "print(yaml.__with_libyaml__)\n",
        shebang="#!/usr/bin/env python3",
    )
    versions = iso.versions()
    assert result.stdout.split() == [versions["python3"], versions["pyyaml"], "True"], result


def test_a_spawned_master_sandboxes_too(iso: Isolation, klass: tuple[Path, Path]) -> None:
    """The master started as a fresh interpreter (a grader with threads) runs the same way."""
    script = _script(klass[0] / "bin" / "c.sh", "python3 -c 'import yaml' && hostname\n")
    with Supervisor(start="spawn", isolation=iso) as supervisor:
        assert supervisor._proc.how == "spawn"
        result = supervisor.run([str(script)], cwd=klass[0])
    assert (result.returncode, result.stdout, result.isolated) == (0, "sandbox\n", True), result


def test_bash_coreutils_awk_are_there(run: Runner) -> None:
    result = run(
        "printf 'a 1\\nb 2\\n' | awk '{s += $2} END {print s}' | tr 3 x; sed --version "
        "| head -1 | cut -c1-8; grep -c . /etc/passwd >/dev/null && echo ok\n"
    )
    assert result.stdout == "x\nsed (GNU\nok\n", result


# --- failures keep their meaning ----------------------------------------------------------------


def test_exec_failures_read_as_unsandboxed(iso: Isolation, klass: tuple[Path, Path]) -> None:
    workdir = klass[0]
    no_shebang = workdir / "bin" / "plain.sh"
    no_shebang.write_text("echo hi\n")
    no_shebang.chmod(0o755)
    not_executable = _script(workdir / "bin" / "noexec.sh", "echo hi\n")
    not_executable.chmod(0o644)
    bad_interpreter = _script(workdir / "bin" / "bad.sh", "echo hi\n", "#!/nonexistent/sh")
    with Supervisor(isolation=iso) as sandboxed, Supervisor() as plain:
        for path, code in [
            (workdir / "bin" / "missing.sh", errno.ENOENT),
            (no_shebang, errno.ENOEXEC),
            (not_executable, errno.EACCES),
            (bad_interpreter, errno.ENOENT),
        ]:
            for supervisor in (sandboxed, plain):
                with pytest.raises(OSError) as excinfo:
                    supervisor.run([str(path)], cwd=workdir)
                assert excinfo.value.errno == code, (path, supervisor.isolated)
        with pytest.raises(SandboxError, match="could not start"):
            sandboxed.run(["/bin/true"], cwd=workdir, readable=[workdir / "no-such-manifest"])
        assert sandboxed.run(["/bin/true"], cwd=workdir).returncode == 0


def test_death_by_signal_reads_as_a_shell_would(run: Runner) -> None:
    assert run("kill -TERM $$\nsleep 5\n").returncode == 128 + 15


def test_the_cgroup_of_a_run_is_removed_after_it(tmp_path: Path) -> None:
    """Each run has a cgroup of its own (where one may be made), gone once the run is over.
    Shown unsandboxed: inside the sandbox its cgroup namespace hides the path."""
    bases = limits.cgroup_bases()
    if "pids" not in bases:
        pytest.skip("no pids cgroup may be created here (the watchdog caps processes)")
    version, base = bases["pids"]
    line = "pids" if version == 1 else ""
    script = _script(tmp_path / "s.sh", f"grep ':{line}:' /proc/self/cgroup | cut -d: -f3\n")
    with Supervisor() as supervisor:
        for _ in range(2):
            result = supervisor.run([str(script)], cwd=tmp_path)
            group = result.stdout.strip().rsplit("/", 1)[-1]
            assert group.startswith(limits.RUN_GROUP_PREFIX), result
            assert not os.path.exists(os.path.join(base, group))


# --- policy -------------------------------------------------------------------------------------


@pytest.fixture
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setattr(isolation, "_noticed", False)
    yield monkeypatch
    monkeypatch.undo()
    isolation.probe(refresh=True)


@pytest.mark.parametrize(
    ("bwrap", "why"),
    [("/nonexistent/bwrap", "not found"), ("/bin/false", "cannot create its sandbox")],
)
def test_policy_without_a_sandbox(fresh_probe: pytest.MonkeyPatch, bwrap: str, why: str) -> None:
    fresh_probe.setenv(isolation.BWRAP_ENV, bwrap)
    found = isolation.probe(refresh=True)
    assert not found.available and why in found.reason
    with pytest.raises(IsolationUnavailable, match="--unsafe-no-sandbox") as excinfo:
        isolation.require()
    assert why in str(excinfo.value) and "apt-get install bubblewrap" in str(excinfo.value)
    assert isolation.require(unsafe_no_sandbox=True) is None
    first = isolation.for_own_work()
    assert first[0] is None and first[1] is not None and "without a sandbox" in first[1]
    assert isolation.for_own_work() == (None, None)  # said once


def test_policy_with_a_sandbox(fresh_probe: pytest.MonkeyPatch) -> None:
    found = isolation.probe(refresh=True)
    assert found.available, found.reason
    assert isolation.require() is found.isolation
    assert isolation.require(unsafe_no_sandbox=True) is None  # as asked: no sandbox
    assert isolation.for_own_work() == (found.isolation, None)
    with Supervisor(isolation=found.isolation) as sandboxed, Supervisor() as plain:
        assert (sandboxed.mode, plain.mode) == ("isolated", "unisolated")


@pytest.mark.parametrize("bwrap", [None, "/bin/false"])
def test_a_probe_started_early_gives_the_same_answer(
    fresh_probe: pytest.MonkeyPatch, bwrap: str | None
) -> None:
    """``gpushare grade`` starts the trial run before importing the grader (probe_soon) and
    collects it when the runs start: the same answer as a probe made there and then."""
    if bwrap:
        fresh_probe.setenv(isolation.BWRAP_ENV, bwrap)
    now = isolation.probe(refresh=True)
    fresh_probe.setattr(isolation, "_probed", None)
    isolation.probe_soon()
    trial = isolation._trial
    assert trial is not None  # started, not waited for
    isolation.probe_soon()
    assert isolation._trial is trial  # one trial, however often asked
    early = isolation.probe()
    assert isolation._trial is None and isolation.probe() is early
    assert (early.available, early.reason) == (now.available, now.reason)
    if now.isolation is not None:
        assert early.isolation is not None
        assert early.isolation.command(["true"], cwd=None) == now.isolation.command(
            ["true"], cwd=None
        )


def test_cost_of_a_sandboxed_run_is_small(iso: Isolation, tmp_path: Path) -> None:
    """Generous bound (shared machine); measured about 10 ms more than unsandboxed."""
    with Supervisor(isolation=iso) as supervisor:
        best = min(supervisor.run(["/bin/true"], cwd=tmp_path).duration for _ in range(5))
    assert best < 0.5
