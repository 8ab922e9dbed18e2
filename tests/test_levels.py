"""Issue 17's proof: at each isolation level, as a root grader and as a non-root one, a learner's
script tries every escape at once (tests/data/levels/hostile.py) and every attempt fails.

It opens every file under /proc/sys (and those /sys calls writable) to write, looks for a key
planted in the grader's keyrings, reads and writes the graders, the policy, the results folder
and another submission (placed where any uid could read them, as a checkout or /autograder
has them), reads the grader's environment and home, leaves a ``setsid`` daemon and tries to
hold 4 GB. Then the same supervisor runs the next script normally: grading goes on.
The non-root grader is a real unprivileged uid: a child ``python3`` that drops to it first.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushare.sandbox import ids, isolation, levels, runtime
from gpushare.sandbox.levels import Sandbox
from gpushare.sandbox.supervisor import Supervisor
from tests.test_isolation import LEVELS, PROBE, _gone
from tests.test_sandbox import MARKER, _marked

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "data" / "levels" / "hostile.py"
NONROOT_UID = 61990  # outside the sandbox's range; no account of /etc/passwd
pytestmark = pytest.mark.skipif(os.uname().machine != "x86_64", reason="keyctl numbers: x86_64")


def _add_key(description: str, value: str, ring: int) -> bool:
    """add_key(2) into ``ring`` (-3 session, -4 user): the grader's secret to look for."""
    libc = ctypes.CDLL(None, use_errno=True)
    data = value.encode()
    return libc.syscall(248, b"user", description.encode(), data, len(data), ring) > 0


class Area:
    """The grader's places, readable by any uid unless the level protects them: Gradescope's
    layout (source/graders, source/policy.toml, results, submission) and another learner's
    snapshot beside alice's work dir."""

    def __init__(self, top: Path, owner: int) -> None:
        self.top, self.tag = top, uuid.uuid4().hex[:8]
        self.work = top / "work"
        files = {
            top / "source" / "graders" / "test_step6.py": "HIDDEN-CASES\n",
            top / "source" / "policy.toml": "[default]\nvisibility = 'visible'\n",
            top / "results" / "results.json": '{"score": 0}\n',
            top / "submission" / "alice.gpushare.tgz": "ALICE\n",
            top / "subs" / "bob" / "bob.gpushare.tgz": "BOB-SECRET\n",
        }
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.contents = {str(p): t for p, t in files.items()}
        script = self.work / "bin" / "check-request.sh"
        script.parent.mkdir(parents=True)
        shutil.copy(HOSTILE, script)
        script.chmod(0o744)  # `chmod u+x`, as learners do: other uids may not execute it
        for directory, dirs, names in os.walk(top):
            for name in [*dirs, *names, "."]:
                path = os.path.join(directory, name)
                os.chown(path, owner, owner)
                if name != "check-request.sh":
                    os.chmod(path, 0o755 if os.path.isdir(path) else 0o644)
        self.protected = [top / "source", top / "results", top / "submission", top / "subs"]

    def targets(self, grader_pid: int, home_file: str) -> dict[str, object]:
        return {
            "key": f"gpushare-test-{self.tag}",
            "key_value": f"KEY-{self.tag}",
            "files": sorted(self.contents),
            "folders": [str(p.parent) for p in map(Path, sorted(self.contents))],
            "env_value": f"ENV-{self.tag}"[::-1],  # the script looks for it reversed back
            "grader_pid": grader_pid,
            "home_file": home_file,
            "home_value": f"HOME-{self.tag}",
        }

    def unchanged(self) -> None:
        for path, text in self.contents.items():
            assert Path(path).read_text() == text, path
            assert not (Path(path).parent / "pwned.txt").exists()


def _judge(out: str) -> dict[str, object]:
    """The script's report: nothing escaped, and every kind of attempt was made."""
    report = json.loads(out.strip().splitlines()[-1])
    assert report["escapes"] == [], report["escapes"]
    tried = report["tried"]
    assert tried["kernel"] > 100 and tried["files"] >= 20 and tried["env"] >= 3, tried
    assert tried["keyring"] >= 4 and tried["home"] == 1 and tried["process"] == 1, tried
    assert report["memory"] < 4 * 10**9
    return report


