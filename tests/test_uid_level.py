"""The red team's probes of the ``uid`` level (issue 30), as tests: each must be blocked at
every level that grades strangers (``bubblewrap``, and ``uid`` as root).

A learner's script, run by the real supervisor, tries what the attack did: leave SysV and
POSIX IPC objects for the next learner, plant setuid and setgid copies in every
world-writable folder it finds, fill the scratch folders, reach a listener on the host's
loopback (a lab's etcd is one: plain HTTP), and read the grader's files and other processes'
command lines. The test checks from outside (the host's IPC namespace, its folders, its
listeners) that nothing got through, and that nothing of a run is left for the next.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushare.sandbox import ids, isolation, levels
from gpushare.sandbox.levels import Sandbox
from gpushare.sandbox.supervisor import RunResult, Supervisor
from tests.test_isolation import LEVELS, PROBE, _gone
from tests.test_sandbox import MARKER, _marked, _script

ROOT = Path(__file__).resolve().parents[1]
_libc = ctypes.CDLL(None, use_errno=True)
_librt = ctypes.CDLL("librt.so.1", use_errno=True)
_libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
_libc.msgget.argtypes = [ctypes.c_int, ctypes.c_int]


@pytest.fixture(params=LEVELS)
def sb(request: pytest.FixtureRequest) -> Sandbox:
    if request.param == "bubblewrap":
        assert PROBE.isolation is not None
        return Sandbox(levels.BUBBLEWRAP, PROBE.isolation)
    return Sandbox(levels.UID)


@pytest.fixture
def token() -> Iterator[str]:
    token = uuid.uuid4().hex
    yield token
    for proc in _marked(token):
        with contextlib.suppress(Exception):
            proc.kill()


class Learner:
    """A learner's work dir whose ``bin/check-request.sh`` the test writes, run by one
    supervisor at the level under test."""

    def __init__(self, supervisor: Supervisor, work: Path, token: str) -> None:
        self.supervisor, self.work, self.token = supervisor, work, token

    def __call__(self, body: str, *, timeout: float = 20.0) -> RunResult:
        script = _script(self.work / "bin" / "check-request.sh", body, "#!/bin/bash")
        return self.supervisor.run(
            [str(script)], cwd=self.work, env={MARKER: self.token}, timeout=timeout
        )


@pytest.fixture
def learner(sb: Sandbox, tmp_path: Path, token: str) -> Iterator[Learner]:
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    with Supervisor(sandbox=sb) as supervisor:
        yield Learner(supervisor, work, token)
    assert _gone(token), "a process of the run outlived it"


# --- what a run leaves for the next -----------------------------------------------------

_IPC = """\
python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
rt = ctypes.CDLL("librt.so.1", use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
made = [libc.shmget(KEY, 1 << 20, 0o1666) >= 0, libc.msgget(KEY, 0o1666) >= 0,
        libc.semget(KEY, 1, 0o1666) >= 0, rt.mq_open(NAME, 0o102, 0o666, None) >= 0]
seen = [libc.shmget(KEY, 0, 0) >= 0, libc.msgget(KEY, 0) >= 0, rt.mq_open(NAME, 0) >= 0]
print("made", *map(int, made), "seen", *map(int, seen))
EOF
"""


def _host_has(key: int, name: bytes) -> list[str]:
    """What of the run's IPC objects the host's IPC namespace still holds."""
    left = []
    if _libc.shmget(key, 0, 0) >= 0:
        left.append("shm")
    if _libc.msgget(key, 0) >= 0:
        left.append("msg")
    if _libc.semget(key, 0, 0) >= 0:
        left.append("sem")
    fd = _librt.mq_open(name, os.O_RDONLY)
    if fd >= 0:
        os.close(fd)
        left.append("mqueue")
    return left


def test_ipc_objects_go_with_the_run(learner: Learner) -> None:
    """The attack left 5 SysV segments of 64 MiB (320 MiB held by no process), queues and
    POSIX queues that the next learner read. Each run's IPC namespace is its own: they are
    gone with it, the host never had them, the next run does not see them."""
    key = 0x6750_0000 | int(uuid.uuid4().hex[:4], 16)
    name = f"/gpushare-test-{uuid.uuid4().hex[:8]}".encode()
    body = _IPC.replace("KEY", str(key)).replace("NAME", repr(name))
    first = learner(body)
    assert first.stdout.split() == ["made", "1", "1", "1", "1", "seen", "1", "1", "1"], first
    assert _host_has(key, name) == []
    second = learner(body.replace("made = [", "made = [0,0,0,0] or ["))
    assert second.stdout.split()[-3:] == ["0", "0", "0"], second  # the next run sees none


def _world_writable_on_host() -> list[str]:
    """The host's world-writable folders (the attack's /tmp, /var/tmp, /dev/shm, /run/lock)."""
    found = subprocess.run(
        ["find", "/", "-xdev", "-maxdepth", "3", "-type", "d", "-perm", "-0002"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    found += [d for d in ("/dev/shm", "/run/lock", "/tmp", "/var/tmp") if os.path.isdir(d)]
    return sorted(set(found))


# --- where the uid level cannot be built ---------------------------------------------------


def _grade_without(cap: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """``gpushare grade`` of a stranger's snapshot by a root that lacks ``cap``, bubblewrap
    pointed nowhere."""
    return subprocess.run(
        [
            "capsh",
            f"--drop={cap}",
            "--",
            "-c",
            f"{sys.executable} -m gpushare grade --snapshot examples/reference.gpushare.tgz "
            f"--lang en {' '.join(extra)}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, isolation.BWRAP_ENV: "/nonexistent"},
    )


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("capsh"), reason="root and capsh")
def test_without_cap_sys_admin_strangers_work_is_refused_saying_why(tmp_path: Path) -> None:
    """A container's root without CAP_SYS_ADMIN and no bubblewrap: a uid of its own alone
    would leave the script the host's network, files and IPC. Refused as ``none`` is (exit 2,
    what the host lacks, how to get bubblewrap); ``--unsafe-no-sandbox`` is the way on, and
    the level used is recorded."""
    refused = _grade_without("cap_sys_admin")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    why = refused.stderr
    assert "refusing to run learners' scripts without a sandbox" in why, why
    assert "CAP_SYS_ADMIN" in why and "unshare" in why and "not found" in why, why
    assert "apt-get install bubblewrap" in why and "--unsafe-no-sandbox" in why, why
    out = tmp_path / "r.json"
    unsafe = _grade_without("cap_sys_admin", "--unsafe-no-sandbox", "--json", str(out))
    assert unsafe.returncode in (0, 1), unsafe.stdout + unsafe.stderr
    assert json.loads(out.read_text())["extra_data"]["isolation"] == "none"


# --- a class folder the grader does not own ---------------------------------------------------

_TEACHER = 61991  # outside the sandbox's range; no account of /etc/passwd


@pytest.mark.skipif(not ids.can_switch(), reason="root grading another user's folder")
def test_a_class_folder_root_cannot_protect_is_refused_not_graded(tmp_path: Path) -> None:
    """``sudo gpushare class grade ~teacher/subs`` without bubblewrap: the folder is the
    instructor's, 0755 as a umask makes it, so root will not change its mode, and every
    learner's snapshot and results would stay readable by the host's other users. Refused
    (exit 2, saying which folder and how to make it private), never graded in silence; once
    private, nothing is in the way."""
    top = Path(f"/tmp/gpushare-class-{uuid.uuid4().hex[:8]}")
    subs, out = top / "subs", top / "out"
    (subs / "alice").mkdir(parents=True)
    try:
        shutil.copy(ROOT / "examples" / "reference.gpushare.tgz", subs / "alice")
        for path in [top, subs, subs / "alice", *subs.rglob("*")]:
            os.chown(path, _TEACHER, _TEACHER)
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        argv = [sys.executable, "-m", "gpushare", "class", "grade", str(subs), "--out", str(out)]
        env = {**os.environ, isolation.BWRAP_ENV: "/nonexistent"}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"refusing to grade: {subs} (owner uid {_TEACHER})" in done.stderr, done.stderr
        assert f"chmod o-rwx {subs}" in done.stderr
        assert not out.exists()  # nothing graded
        assert levels.unprotectable([subs]) == [str(subs)]
        subs.chmod(0o750)
        assert levels.unprotectable([subs, top / "absent"]) == []
    finally:
        shutil.rmtree(top, ignore_errors=True)
