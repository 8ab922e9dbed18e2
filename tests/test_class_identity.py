"""Whose a submission is, and what is suspicious about it (issue 18, items 1 and 2).

Snapshots are made with the product's own code (:mod:`gpushare.submissions.snapshot`) from the
recorded ones in ``tests/recorded/``: honest learners get a cluster identity of their own, as
their own labs would give them; hostile ones are edited the way an attacker would, hashes
recomputed. No lab is needed.

The class of 30 (:func:`class30`) is graded once, by ``gpushare class grade`` as a subprocess
under a wrapper that reads its peak RSS and that of every process below it; each test function
checks one kind of hostile input. Those that need issue 18's items 3-5 (bounded parsing, shape
validation, clean output: branch h18a) say so in their docstring.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from gpushare.classroom import flags, gradebook, identity, inputs
from gpushare.reports import clean
from gpushare.sandbox import isolation
from gpushare.submissions import snapshot
from tests.helpers import ROOT, discovered_checks

RECORDED = ROOT / "tests" / "recorded"
INDEX = json.loads((RECORDED / "index.json").read_text())
UNSAFE = [] if isolation.probe().available else ["--unsafe-no-sandbox"]
GIB = 1024**3
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def _learner_of(folder: str) -> str:
    """The learner a folder name stands for (identity.folder_name undone; a name cut for length
    keeps its first part): the folder names are reversible."""
    return "" if folder == "%" else unquote(folder, errors="surrogatepass")


def stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


HONEST_TIME = stamp(NOW - dt.timedelta(days=2))
DEADLINE = stamp(NOW - dt.timedelta(days=1))
AFTER_DEADLINE = stamp(NOW - dt.timedelta(hours=1))


# --------------------------------------------------------------------------- making snapshots


def forge(
    base: str,
    dest: Path,
    *,
    learner: str,
    uid: str | None = None,
    captured_at: str = HONEST_TIME,
    salt: str | None = None,
    manifest: Callable[[dict[str, Any]], None] | None = None,
    cluster: Callable[[dict[str, Any]], None] | None = None,
    work: Callable[[Path], None] | None = None,
) -> Path:
    """A snapshot from the recorded ``base``, written by :func:`snapshot.write` to ``dest``:
    ``learner`` in its manifest, a cluster identity ``uid`` (a fresh one when None: a lab of
    its own), content made distinct by ``salt`` (a notes.txt), then edited as given."""
    with tempfile.TemporaryDirectory(prefix="gpushare-forge-") as tmp:
        snap = snapshot.load(RECORDED / f"{base}.gpushare.tgz", Path(tmp) / "scratch")
        if salt is not None:
            (snap.work_root / "notes.txt").write_text(f"{salt}\n")
        if work is not None:
            work(snap.work_root)
        answers = json.loads(json.dumps(snap.cluster))
        if cluster is not None:
            cluster(answers)
        who = dict(snap.manifest["cluster"], uid=uid or str(uuid.uuid4()))
        captured = snapshot.build(
            learner=learner,
            cluster=answers,
            identity=who,
            workdir=snap.work_root,
            runtime=snap.manifest["runtime"],
        )
        captured.manifest["captured_at"] = captured_at
        if manifest is not None:
            manifest(captured.manifest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        return snapshot.write(captured, dest)


def rewrite(path: Path, *, replace: dict[str, bytes]) -> Path:
    """Edit a snapshot's members as an attacker would and recompute every hash with the
    product's own functions."""
    members: list[tuple[tarfile.TarInfo, bytes]] = []
    with tarfile.open(path, "r:gz") as tar:
        for ti in tar:
            fh = tar.extractfile(ti) if ti.isreg() else None
            data = fh.read() if fh else b""
            members.append((ti, replace.get(ti.name, data)))
    digests = {}
    for ti, data in members[1:]:
        ti.size = len(data)
        if ti.name == "cluster.json":
            digests[ti.name] = hashlib.sha256(data).hexdigest()
        else:
            digests[ti.name] = snapshot._member_digest(ti, data)
    manifest = json.loads(members[0][1])
    manifest.update(members=digests, sha256=snapshot._whole(digests))
    raw = json.dumps(manifest, indent=1, sort_keys=True).encode()
    members[0][0].size = len(raw)
    members[0] = (members[0][0], raw)
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for ti, data in members:
            tar.addfile(ti, io.BytesIO(data) if ti.isreg() else None)
    return path


