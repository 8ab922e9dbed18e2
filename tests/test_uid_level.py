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
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from gpushare.lab import binaries
from gpushare.sandbox import ids, isolation, levels, view
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


_KEY = """\
python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if "PLANT" == "PLANT":
    key = libc.syscall(248, b"user", b"NAME", b"LEFT-FOR-THE-NEXT", 17, -4)  # add_key into @u
    libc.syscall(250, 5, key, 0x3F3F3F3F)  # KEYCTL_SETPERM: anyone of the uid reads it
found = libc.syscall(250, 10, -4, b"user", b"NAME", 0)  # KEYCTL_SEARCH of @u
print(os.getuid(), "found" if found > 0 else "none")
EOF
"""


def test_a_key_in_the_uids_own_keyring_is_gone_for_the_next_grade(
    sb: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    """The user keyring belongs to a uid, not to a run, and the host keeps it for good: a
    key one grade's run put there would be found by the next grade whose run has that uid
    (one slot of a range of the test's own: the same uid twice)."""
    monkeypatch.setenv(ids.RANGE_ENV, "61140-61148")
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    name = f"gpushare-test-{uuid.uuid4().hex[:8]}"
    seen = []
    for body in (_KEY, _KEY.replace('"PLANT" == "PLANT"', "False")):
        with Supervisor(sandbox=sb) as supervisor:
            seen.append(Learner(supervisor, work, token)(body.replace("NAME", name)).stdout)
    assert seen == ["61141 found\n", "61141 none\n"], seen


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


_PLANT = """\
tag=TAG
dirs=$(find / -path /proc -prune -o -type d -perm -0002 -print 2>/dev/null)
echo "dirs: $(echo $dirs | tr '\\n' ' ')"
for d in $dirs; do
  for bits in 4755 2755; do
    cp /usr/bin/id "$d/plant-$bits-$tag" 2>/dev/null && chmod $bits "$d/plant-$bits-$tag" &&
      echo "planted $d/plant-$bits-$tag $("$d/plant-$bits-$tag" -u)"
  done
done
grep NoNewPrivs /proc/self/status
"""


def test_setuid_and_setgid_plants_do_nothing_and_do_not_last(learner: Learner) -> None:
    """The attack copied ``kill``, ``find`` and ``cat`` into ``/run/lock`` with ``chmod 4755``
    or ``2755``: a later grade's script then ran as the planter's uid or the slot's gid. Here
    a script plants in every world-writable folder it can find; the runs set ``no_new_privs``,
    the folders are its own (``nosuid`` tmpfs), and neither the host nor the next run has
    the plants."""
    tag = uuid.uuid4().hex[:8]
    first = learner(_PLANT.replace("TAG", tag))
    dirs = first.stdout.splitlines()[0].split()[1:]
    planted = [line.split() for line in first.stdout.splitlines() if line.startswith("planted")]
    assert "/tmp" in dirs and planted, first
    assert first.stdout.splitlines()[-1].split() == ["NoNewPrivs:", "1"], first
    mounts = learner("cat /proc/self/mountinfo\n").stdout.splitlines()
    for d in dirs:  # each writable folder is a mount of its own, nosuid and nodev
        options = [line.split()[5] for line in mounts if line.split()[4] == d]
        assert options and {"nosuid", "nodev"} <= set(options[-1].split(",")), (d, options)
    later = learner(f"find / -path /proc -prune -o -name 'plant-*-{tag}' -print 2>/dev/null\n")
    assert later.stdout == "", later  # a later run finds none of them
    on_host = [
        os.path.join(d, name)
        for d in _world_writable_on_host()
        for name in (os.listdir(d) if os.access(d, os.R_OK) else [])
        if name.endswith(tag)
    ]
    assert on_host == []


@pytest.mark.parametrize("where", ["/tmp", "/var/tmp", "/dev/shm", "/run/lock"])
def test_a_flood_of_any_scratch_folder_stops_at_its_cap(learner: Learner, where: str) -> None:
    """The attack wrote 4.8 GiB into the host's /var/tmp and /dev/shm in one 5.7 s grade.
    Every folder a script may write is a tmpfs of its own, capped: a 200 MB write fails (or
    the folder is not there at all), and nothing of it reaches the host."""
    tag = uuid.uuid4().hex[:8]
    result = learner(
        f"head -c 200000000 /dev/zero > {where}/flood-{tag}; echo $?\n"
        f"du -m {where}/flood-{tag} 2>/dev/null | cut -f1\n"
    )
    status, *size = result.stdout.split()
    assert status != "0", result
    assert not size or int(size[0]) <= view.SCRATCH_BYTES // (1024 * 1024), result
    assert not os.path.exists(f"{where}/flood-{tag}")


# --- what it can reach ----------------------------------------------------------------------


class _Canary(http.server.BaseHTTPRequestHandler):
    """A lab's etcd as the attack found it: plain HTTP on loopback, no auth."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ETCD-CANARY")

    do_POST = do_GET

    def log_message(self, *_args: object) -> None:
        return


def test_no_loopback_http_and_no_abstract_socket_of_the_host(learner: Learner) -> None:
    """The attack read and wrote a lab's etcd on 127.0.0.1 through its JSON gateway. Here an
    HTTP server on the host's loopback and a listener on an abstract unix socket (scoped by
    network namespace) see no one."""
    _Canary.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Canary)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    name = f"gpushare-test-{uuid.uuid4().hex[:8]}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + name)
    abstract.listen(4)
    port = server.server_address[1]
    try:
        result = learner(
            "python3 - <<'EOF'\n"
            "import socket, urllib.request\n"
            "for host in ['127.0.0.1', 'localhost']:\n"
            "    url = 'http://%s:PORT/v3/kv/range' % host\n"
            "    try:\n"
            "        print('read', urllib.request.urlopen(url, b'{}', timeout=2).read())\n"
            "    except OSError as exc:\n"
            "        print('refused', type(exc).__name__)\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            "    s.connect('\\0NAME'); print('read abstract')\n"
            "except OSError as exc:\n"
            "    print('refused', type(exc).__name__)\n"
            "EOF\n"
            "echo hello >/dev/tcp/127.0.0.1/PORT && echo bash-connected\n"
            "echo end\n".replace("PORT", str(port)).replace("NAME", name)
        )
        abstract.setblocking(False)
        with pytest.raises(BlockingIOError):
            abstract.accept()  # nobody connected
    finally:
        server.shutdown()
        server.server_close()
        abstract.close()
    assert _Canary.seen == [], _Canary.seen
    assert "CANARY" not in result.stdout and "read" not in result.stdout, result
    assert "bash-connected" not in result.stdout and result.stdout.endswith("end\n"), result


@pytest.fixture
def canaries() -> Iterator[dict[str, Path]]:
    """World-readable secrets (0644) where the attack read them: root's home, the checkout,
    gpushare's cache (a lab's kubeconfig), /etc."""
    tag = uuid.uuid4().hex[:8]
    paths = {
        "home": Path.home() / f".gpushare-canary-{tag}",
        "checkout": ROOT / f".gpushare-canary-{tag}",
        "cache": binaries.cache_dir() / f"canary-{tag}" / "kubeconfig.yaml",
        "etc": Path(f"/etc/gpushare-canary-{tag}"),
    }
    try:
        for name, path in paths.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"CANARY-{name.upper()}-{tag}\n")
            path.chmod(0o644)
        yield paths
    finally:
        for path in paths.values():
            path.unlink(missing_ok=True)
        shutil.rmtree(paths["cache"].parent, ignore_errors=True)


def test_reads_no_host_file_and_no_other_process(
    learner: Learner, canaries: dict[str, Path]
) -> None:
    """The attack read ``/etc/rt-world``, another user's ``~/.profile`` and the command line
    of every process. The script reads only the runtime and its staged work: every canary is
    out of its reach, and so is a process of the host that carries one in its command line."""
    tag = uuid.uuid4().hex[:8]
    witness = subprocess.Popen(["sleep", "60", f"gpushare-cmdline-canary-{tag}"])
    try:
        result = learner(
            "hostname\n"
            + 'for f in "$@"; do cat "$f"; done 2>/dev/null\n'.replace(
                '"$@"', " ".join(map(str, canaries.values()))
            )
            + f"ls {Path.home()} {ROOT} 2>&1 | head -3\n"
            + "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '\n"
            + "echo; ls /proc | grep -c '^[0-9]'\n"
            + "echo end\n"
        )
    finally:
        witness.kill()
        witness.wait()
    assert "CANARY" not in result.stdout.replace("grep", ""), result
    assert f"cmdline-canary-{tag}" not in result.stdout, result
    assert int(result.stdout.split()[-2]) < 10, result  # its own init, bash, cat...
    assert result.stdout.endswith("end\n"), result
    assert result.stdout.splitlines()[0] == "sandbox", result  # not the host's name


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