@pytest.fixture
def area() -> Iterator[Area]:
    top = Path(f"/tmp/gpushare-levels-{uuid.uuid4().hex[:8]}")
    top.mkdir(mode=0o755)
    os.chmod(top, 0o755)
    try:
        yield Area(top, os.getuid())
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def sb(request: pytest.FixtureRequest) -> Sandbox:
    if request.param == "bubblewrap":
        assert PROBE.isolation is not None
        return Sandbox(levels.BUBBLEWRAP, PROBE.isolation)
    return Sandbox(levels.UID)


@pytest.mark.skipif(os.geteuid() != 0, reason="the root grader's case")
@pytest.mark.parametrize("sb", LEVELS, indirect=True)
def test_every_escape_fails_as_a_root_grader(
    sb: Sandbox, area: Area, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = uuid.uuid4().hex
    home_file = Path.home() / f".gpushare-levels-{area.tag}"
    targets = area.targets(os.getpid(), str(home_file))
    home_file.write_text(f"{targets['home_value']}\n")
    home_file.chmod(0o644)
    keyed = _add_key(str(targets["key"]), str(targets["key_value"]), -3)
    keyed = _add_key(str(targets["key"]), str(targets["key_value"]), -4) and keyed
    monkeypatch.setenv("GPUSHARE_TEST_SECRET", str(targets["env_value"])[::-1])
    if sb.level == levels.UID:  # what gradescope run and a class worker protect
        levels.protect(area.protected)
    env = {MARKER: token, "HOSTILE_TARGETS": json.dumps(targets)}
    try:
        with Supervisor(sandbox=sb) as supervisor:
            result = supervisor.run(
                [str(area.work / "bin" / "check-request.sh")], cwd=area.work, env=env, timeout=60
            )
            after = supervisor.run(["/bin/echo", "fine"], cwd=area.work)  # grading goes on
    finally:
        home_file.unlink()
        for proc in _marked(token):
            proc.kill()
    assert result.isolation == sb.level and not result.timed_out, result
    assert keyed, "no key could be planted"
    _judge(result.stdout)
    assert after.stdout == "fine\n"
    assert _gone(token), "a process of the run outlived it"
    area.unchanged()


_DRIVER = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import ctypes
from gpushare.sandbox import levels, supervisor
targets = json.loads(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
for ring in (-3, -4):
    value = targets["key_value"].encode()
    assert libc.syscall(248, b"user", targets["key"].encode(), value, len(value), ring) > 0
try:
    refused = levels.choose(strangers=True).level if os.environ.get("NO_BWRAP") else None
except levels.IsolationUnavailable as exc:
    refused = str(exc)
if os.environ.get("NO_BWRAP"):
    print(json.dumps({"refused": refused}))
    raise SystemExit(0)
sb = levels.choose(strangers=True)
work = Path(sys.argv[2])
env = {"HOSTILE_TARGETS": json.dumps({**targets, "grader_pid": os.getpid()}), "M": sys.argv[4]}
with supervisor.Supervisor(sandbox=sb) as s:
    r = s.run([str(work / "bin" / "check-request.sh")], cwd=work, env=env, timeout=60)
    nxt = s.run(["/bin/echo", "fine"], cwd=work)
print(json.dumps({"level": r.isolation, "out": r.stdout, "err": r.stderr[-3000:],
                  "rc": r.returncode, "next": nxt.stdout, "uid": os.getuid()}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become an unprivileged grader")
@pytest.mark.skipif(not PROBE.available, reason=f"no bubblewrap: {PROBE.reason}")
def test_every_escape_fails_as_a_non_root_grader(tmp_path: Path) -> None:
    """A real unprivileged grader (uid 61990, Debian's python3): bubblewrap in a user
    namespace of its own; the uid level is impossible, so without bwrap strangers' work is
    refused."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    check = subprocess.run([python or "/nonexistent", "-c", "import yaml"], capture_output=True)
    if python is None or check.returncode != 0:
        pytest.skip("no system python3 with PyYAML for the unprivileged grader")
    top = Path(f"/tmp/gpushare-levels-{uuid.uuid4().hex[:8]}")
    top.mkdir(mode=0o755)
    try:
        area = Area(top, NONROOT_UID)
        pkg, home = top / "pkg", top / "home"
        shutil.copytree(ROOT / "src" / "gpushare", pkg / "gpushare")
        home.mkdir(mode=0o700)
        home_file = home / "secret.txt"
        targets = area.targets(0, str(home_file))
        home_file.write_text(f"{targets['home_value']}\n")
        for path in [pkg, home, *pkg.rglob("*"), *home.rglob("*")]:
            os.chown(path, NONROOT_UID, NONROOT_UID)
        token = uuid.uuid4().hex
        env = {
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "GPUSHARE_TEST_SECRET": str(targets["env_value"])[::-1],
            "LANG": "C.UTF-8",
        }

        def drop() -> None:
            os.setgroups([])
            os.setresgid(NONROOT_UID, NONROOT_UID, NONROOT_UID)
            os.setresuid(NONROOT_UID, NONROOT_UID, NONROOT_UID)

        argv = [python, "-c", _DRIVER, str(pkg), str(area.work), json.dumps(targets), token]
        done = subprocess.run(
            argv, env=env, preexec_fn=drop, capture_output=True, text=True, timeout=300, cwd=home
        )
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.splitlines()[-1])
        assert report["uid"] == NONROOT_UID and report["level"] == "bubblewrap", report
        _judge(report["out"])
        assert report["next"] == "fine\n"
        area.unchanged()
        refused = subprocess.run(
            argv,
            env={**env, "NO_BWRAP": "1", isolation.BWRAP_ENV: "/nonexistent"},
            preexec_fn=drop,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=home,
        )
        why = json.loads(refused.stdout.splitlines()[-1])["refused"]
        assert "refusing to run learners' scripts without a sandbox" in why, refused
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert not [p for p in _marked(token)], "a process of the run outlived it"


@pytest.mark.skipif(not ids.can_switch(), reason="the run uids need root")
def test_a_grades_gid_is_never_a_later_grades(monkeypatch: pytest.MonkeyPatch) -> None:
    """One slot serves grade after grade (a class worker's), its gid never: a file one grade
    left with its gid (a setgid copy, a staged folder) opens nothing of a later grade's."""
    monkeypatch.setenv(ids.RANGE_ENV, "61120-61128")
    seen = []
    for _ in range(3):
        slot = ids.allocate()
        try:
            assert slot.first == 61120
            seen.append(slot.gid)
        finally:
            slot.close()
    assert len(set(seen)) == 3 and all(ids.GIDS[0] <= gid < ids.GIDS[1] for gid in seen), seen
    assert not any(gid in range(*ids.uid_range()) for gid in seen)


def test_the_run_uids_are_never_the_graders() -> None:
    lo, hi = ids.uid_range()
    assert 1000 <= lo < hi and os.getuid() not in range(lo, hi + 1)
    if ids.can_switch():
        first, second = ids.allocate(), ids.allocate()
        try:
            assert first.gid != second.gid  # two grades at once never share a uid
            assert first.take() != first.take()
        finally:
            first.close()
            second.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


# --- the level in every output -------------------------------------------------------------------


def _report(level: str | None) -> object:
    from gpushare.reports import results

    check = results.CheckResult(
        number="6.1",
        step=6,
        title="t",
        max_score=2,
        score=2,
        passed=True,
        output="",
        error=None,
        nodeid="graders/test_step6.py::test_6_1",
    )
    return results.Report(
        checks=[check],
        execution_time=0.1,
        lang="en",
        seed=1,
        workdir="/w",
        server=None,
        isolation=level,
    )


@pytest.mark.parametrize("level", ["bubblewrap", "uid", "none"])
def test_results_json_junit_and_terminal_name_the_level(level: str, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from gpushare.reports import junit, terminal

    report = _report(level)
    assert report.as_json()["extra_data"]["isolation"] == level  # type: ignore[attr-defined]
    path = tmp_path / "junit.xml"
    node = "graders/test_step6.py::test_6_1"
    junit.write(report, path, classnames={node: "c"}, durations={}, headline={})  # type: ignore[arg-type]
    props = {p.get("name"): p.get("value") for p in ET.parse(path).iter("property")}
    assert props["isolation"] == level
    assert f"isolation={level}" in terminal.render(report, color=False)  # type: ignore[arg-type]


def test_class_report_has_a_column_and_a_banner(tmp_path: Path) -> None:
    from gpushare.classroom import gradebook, report

    rows = [
        gradebook.Row(
            learner=name,
            snapshot=f"{name}.gpushare.tgz",
            status="passed",
            score=2,
            max_score=2,
            reason="",
            seed=1,
            folder=name,
            lang="en",
            isolation=level,
        )
        for name, level in (("alice", "uid"), ("bob", "none"))
    ]
    checks = [gradebook.CheckInfo(number="6.1", step=6, max_score=2)]
    html = report.render(rows, checks, "en", seed=1)
    assert "Learners&#x27; scripts ran at isolation level: none (1), uid (1)" in html
    warning = "Warning: in 1 of the submissions, the learners&#x27; scripts ran without isolation"
    assert warning in html
    assert "<th>Isolation</th>" in html and "<td>uid</td>" in html


def test_protect_takes_others_bits_off_what_another_uid_could_reach() -> None:
    top = Path(f"/tmp/gpushare-protect-{uuid.uuid4().hex[:8]}")
    (top / "graders").mkdir(parents=True)
    try:
        os.chmod(top, 0o755)
        os.chmod(top / "graders", 0o755)
        assert levels.protect([top / "graders", top / "results" / "results.json"]) == [
            str(top / "graders"),
            str(top),  # a file still to be written: its folder
        ]
        assert (top / "graders").stat().st_mode & 0o777 == 0o750
        assert levels.protect([top / "graders"]) == []  # unreachable now: nothing to do
        assert levels.protect(["/tmp", "/usr"]) == []  # never system folders
    finally:
        shutil.rmtree(top)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("capsh"), reason="root and capsh")
def test_a_root_that_cannot_switch_uid_refuses_strangers_work() -> None:
    """A container's root without CAP_SETUID: bwrap would map the sandbox to host root, so a
    snapshot's grade is refused (exit 2, saying which capabilities to give)."""
    done = subprocess.run(
        [
            "capsh",
            "--drop=cap_setuid",
            "--",
            "-c",
            f"{sys.executable} -m gpushare grade --snapshot examples/reference.gpushare.tgz",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "CAP_SETUID" in done.stderr and "refusing" in done.stderr


def test_the_scripts_python3_finds_yaml_without_site_packages(tmp_path):
    """Debian's python3 never puts a copied ``site-packages`` on ``sys.path`` (its site.py reads
    dist-packages), so PyYAML sits beside the standard library: ``-S`` (no site at all) shows
    that ``import yaml`` does not depend on site.py."""
    found = runtime.find(str(tmp_path))
    proc = subprocess.run(
        [f"{found.bin}/python3", "-S", "-I", "-c", "import sys, yaml; print(yaml.__version__)"],
        capture_output=True,
        text=True,
        env={**dict(found.env), "PATH": os.environ.get("PATH", "")},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == found.pyyaml_version
    assert not list(tmp_path.glob("*/lib/python3*/site-packages"))


@pytest.mark.skipif(not ids.can_switch(), reason="the uid level needs root with CAP_SETUID")
def test_a_killed_grades_staged_copies_go_with_the_next_grade_of_its_slot(tmp_path, monkeypatch):
    """A grade killed mid-run (a class worker past its deadline) leaves its staging folder:
    copies of the learner's work dir, readable by that grade's gid. The next grade with that
    slot removes it first. A uid range of the test's own makes its one slot the slot."""
    monkeypatch.setenv(ids.RANGE_ENV, "61100-61108")
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    (work / "answer.txt").write_text("one learner's work\n")
    killed = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from gpushare.sandbox import levels, supervisor\n"
        "s = supervisor.Supervisor(sandbox=levels.Sandbox(levels.UID))\n"
        "s.submit(['/bin/sleep', '5'], cwd=Path(sys.argv[1]), timeout=10, output_cap=1024)\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", killed, str(work)], timeout=60, check=False)
    left = list(Path("/tmp").glob("gpushare-stage-61100-*"))
    assert left, "the killed grade left no staging folder: nothing to test"
    assert any(any(p.glob("work-*/answer.txt")) for p in left)
    with Supervisor(sandbox=Sandbox(levels.UID)) as supervisor:
        result = supervisor.run(["/bin/true"], cwd=work)
    assert result.returncode == 0, result
    assert not [p for p in left if p.exists()]


def test_every_virtualenv_of_one_interpreter_shares_one_copy(tmp_path):
    """Two virtualenvs of this interpreter, each with its own PyYAML (as every CI clone and
    worktree has): one copy of the runtime serves both, and a PyYAML that differs gets its own."""
    import yaml

    source = Path(yaml.__file__).parent
    base = tmp_path / "runtimes"
    homes = []
    for name in ("a", "b"):
        venv = tmp_path / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next(venv.glob("lib/python3*/site-packages"))
        shutil.copytree(source, site / "yaml")
        code = (
            "import sys; from gpushare.sandbox import runtime; "
            "print(runtime.find(sys.argv[1]).home)"
        )
        env = {**os.environ, "PYTHONPATH": str(Path(runtime.__file__).parents[2])}
        found = subprocess.run(
            [str(venv / "bin/python"), "-c", code, str(base)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        homes.append(found.stdout.strip())
    assert homes[0] == homes[1], homes
    assert [p.name for p in base.iterdir()] == [Path(homes[0]).name]
    exe, stdlib = os.path.realpath(sys.executable), os.path.realpath(Path(os.__file__).parent)
    version = ".".join(str(n) for n in sys.version_info[:3])
    a_yaml, b_yaml = (
        str(next((tmp_path / n).glob("lib/python3*/site-packages/yaml"))) for n in "ab"
    )
    assert runtime.key(exe, stdlib, version, [a_yaml]) == Path(homes[0]).name
    assert runtime.key(exe, stdlib, version, [b_yaml]) == Path(homes[0]).name
    with open(Path(b_yaml, "__init__.py"), "a", encoding="utf-8") as fh:
        fh.write("# another PyYAML\n")
    assert runtime.key(exe, stdlib, version, [b_yaml]) != Path(homes[0]).name


def test_prune_removes_the_copies_no_grade_uses(tmp_path):
    """Gone: a copy whose interpreter was deleted, one of the older layout made over a day
    ago, one left half-made by a dead grader. Kept: the others, which a grade may be using."""

    def copy(name: str, source: str | None = None, age_s: float = 0) -> Path:
        folder = tmp_path / name
        (folder / "bin").mkdir(parents=True)
        if source is not None:
            (folder / "source").write_text(source + "\n")
        if age_s:
            then = time.time() - age_s
            os.utime(folder, (then, then))
        return folder

    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    removed = [
        copy("3.11.7-0000000a", "/nonexistent/venv/bin/python3"),
        copy("3.11.7-0000000b", age_s=2 * 86400),
        copy(f"3.11.7-0000000c.{dead}.tmp"),
    ]
    kept = [
        copy("3.11.7-0000000d", os.path.realpath(sys.executable)),
        copy("3.11.7-0000000e", age_s=3600),
        copy(f"3.11.7-0000000f.{os.getpid()}.tmp"),
    ]
    assert sorted(runtime.prune(str(tmp_path))) == sorted(str(p) for p in removed)
    assert sorted(tmp_path.iterdir()) == sorted(kept)
    assert runtime.prune(str(tmp_path / "absent")) == []


@pytest.mark.skipif(not PROBE.available, reason=f"no bubblewrap: {PROBE.reason}")
def test_a_runtime_under_tmp_is_not_hidden_by_the_sandboxs_tmp():
    """In the grading pod the grader's cache (HOME=/tmp) holds the runtime: the sandbox's own
    ``/tmp`` tmpfs must not cover it, or ``python3`` is the system's, without PyYAML."""
    bwrap = isolation.find_bwrap()
    assert bwrap is not None
    base = tempfile.mkdtemp(prefix="gpushare-runtime-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        found = runtime.find(base)
        box = isolation.Isolation(bwrap, found)
        argv = ["python3", "-c", "import sys, yaml; print(sys.executable)"]
        proc = subprocess.run(
            box.command(argv, cwd=None),
            env=isolation.environment(found, None, isolation.SCRATCH),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().startswith(found.home), proc.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)
