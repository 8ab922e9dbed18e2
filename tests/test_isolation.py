"""Tests for ``gpushare.sandbox.levels``: a learner's script tries every escape, for real.

Each test runs a real script at each level that isolates (``bubblewrap``, ``uid`` as root),
under the real reaper, and checks
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
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gpulab import requestcases
from gpushare.lab import binaries
from gpushare.sandbox import ids, isolation, levels, runtime
from gpushare.sandbox.isolation import IsolationUnavailable
from gpushare.sandbox.levels import Sandbox
from gpushare.sandbox.supervisor import RunResult, SandboxError, Supervisor
from tests.test_sandbox import MARKER, SLACK_S, _marked, _script

ROOT = Path(__file__).resolve().parents[1]
PROBE = isolation.probe()
LEVELS = [
    pytest.param(
        "bubblewrap",
        marks=pytest.mark.skipif(not PROBE.available, reason=f"no bubblewrap: {PROBE.reason}"),
    ),
    pytest.param(
        "uid", marks=pytest.mark.skipif(not ids.can_switch(), reason="the uid level needs root")
    ),
]


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


@pytest.fixture(params=LEVELS)
def sb(request: pytest.FixtureRequest) -> Sandbox:
    """Each level that isolates, where it runs here."""
    if request.param == "bubblewrap":
        assert PROBE.isolation is not None
        return Sandbox(levels.BUBBLEWRAP, PROBE.isolation)
    return Sandbox(levels.UID)


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
def run(sb: Sandbox, klass: tuple[Path, Path], token: str) -> Iterator[Runner]:
    env = {MARKER: token}
    with Supervisor(sandbox=sb) as supervisor:
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
    assert result.stdout.endswith("alice\nend\n")  # its parent holds only alice's mount
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


def test_cannot_read_home_kubeconfigs_or_lab_keys(run: Runner, secrets: dict[str, Path]) -> None:
    home = Path.home()
    result = run(
        'for f in "$@"; do cat "$f"; done\n'
        f"ls -A {home}/.kube {home}/.cache 2>&1 | head -5\n"
        f"python3 -c 'print(open(\"{secrets['home']}\").read())'\n"
        f'echo "home: $(ls -A {home} | tr "\\n" " ")"\n'
        # the whole tree where it is small (bubblewrap); the grader's places at the uid level
        'if [ -d /sys ]; then top=$(dirname "$1"); else top=/; fi\n'
        "timeout 5 grep -rl --exclude-dir=proc --exclude-dir=dev --exclude-dir=usr"
        ' --exclude-dir=sys SECRET "$top" $HOME 2>/dev/null\n'
        "echo end\n",
        *map(str, secrets.values()),
        Path.home().joinpath(".kube", "config").as_posix(),
    )
    out = result.stdout + result.stderr
    assert "SECRET-" not in out.replace("grep -rl SECRET", "")
    assert result.stdout.endswith("end\n")
    # Nothing of the grader's home: the sandbox's python3 is a copy outside it.
    listed = next(line for line in result.stdout.splitlines() if line.startswith("home:"))
    assert listed.split()[1:] == []


def test_environment_holds_none_of_the_graders_variables(
    sb: Sandbox, klass: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/root/.kube/config")
    monkeypatch.setenv("GPUSHARE_SECRET_TOKEN", "t0ken")
    monkeypatch.setenv("LANG", "C.UTF-8")
    script = _script(klass[0] / "bin" / "env.sh", "env | sort\n")
    with Supervisor(sandbox=sb) as supervisor:
        result = supervisor.run([str(script)], cwd=klass[0])  # env=None: the sandbox's own
    variables = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert "KUBECONFIG" not in variables and "GPUSHARE_SECRET_TOKEN" not in variables
    assert variables["HOME"] == variables["TMPDIR"]
    assert variables["HOME"] == "/tmp"  # the capped scratch of the run's own
    assert variables["PATH"].startswith(runtime.find().bin + ":")
    assert variables["LANG"] == "C.UTF-8"


def test_sees_only_its_own_processes_and_cannot_signal_the_grader(sb: Sandbox, run: Runner) -> None:
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
        f"{runtime.find().bin}/pwned-{tag}",
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
def test_scratch_is_capped_in_size(sb: Sandbox, run: Runner, where: str, cap: int) -> None:
    result = run(f"head -c 200000000 /dev/zero > {where}/big; echo $?; du -m {where}/big\n")
    status, size_mib, _path = result.stdout.split()
    assert status != "0"
    assert int(size_mib) <= cap // (1024 * 1024)
    assert run("echo x > /dev/null && echo ok\n").stdout == "ok\n"  # devices still work


# --- network ------------------------------------------------------------------------------------


def test_cannot_reach_a_listener_on_the_hosts_loopback(sb: Sandbox, run: Runner) -> None:
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


def test_memory_hog_fails_to_allocate(run: Runner) -> None:
    result = run(
        "python3 -c 'x = bytearray(4 * 1024**3)' 2>&1 | tail -1\n"
        "python3 -c 'import sys; sys.exit(0)' && echo python-still-fine\n"
    )
    assert result.stdout == "MemoryError\npython-still-fine\n", result


def test_memory_of_many_processes_is_bounded_without_cgroups(run: Runner, token: str) -> None:
    """Forty processes trying 100 MiB each (4 GB together): RLIMIT_NPROC of the run's own uid
    stops the forks, RLIMIT_AS each process, so the run holds at most ``memory`` at once."""
    hog = (
        "import os, time\n"
        "got = 0\n"
        "for _ in range(40):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        continue\n"
        "    if pid == 0:\n"
        "        x = bytearray(100 * 1024**2); time.sleep(3); os._exit(0)\n"
        "    got += 1\n"
        "print(got)\n"
    )
    result = run(hog, shebang="#!/usr/bin/env python3", timeout=20)
    forked = int(result.stdout.split()[0])
    assert forked * 100 * 1024**2 < 4 * 10**9 and forked < 16, result
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


def test_python_check_script_with_pyyaml_passes(sb: Sandbox, tmp_path: Path) -> None:
    """The reference check-request.sh (bash + python3 + yaml.safe_load_all) judged on the three
    sample manifests and the unseen cases, sandboxed, exactly as unsandboxed."""
    workdir = tmp_path / "work"
    shutil.copytree(ROOT / "solutions" / "workdir" / "bin", workdir / "bin")
    cases = requestcases.sample_cases(ROOT / "fixtures" / "check-request")
    cases += requestcases.judged(requestcases.drafts(7))
    script = str(workdir / "bin" / "check-request.sh")
    outcomes: dict[bool, list[tuple[int | None, str]]] = {}
    for sandboxed in (True, False):
        with Supervisor(sandbox=sb if sandboxed else None) as supervisor:
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
            assert result.isolation == (sb.level if sandboxed else "none")
            assert requestcases.judge(case, result.returncode or 0, result.stdout) == (
                True,
                "ok",
            ), (case.name, result)
        outcomes[sandboxed] = [(r.returncode, r.stdout) for r in results]
    assert outcomes[True] == outcomes[False]


def test_versions_are_those_a_script_finds(run: Runner) -> None:
    result = run(
        "import sys, yaml\n"
        "print('.'.join(map(str, sys.version_info[:3])), yaml.__version__)\n"
        "print(yaml.__with_libyaml__)\n",
        shebang="#!/usr/bin/env python3",
    )
    found = runtime.find()
    assert result.stdout.split() == [found.python_version, found.pyyaml_version, "True"], result


def test_a_spawned_master_sandboxes_too(sb: Sandbox, klass: tuple[Path, Path]) -> None:
    """The master started as a fresh interpreter (a grader with threads) runs the same way."""
    script = _script(klass[0] / "bin" / "c.sh", "python3 -c 'import yaml' && id -u\n")
    with Supervisor(start="spawn", sandbox=sb) as supervisor:
        assert supervisor._proc.how == "spawn"
        result = supervisor.run([str(script)], cwd=klass[0])
    assert (result.returncode, result.isolation) == (0, sb.level), result
    if ids.can_switch():
        assert int(result.stdout) != os.getuid()


def test_bash_coreutils_awk_are_there(run: Runner) -> None:
    result = run(
        "printf 'a 1\\nb 2\\n' | awk '{s += $2} END {print s}' | tr 3 x; sed --version "
        "| head -1 | cut -c1-8; grep -c . /etc/passwd >/dev/null && echo ok\n"
    )
    assert result.stdout == "x\nsed (GNU\nok\n", result


# --- failures keep their meaning ----------------------------------------------------------------


def test_exec_failures_read_as_unsandboxed(sb: Sandbox, klass: tuple[Path, Path]) -> None:
    workdir = klass[0]
    no_shebang = workdir / "bin" / "plain.sh"
    no_shebang.write_text("echo hi\n")
    no_shebang.chmod(0o755)
    not_executable = _script(workdir / "bin" / "noexec.sh", "echo hi\n")
    not_executable.chmod(0o644)
    bad_interpreter = _script(workdir / "bin" / "bad.sh", "echo hi\n", "#!/nonexistent/sh")
    with Supervisor(sandbox=sb) as sandboxed, Supervisor() as plain:
        for path, code in [
            (workdir / "bin" / "missing.sh", errno.ENOENT),
            (no_shebang, errno.ENOEXEC),
            (not_executable, errno.EACCES),
            (bad_interpreter, errno.ENOENT),
        ]:
            for supervisor in (sandboxed, plain):
                with pytest.raises(OSError) as excinfo:
                    supervisor.run([str(path)], cwd=workdir)
                assert excinfo.value.errno == code, (path, supervisor.sandbox.level)
        with pytest.raises((SandboxError, OSError), match=r"could not|No such file"):
            sandboxed.run(["/bin/true"], cwd=workdir, readable=[workdir / "no-such-manifest"])
        assert sandboxed.run(["/bin/true"], cwd=workdir).returncode == 0


def test_death_by_signal_reads_as_a_shell_would(sb: Sandbox, run: Runner) -> None:
    # both levels' inits say it as a shell would
    assert run("kill -TERM $$\nsleep 5\n").returncode == 128 + 15


# --- policy -------------------------------------------------------------------------------------


@pytest.fixture
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setattr(levels, "_noticed", False)
    yield monkeypatch
    monkeypatch.undo()
    isolation.probe(refresh=True)


@pytest.mark.parametrize(
    ("bwrap", "why"),
    [("/nonexistent/bwrap", "not found"), ("/bin/false", "cannot create its sandbox")],
)
def test_policy_without_bubblewrap(
    fresh_probe: pytest.MonkeyPatch, bwrap: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_probe.setenv(isolation.BWRAP_ENV, bwrap)
    found = isolation.probe(refresh=True)
    assert not found.available and why in found.reason
    assert levels.choose(strangers=True, unsafe_no_sandbox=True).level == levels.NONE
    if ids.can_switch():  # root: the uid level, for strangers' work and one's own alike
        assert levels.choose(strangers=True).level == levels.UID
        assert levels.choose(strangers=False).level == levels.UID
        with pytest.raises(IsolationUnavailable, match="bubblewrap"):
            levels.choose(strangers=True, minimum=levels.BUBBLEWRAP)
    else:
        with pytest.raises(IsolationUnavailable, match="--unsafe-no-sandbox") as excinfo:
            levels.choose(strangers=True)
        assert why in str(excinfo.value) and "apt-get install bubblewrap" in str(excinfo.value)
        assert levels.choose(strangers=False).level == levels.NONE
        assert levels.choose(strangers=False).level == levels.NONE
        assert capsys.readouterr().err.count("without a sandbox") == 1  # said once


def test_policy_with_bubblewrap(fresh_probe: pytest.MonkeyPatch) -> None:
    found = isolation.probe(refresh=True)
    if not found.available:
        pytest.skip(found.reason)
    chosen = levels.choose(strangers=True)
    assert (chosen.level, chosen.isolation) == (levels.BUBBLEWRAP, found.isolation)
    assert levels.choose(strangers=True, unsafe_no_sandbox=True).level == levels.NONE
    assert chosen.own_uid == ids.can_switch()  # root never maps the sandbox to uid 0
    with Supervisor(sandbox=chosen) as sandboxed, Supervisor() as plain:
        assert (sandboxed.sandbox.level, plain.sandbox.level) == ("bubblewrap", "none")


@pytest.mark.skipif(not PROBE.available, reason=f"no bubblewrap: {PROBE.reason}")
def test_what_outlives_bwrap_is_ended(klass: tuple[Path, Path], token: str) -> None:
    """A ``bwrap`` ended in its first milliseconds (a grade aborted, its deadline, Ctrl-C)
    leaves its init blocked for good on a read nobody answers, before that init has asked to
    die with its parent: bubblewrap's own race (18 grades killed just after submitting 7 runs
    each left 5, each counting against its uid from then on). The run's reaper ends what of
    its descendants outlives bwrap. No test can hit the race on purpose: a bwrap that leaves
    a process behind stands in for it."""
    assert PROBE.isolation is not None
    real = PROBE.isolation
    folder = Path(tempfile.mkdtemp(prefix="gpushare-leaving-bwrap-"))
    try:
        folder.chmod(0o755)  # bwrap runs as the run's uid
        leaving = _script(
            folder / "bwrap", f'sleep 1000 </dev/null >/dev/null 2>&1 &\nexec {real.bwrap} "$@"\n'
        )
        box = isolation._new_isolation(str(leaving), modern=real.modern)  # as the probe's
        script = _script(klass[0] / "bin" / "ok.sh", "echo ok\n")
        with Supervisor(sandbox=Sandbox(levels.BUBBLEWRAP, box)) as supervisor:
            result = supervisor.run([str(script)], cwd=klass[0], env={MARKER: token})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert (result.returncode, result.stdout) == (0, "ok\n"), result
    assert _gone(token), "a process that outlived bwrap is still running"


_SUBREAPER = """
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: the grade's orphans come here
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
alive = []
for name in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{name}/stat").read()
    except OSError:
        continue
    state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
    if int(ppid) == os.getpid() and state not in "ZX":
        alive.append(stat[: stat.rfind(")") + 1])