def long_name_bomb(path: Path, size: int) -> Path:
    """Append to a valid snapshot a member whose GNU long-name header holds ``size`` bytes of
    name: a few MB of gzip that ask whoever reads the header whole for ``size`` bytes."""
    with tarfile.open(path, "r:gz") as tar:
        end = max(ti.offset_data + ti.size for ti in tar)  # archive without its end blocks
    head = tarfile.TarInfo("././@LongLink")
    head.type, head.size = tarfile.GNUTYPE_LONGNAME, size
    member = tarfile.TarInfo("work/short")
    gz = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b"n" * (1 << 20)
    with tarfile.open(path, "r:gz") as tar, open(path.with_suffix(".tmp"), "wb") as out:
        raw = tar.fileobj
        raw.seek(0)
        body = raw.read(end + (-end % tarfile.BLOCKSIZE))
        out.write(gz.compress(body + head.tobuf(tarfile.GNU_FORMAT)))
        left = size
        while left:
            out.write(gz.compress(chunk[: min(left, len(chunk))]))
            left -= min(left, len(chunk))
        pad = -size % tarfile.BLOCKSIZE
        out.write(gz.compress(b"\0" * pad + member.tobuf(tarfile.GNU_FORMAT) + b"\0" * 1024))
        out.write(gz.flush())
    path.with_suffix(".tmp").replace(path)
    return path


YAML_BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
    "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
    "apiVersion: v1\nkind: Pod\nmetadata: {name: team-over, namespace: team-a, x: *i}\n"
)
ESCAPES = "\x1b]52;c;SGVsbG8=\x07\x1b]0;pwned\x07\x1b[1A\x1b[2K"
LONG_ID = "l" * 150 + "長" * 150  # 300 characters, 600 bytes
ALICE_UID = str(uuid.UUID(int=1))
TWIN_UID = str(uuid.UUID(int=2))


def _dry_run_wrong_type(answers: dict[str, Any]) -> None:
    key = next(k for k in answers if k.startswith("dry-run:"))
    answers[key]["answer"] = "a string where an object is read"


def _cluster_as_list(manifest: dict[str, Any]) -> None:
    manifest["cluster"] = ["uid", "bd2492b3"]


def _recorded_as_list(manifest: dict[str, Any]) -> None:
    manifest["recorded"] = ["work/k8s"]
    manifest["runtime"] = ["python3"]


def _bomb_team_over(wd: Path) -> None:
    (wd / "k8s" / "team-over.yaml").write_text(YAML_BOMB)


# Honest learners: (folder or None for a flat file, manifest learner, recorded base).
HONEST = {
    "alice": ("alice", "alice", "reference"),
    "张三": ("张三", "张三", "1-2-file-drifted-from-the-cluster-replicas-2-in-the-file"),
    "李四": ("李四", "李四", "2-1-lab-node-0-label-missing"),
    "zhang san": ("zhang san", "zhang san", "3-1-mig-strategy-single"),
    "zhang_san": ("zhang_san", "zhang_san", "4-4-plain-gpu-never-scheduled-gpu-nodes-cordoned"),
    "class.json": ("class.json", "class.json", "7-3-mps-memory-isolation-taken-for-full"),
    "grades.csv": ("grades.csv", "grades.csv", "8-3-placement-txt-misses-a-pod"),
    "report.html": ("report.html", "report.html", "1-6-default-config-shares-too"),
    "-rf": ("-rf", "-rf", "2-3-allocatable-forgotten-on-lab-node-0"),
    "ada": ("ada", "ada", "valid-alternatives"),
    ".": (None, ".", "8-1-batch-train-pinned-by-nodename"),
    "..": (None, "..", "8-2-batch-train-running-on-the-shared-node"),
    LONG_ID: (None, LONG_ID, "5-3-one-team-pod-left-pending"),
    ESCAPES: (None, ESCAPES, "7-1-mps-config-keeps-timeslicing-too"),
}


@pytest.fixture(scope="module")
def class30(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """30 snapshot files in one class folder, graded in one run; what the run wrote and cost."""
    base = tmp_path_factory.mktemp("class30")
    subs = base / "subs"
    files: dict[str, Path] = {}
    for n, (learner, (folder, claimed, recorded)) in enumerate(HONEST.items()):
        where = (
            subs / folder / "submission.gpushare.tgz" if folder else subs / f"flat-{n}.gpushare.tgz"
        )
        uid = ALICE_UID if learner == "alice" else None
        files[learner] = forge(recorded, where, learner=claimed, uid=uid, salt=f"honest {n}")
    # ada captured twice: the older is not her row
    files["ada-old"] = forge(
        "1-1-team-a-never-created",
        subs / "ada" / "older.gpushare.tgz",
        learner="ada",
        captured_at=stamp(NOW - dt.timedelta(days=3)),
        salt="ada old",
    )
    # mallory, in her own folder: a manifest that says alice, captured "in 9999"
    files["mallory"] = forge(
        "5-1-quota-file-says-3",
        subs / "mallory" / "alice.gpushare.tgz",
        learner="alice",
        captured_at="9999-12-31T23:59:59Z",
        salt="mallory",
    )
    # two flat files that both say bob, from two clusters: both rows, neither replaces the other
    for n in (1, 2):
        files[f"bob-{n}"] = forge(
            "5-5-denial-paraphrased",
            subs / f"bob-{n}.gpushare.tgz",
            learner="bob",
            captured_at=stamp(NOW - dt.timedelta(days=2, hours=n)),
            salt=f"bob {n}",
        )
    # twins: one file, two learners
    files["twin1"] = forge(
        "8-1-notebook-placed-by-hostname-label",
        subs / "twin1" / "s.gpushare.tgz",
        learner="twin1",
        uid=TWIN_UID,
        salt="twin",
    )
    files["twin2"] = subs / "twin2" / "s.gpushare.tgz"
    files["twin2"].parent.mkdir(parents=True)
    shutil.copy2(files["twin1"], files["twin2"])
    # the bundled reference, learner changed, hashes recomputed: 100 everywhere
    ref = inputs.peek(RECORDED / "reference.gpushare.tgz")
    files["copycat"] = forge(
        "reference",
        subs / "copycat" / "s.gpushare.tgz",
        learner="copycat",
        uid=ref["cluster"]["uid"],
        salt="copy",
    )
    files["latecomer"] = forge(
        "3-2-three-mig-slices-advertised",
        subs / "latecomer" / "s.gpushare.tgz",
        learner="latecomer",
        captured_at=AFTER_DEADLINE,
        salt="late",
    )
    # bombs (issue 18 item 3, h18a)
    files["yaml-bomb"] = forge(
        "reference",
        subs / "yaml-bomb" / "s.gpushare.tgz",
        learner="yaml-bomb",
        salt="yb",
        work=_bomb_team_over,
    )
    files["tar-bomb"] = long_name_bomb(
        forge("reference", subs / "tar-bomb" / "s.gpushare.tgz", learner="tar-bomb", salt="tb"),
        2 * GIB,
    )
    assert files["tar-bomb"].stat().st_size < 16 * 1024 * 1024  # several MB on disk
    # type confusion (issue 18 item 4, h18a)
    files["tc-cluster"] = forge(
        "reference",
        subs / "tc-cluster" / "s.gpushare.tgz",
        learner="tc-cluster",
        salt="tc1",
        manifest=_cluster_as_list,
    )
    files["tc-lists"] = forge(
        "reference",
        subs / "tc-lists" / "s.gpushare.tgz",
        learner="tc-lists",
        salt="tc2",
        manifest=_recorded_as_list,
    )
    files["tc-dry-run"] = forge(
        "reference",
        subs / "tc-dry-run" / "s.gpushare.tgz",
        learner="tc-dry-run",
        salt="tc3",
        cluster=_dry_run_wrong_type,
    )
    nested = forge(
        "reference", subs / "tc-nested" / "s.gpushare.tgz", learner="tc-nested", salt="tc4"
    )
    deep = b'{"nodes": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    files["tc-nested"] = rewrite(nested, replace={"cluster.json": deep})
    files["surrogate"] = forge(
        "reference", subs / "surrogate.gpushare.tgz", learner="\ud800x", salt="sur"
    )
    # a corrupt upload whose file name carries escapes (the reason names the file)
    corrupt = subs / f"cut{ESCAPES}.gpushare.tgz"
    corrupt.write_bytes(files["alice"].read_bytes()[:200])
    files["corrupt"] = corrupt
    assert len(files) == 30, len(files)

    out = base / "class"
    rss = base / "rss.json"
    wrapper = (
        "import json, resource, subprocess, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({4 * GIB}, {4 * GIB}))  # the machine's\n"
        "proc = subprocess.run(sys.argv[2:], capture_output=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "json.dump({'rc': proc.returncode, 'peak': peak, 'stdout': proc.stdout.hex(),"
        " 'stderr': proc.stderr.hex()}, open(sys.argv[1], 'w'))\n"
    )
    command = [sys.executable, "-m", "gpushare", "class", "grade", str(subs), "--out", str(out)]
    command += ["--jobs", "2", "--lang", "en", "--timeout", "30", "--deadline", DEADLINE, *UNSAFE]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    subprocess.run(
        [sys.executable, "-c", wrapper, str(rss), *command],
        cwd=ROOT,
        env=env,
        timeout=900,
        check=True,
    )
    ran = json.loads(rss.read_text())
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"))))
    return {
        "files": files,
        "out": out,
        "rc": ran["rc"],
        "peak": ran["peak"],
        "stdout": bytes.fromhex(ran["stdout"]),
        "stderr": bytes.fromhex(ran["stderr"]),
        "rows": rows,
        "subs": subs,
    }


def _graded(run: dict[str, Any]) -> dict[Path, str]:
    """The file each results.json of the class was graded from -> its folder."""
    out = {}
    for path in run["out"].glob("**/results.json"):
        results = json.loads(path.read_text(encoding="utf-8"))
        source = Path(results["extra_data"]["cluster"]["snapshot"]).resolve()
        out[source] = path.parent.relative_to(run["out"]).as_posix()
    return out


def _folder_of(run: dict[str, Any], key: str) -> str:
    return _graded(run)[run["files"][key].resolve()]


def _row_of(run: dict[str, Any], key: str) -> dict[str, str]:
    """The CSV row graded from ``run['files'][key]``."""
    folder = _folder_of(run, key)
    name = run["files"][key].name
    found = [
        r
        for r in run["rows"]
        if r["learner"] in (folder, folder.split("/")[0]) and r["snapshot"] == clean.csv_cell(name)
    ]
    assert len(found) == 1, (key, folder, found)
    return found[0]


def _failed(run: dict[str, Any], key: str) -> set[str]:
    path = run["out"] / _folder_of(run, key) / "results.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    return {t["number"] for t in results["tests"] if t["status"] != "passed"}


def test_every_honest_learner_has_their_own_correct_row(class30):
    run = class30
    assert run["rc"] == 0, run["stderr"].decode(errors="replace")
    points = discovered_checks()
    for learner, (_, _, recorded) in HONEST.items():
        row = _row_of(run, learner)
        assert row["learner"] == identity.folder_name(learner)
        assert _learner_of(row["learner"]) == learner or len(learner.encode()) > 200
        fails = set(INDEX[recorded]["fails"])
        assert row["status"] == ("passed" if not fails else "failed"), (learner, row)
        assert _failed(run, learner) == fails, learner
        assert int(row["score"]) == sum(points.values()) - sum(points[n] for n in fails)
    # one row each; names that collided before stay apart; the class's own names are kept
    learners = [r["learner"] for r in run["rows"]]
    for name in (
        "张三",
        "李四",
        "zhang san",
        "zhang_san",
        "%63lass.json",
        "%67rades.csv",
        "%72eport.html",
        "%2Drf",
        "%2E",
        "%2E%2E",
    ):
        assert learners.count(name) == 1, name
    assert json.loads((run["out"] / "class.json").read_text())["deadline"] == DEADLINE
    assert (run["out"] / "report.html").read_text().startswith("<!DOCTYPE html>")
    long_row = _row_of(run, LONG_ID)
    assert len(long_row["learner"].encode()) <= identity.MAX_BYTES
    record = json.loads((run["out"] / long_row["learner"] / "results.json").read_text())
    assert record["extra_data"]["submission"]["learner"] == LONG_ID
    # ada's latest snapshot is her row; her older one is not a row of its own
    assert _row_of(run, "ada")["snapshot"] == "submission.gpushare.tgz"
    assert not [r for r in run["rows"] if r["snapshot"] == "older.gpushare.tgz"]
    assert "1 more files not graded: older snapshots of the same learners" in (
        run["stdout"].decode()
    )
    # honest learners with nothing in common with anyone carry no flag
    for learner in ("张三", "李四", "zhang san", "zhang_san", "class.json", ".", LONG_ID, "ada"):
        assert _row_of(run, learner)["flags"] == "", learner


def test_a_spoofed_learner_cannot_replace_anothers_row(class30):
    run = class30
    alice, mallory = _row_of(run, "alice"), _row_of(run, "mallory")
    assert alice["learner"] == "alice" and alice["score"] == "100"
    assert mallory["learner"] == "mallory" and mallory["score"] != "100"
    assert mallory["flags"].split() == [
        "manifest_learner",
        "same_claim",
        "future",
        "after_deadline",
    ]
    assert alice["flags"].split() == ["same_claim"]  # both listed and flagged
    page = (run["out"] / "report.html").read_text()
    assert "its manifest names another learner: alice" in page
    # two flat files that both say bob (two clusters): two rows, both flagged
    bobs = [_row_of(run, "bob-1"), _row_of(run, "bob-2")]
    # each in a row of its own name, so no gradebook import takes either for bob's grade
    assert [b["learner"] for b in bobs] == ["bob/bob-1", "bob/bob-2"]
    assert all(b["flags"].split() == ["same_claim"] for b in bobs)
    assert all(b["status"] == "failed" for b in bobs)


def test_copies_and_the_shipped_reference_are_flagged(class30):
    run = class30
    # twin2 handed in twin1's very file: its manifest names twin1
    assert _row_of(run, "twin1")["flags"] == "same_claim same_cluster same_content"
    assert _row_of(run, "twin2")["flags"] == (
        "manifest_learner same_claim same_cluster same_content"
    )
    copycat = _row_of(run, "copycat")
    assert copycat["score"] == "100" and copycat["flags"].split() == ["reference_cluster"]
    late = _row_of(run, "latecomer")
    assert late["flags"].split() == ["after_deadline"]
    page = (run["out"] / "report.html").read_text()
    assert "tests/recorded/reference.gpushare.tgz" in page and "Submissions to look at" in page
    # the terminal lists them
    out = run["stdout"].decode()
    assert "copycat: reference_cluster" in out and "latecomer: after_deadline" in out


def test_the_csv_and_flags_are_the_same_when_graded_again_or_merged(class30, tmp_path):
    """Two shards merged carry the flags one run computed (duplicates across shards
    included): the class of 30's rows of those submissions, in its order, flags and all."""
    run = class30
    honest = tmp_path / "subs"
    keep = ("alice", "mallory", "twin1", "twin2", "copycat", "bob-1", "bob-2", "latecomer")
    for key in keep:
        dest = honest / run["files"][key].relative_to(run["subs"])
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(run["files"][key], dest)
    base = [sys.executable, "-m", "gpushare", "class", "grade", str(honest), "--jobs", "1"]
    base += ["--lang", "en", "--deadline", DEADLINE, *UNSAFE]
    shards = [tmp_path / f"shard-{i}" for i in range(2)]
    for i, out in enumerate(shards):
        proc = subprocess.run(
            [*base, "--out", str(out), "--shard", f"{i}/2"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
    # the twins are graded by different shards: their flag needs the whole class
    assert (shards[0] / "twin1").is_dir() != (shards[0] / "twin2").is_dir()
    merged = tmp_path / "merged"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushare",
            "class",
            "merge",
            *map(str, shards),
            "--out",
            str(merged),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    text = (merged / "grades.csv").read_text(encoding="utf-8")
    whole = (run["out"] / "grades.csv").read_text(encoding="utf-8")
    assert text.splitlines()[0] == whole.splitlines()[0]
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["learner"]: r["flags"] for r in rows}["twin1"] == (
        "same_claim same_cluster same_content"
    )
    # the rows of the class of 30 graded from these files, in the order it wrote them
    ours = [_row_of(run, key) for key in keep]
    assert rows == [r for r in run["rows"] if r in ours]


def test_the_grader_stays_under_one_gib(class30):
    """Peak RSS of the class run and every process below it (the workers, the learners'
    scripts). Needs issue 18 item 3 (bounded YAML and tar headers: h18a): the bombs of
    ``yaml-bomb`` and ``tar-bomb`` are in this class."""
    assert class30["peak"] < GIB, f"peak RSS {class30['peak'] / GIB:.2f} GiB"


def test_no_escape_sequence_reaches_the_terminal(class30):
    """Needs issue 18 item 5 (clean terminal output: h18a) for the file name of the corrupt
    upload; learner names are folder names, whose control characters are escaped here."""
    said = class30["stdout"] + class30["stderr"]
    bad = [b for b in set(said) if (b < 0x20 and b not in (0x09, 0x0A)) or b == 0x7F]
    assert not bad, said.decode(errors="replace")
    assert "\x9b" not in said.decode(errors="replace")  # C1 CSI


def test_the_bombs_are_error_rows(class30):
    """Issue 18 item 3: a bound hit costs this learner only. The tar bomb refuses the whole
    snapshot (an error row); the YAML bomb is a file of the learner's that cannot be read, so
    it fails the checks that read that file, each saying the bound was hit (not a crash, not a
    hang, and no other learner notices)."""
    row = _row_of(class30, "tar-bomb")
    assert row["status"] == "error" and row["score"] == "", row
    row = _row_of(class30, "yaml-bomb")
    assert row["status"] == "failed", row
    path = class30["out"] / _folder_of(class30, "yaml-bomb") / "results.json"
    failed = [t for t in json.loads(path.read_text(encoding="utf-8"))["tests"] if t["score"] == 0]
    assert failed and all("team-over.yaml" in t["output"] for t in failed), failed
    assert all("alias" in t["output"] or "values" in t["output"] for t in failed), failed


def test_type_confused_answers_are_error_rows(class30):
    """Needs issue 18 item 4 (shape validation: h18a): input of the wrong shape is an error
    row with one line saying why, never a grade with a traceback in it."""
    for key in ("tc-cluster", "tc-lists", "tc-dry-run", "tc-nested"):
        row = _row_of(class30, key)
        assert row["status"] == "error", (key, row)
        path = class30["out"] / _folder_of(class30, key) / "results.json"
        results = json.loads(path.read_text(encoding="utf-8"))
        assert "Traceback" not in json.dumps(results), key
    # a lone surrogate in the learner id: no UTF-8 writer writes one, so the snapshot is
    # refused; a row of its own (named after its file), results.json valid UTF-8
    row = _row_of(class30, "surrogate")
    assert row["learner"] == "surrogate" and row["status"] == "error", row
    (class30["out"] / row["learner"] / "results.json").read_bytes().decode("utf-8")


def test_the_corrupt_upload_is_an_error_row(class30):
    row = _row_of(class30, "corrupt")
    assert row["status"] == "error" and row["score"] == ""


# --------------------------------------------------------------------------- identity alone


def _copy(dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(RECORDED / "reference.gpushare.tgz", dest)
    return dest


def _who(root: Path, layout: identity.Layout | None = None) -> dict[str, tuple[str, str, bool]]:
    layout = layout or identity.Layout()
    return {
        p.relative_to(root).as_posix(): (s.learner_id, s.source, s.late)
        for p, r in inputs.locate([root])
        for s in [inputs.describe(p, r, layout)]
    }


def test_lms_downloads_say_whose_each_file_is(tmp_path):
    canvas = tmp_path / "canvas"
    _copy(canvas / "doejane_12345_67890_jane-20261130T101500Z-3f2a9c1b7d4e.gpushare.tgz")
    _copy(canvas / "unzipped" / "smithbob_LATE_23456_78901_anything.gpushare.tgz")
    assert _who(canvas) == {
        "doejane_12345_67890_jane-20261130T101500Z-3f2a9c1b7d4e.gpushare.tgz": (
            "doejane_12345",
            "canvas",
            False,
        ),
        "unzipped/smithbob_LATE_23456_78901_anything.gpushare.tgz": (
            "smithbob_23456",
            "canvas",
            True,
        ),
    }
    moodle = tmp_path / "moodle"
    _copy(moodle / "Jane Doe_4711_assignsubmission_file_" / "ref.gpushare.tgz")
    _copy(moodle / "张三_4712_assignsubmission_file_ref.gpushare.tgz")
    assert _who(moodle) == {
        "Jane Doe_4711_assignsubmission_file_/ref.gpushare.tgz": ("Jane Doe_4711", "moodle", False),
        "张三_4712_assignsubmission_file_ref.gpushare.tgz": ("张三_4712", "moodle", False),
    }
    gs = tmp_path / "gradescope"
    _copy(gs / "submission_216975964" / "a.gpushare.tgz")
    _copy(gs / "submission_216667716" / "b.gpushare.tgz")
    (gs / "submission_metadata.yml").write_text(
        "---\nsubmission_216975964:\n  :submitters:\n  - :name: Alice Sun\n    :sid: '06758767'\n"
        "    :email: afontain@example.edu\n  - :name: Marissa Hsu\n    :sid: '06754968'\n"
        "    :email: hsuma@example.edu\n  :created_at: 2023-12-02 02:52:07.938335000 Z\n"
        "  :score: 0.0\n  :history: []\nsubmission_216667716:\n  :submitters:\n"
        "  - :name: Tengbo Wang\n    :email: tengbo@example.edu\n  :score: 0.0\n"
    )
    assert _who(gs) == {
        "submission_216975964/a.gpushare.tgz": ("06754968+06758767", "gradescope", False),
        "submission_216667716/b.gpushare.tgz": ("tengbo@example.edu", "gradescope", False),
    }
    # the manifest says "reference": another learner than the layout, so flagged as one
    sub = inputs.describe(gs / "submission_216667716" / "b.gpushare.tgz", gs, identity.Layout())
    assert sub.mismatch and sub.claimed == "reference"


def test_a_roster_decides_before_anything_else(tmp_path):
    subs = tmp_path / "subs"
    _copy(subs / "ada" / "one.gpushare.tgz")
    _copy(subs / "x.gpushare.tgz")
    _copy(subs / "y.gpushare.tgz")
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "\ufefffile,learner,comment\nada/one.gpushare.tgz,王五,\nx.gpushare.tgz,eve,\n"
    )
    found = _who(subs, identity.Layout(roster))
    assert found == {
        "ada/one.gpushare.tgz": ("王五", "roster", False),
        "x.gpushare.tgz": ("eve", "roster", False),
        "y.gpushare.tgz": ("reference", "manifest", False),  # not in the roster: its manifest
    }
    bad = tmp_path / "bad.csv"
    bad.write_text("name,who\n")
    with pytest.raises(identity.LayoutError, match="file,learner"):
        identity.Layout(bad)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushare",
            "class",
            "grade",
            str(subs),
            "--out",
            str(tmp_path / "o"),
            "--roster",
            str(bad),
            *UNSAFE,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "file,learner" in proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushare",
            "class",
            "grade",
            str(subs),
            "--out",
            str(tmp_path / "o"),
            "--deadline",
            "tomorrow",
            *UNSAFE,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and "--deadline takes an ISO 8601 time" in proc.stderr


def test_folder_names_are_reversible_distinct_and_bounded():
    names = [
        "张三",
        "zhang san",
        "zhang_san",
        "Zhang_San",
        ".",
        "..",
        "-rf",
        "a/b",
        "a%2Fb",
        "class.json",
        "CLASS.JSON",
        "grades.csv",
        "report.html",
        "x\x1b[1Ay",
        "\ud800",
        "trailing.",
        "trailing ",
        "a\\b",
        "con:",
        "",
        "\u202egnp.exe",
        "~root",
        LONG_ID,
        LONG_ID + "x",
    ]
    names.append(identity.folder_name(LONG_ID))  # a name made to pass for a cut one
    folders = [identity.folder_name(n) for n in names]
    assert len(set(folders)) == len(names)
    for name, folder in zip(names, folders, strict=True):
        assert len(folder.encode()) <= identity.MAX_BYTES
        assert "/" not in folder and "\x00" not in folder and folder not in (".", "..")
        assert not folder.startswith((".", "-"))
        assert folder.casefold() not in identity.RESERVED
        assert all(ch.isprintable() for ch in folder), folder
        if len(name) <= 60:
            assert _learner_of(folder) == name
    assert (
        identity.folder_name("张三") == "张三" and identity.folder_name("zhang san") == "zhang san"
    )


def test_flags_need_no_more_than_the_rows():
    """The class-wide flags are computed from rows alone (what a merge has)."""

    def row(learner: str, **sub: Any) -> gradebook.Row:
        return gradebook.Row(
            learner, "s", "passed", 100, 100, "", 0, folder=learner, submission=sub
        )

    rows = [
        row("a", cluster_uid="u1", sha256="h1", claimed="a", captured_at="2026-11-01T00:00:00Z"),
        row("b", cluster_uid="u1", sha256="h2", claimed="a", mismatch=True),
        row("c", cluster_uid="u2", sha256="h2", claimed="c", captured_at="2999-01-01T00:00:00Z"),
        row("d", cluster_uid="ref", late=True, captured_at="2026-11-03T00:00:00Z"),
    ]
    flags.mark(rows, deadline=flags.parse_time("2026-11-02T00:00:00"), shipped={"ref": "x.tgz"})
    got = {r.learner: r.flags for r in rows}
    assert got["a"] == {"same_claim": "b", "same_cluster": "b"}
    assert got["b"] == {
        "manifest_learner": "a",
        "same_claim": "a",
        "same_cluster": "a",
        "same_content": "c",
    }
    assert got["c"] == {
        "same_content": "b",
        "future": "2999-01-01T00:00:00Z",
        "after_deadline": "2999-01-01T00:00:00Z",
    }
    assert got["d"] == {
        "reference_cluster": "x.tgz",
        "after_deadline": "2026-11-03T00:00:00Z",
        "late": "late",
    }


def test_a_file_only_its_manifest_gives_never_takes_a_placed_learners_row(tmp_path):
    subs = tmp_path / "subs"
    forge("reference", subs / "alice" / "a.gpushare.tgz", learner="alice", salt="a")
    forge("reference", subs / "zzz.gpushare.tgz", learner="alice", salt="m")
    forge("reference", subs / "old.gpushare.tgz", learner="cy", uid=ALICE_UID, salt="c1")
    forge(
        "reference",
        subs / "new.gpushare.tgz",
        learner="cy",
        uid=ALICE_UID,
        salt="c2",
        captured_at=AFTER_DEADLINE,
    )
    layout = identity.Layout()
    chosen = inputs.select([inputs.describe(p, r, layout) for p, r in inputs.locate([subs])])
    assert [(s.folder(False), s.source) for s in chosen] == [
        ("alice", "folder"),
        ("alice/zzz", "manifest"),  # apart: in the CSV as "alice/zzz", never as alice
        ("cy", "manifest"),  # one cluster's two files: one learner's resubmission, the latest
    ]
    assert chosen[2].name == "new.gpushare.tgz"