print(alive)
time.sleep(0.2)
"""


@pytest.mark.skipif(not PROBE.available, reason=f"no bubblewrap: {PROBE.reason}")
@pytest.mark.parametrize(
    "args",
    [["--snapshot", "/nonexistent.gpushare.tgz"], ["--step", "1", "--kubeconfig", "/nonexistent"]],
    ids=["refused", "no-learner-code"],
)
def test_a_grade_leaves_no_trial_of_the_sandbox_running(args: list[str]) -> None:
    """A grade starts its trial of the sandbox first (probe_soon); one refused at once, or of
    steps that run no learner code, must still end it before it exits: what it left running
    would be re-parented to this test's subreaper. The trial is made slow (a bwrap that lingers
    a second after its sandbox ended), so a grade that does not wait for it is caught."""
    assert PROBE.isolation is not None
    folder = Path(tempfile.mkdtemp(prefix="gpushare-slow-bwrap-"))
    try:
        folder.chmod(0o755)  # the trial runs as the run's uid
        slow = folder / "bwrap"
        slow.write_text(f'#!/bin/sh\n{PROBE.isolation.bwrap} "$@"\ns=$?\nsleep 1\nexit $s\n')
        slow.chmod(0o755)
        gpushare = [sys.executable, "-m", "gpushare", "grade", "--workdir", str(folder), *args]
        found = subprocess.run(
            [sys.executable, "-c", _SUBREAPER, *gpushare],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, isolation.BWRAP_ENV: str(slow)},
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


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


def test_cost_of_a_sandboxed_run_is_small(sb: Sandbox, tmp_path: Path) -> None:
    """Generous bound (shared machine); measured about 10 ms more than unsandboxed."""
    with Supervisor(sandbox=sb) as supervisor:
        best = min(supervisor.run(["/bin/true"], cwd=tmp_path).duration for _ in range(5))
    assert best < 0.5
