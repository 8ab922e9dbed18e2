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
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from gpushare.classroom import flags, gradebook, identity, inputs, report
from gpushare.reports import clean
from gpushare.sandbox import isolation
from gpushare.submissions import snapshot
from tests.helpers import MAX_SCORE, ROOT, discovered_checks

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


def own_lab(answers: dict[str, Any], system: str) -> dict[str, Any]:
    """The cluster's answers as a lab of their own gives them: every object a uid of its own
    (one object keeps one uid throughout), the kube-system namespace ``system``. The recorded
    states all come from the one lab that recorded them; learners' labs share no uid."""
    old = answers["kube-system"]["value"]["metadata"]["uid"]
    fresh: dict[str, str] = {old: system}
    stack: list[Any] = [answers]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("uid"), str):
                item["uid"] = fresh.setdefault(item["uid"], str(uuid.uuid4()))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return answers


def salt_files(work_root: Path, salt: str) -> None:
    """Each learner's own words: a comment line of their own in every YAML file and script
    (what a learner who wrote them, not copied them, always differs in), and a notes.txt."""
    (work_root / "notes.txt").write_text(f"{salt}\n")
    for path in sorted(work_root.rglob("*")):
        if path.suffix in (".yaml", ".sh") and path.is_file() and not path.is_symlink():
            text = path.read_text()
            path.write_text(text + ("" if text.endswith("\n") else "\n") + f"# {salt}\n")


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
    same_lab: bool = False,
) -> Path:
    """A snapshot from the recorded ``base``, written by :func:`snapshot.write` to ``dest``:
    ``learner`` in its manifest, the cluster of a lab of its own whose kube-system uid is
    ``uid`` (a fresh one when None; ``same_lab``: the recorded lab's answers as they are),
    files of its own words when ``salt`` is given (:func:`salt_files`), then edited as given."""
    with tempfile.TemporaryDirectory(prefix="gpushare-forge-") as tmp:
        snap = snapshot.load(RECORDED / f"{base}.gpushare.tgz", Path(tmp) / "scratch")
        if salt is not None:
            salt_files(snap.work_root, salt)
        if work is not None:
            work(snap.work_root)
        answers = json.loads(json.dumps(snap.cluster))
        system = uid or str(uuid.uuid4())
        if not same_lab:
            answers = own_lab(answers, system)
        if cluster is not None:
            cluster(answers)
        who = dict(snap.manifest["cluster"], uid=system)
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
    # the bundled reference, learner changed, hashes recomputed: full marks everywhere
    ref = inputs.peek(RECORDED / "reference.gpushare.tgz")
    files["copycat"] = forge(
        "reference",
        subs / "copycat" / "s.gpushare.tgz",
        learner="copycat",
        uid=ref["cluster"]["uid"],
        salt="copy",
        same_lab=True,
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


def keys(cell: str) -> list[str]:
    """A grades.csv flags cell's keys, without the group numbers (``same_cluster#2``)."""
    return [token.split("#")[0] for token in cell.split()]


def groups_of(cell: str) -> dict[str, str]:
    """A grades.csv flags cell's grouped flags -> their group number."""
    return dict(token.split("#") for token in cell.split() if "#" in token)


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
    assert alice["learner"] == "alice" and alice["score"] == str(MAX_SCORE)
    assert mallory["learner"] == "mallory" and mallory["score"] != str(MAX_SCORE)
    assert keys(mallory["flags"]) == ["manifest_learner", "same_claim", "future", "after_deadline"]
    assert keys(alice["flags"]) == ["same_claim"]  # both listed and flagged, in one group
    assert groups_of(alice["flags"]) == groups_of(mallory["flags"])
    page = (run["out"] / "report.html").read_text()
    assert "its manifest names another learner: alice" in page
    # two flat files that both say bob (two clusters): two rows, both flagged
    bobs = [_row_of(run, "bob-1"), _row_of(run, "bob-2")]
    # each in a row of its own name, so no gradebook import takes either for bob's grade
    assert [b["learner"] for b in bobs] == ["bob/bob-1", "bob/bob-2"]
    assert all(keys(b["flags"]) == ["same_claim"] for b in bobs)
    assert groups_of(bobs[0]["flags"]) == groups_of(bobs[1]["flags"]) != groups_of(alice["flags"])
    assert all(b["status"] == "failed" for b in bobs)


def test_copies_and_the_shipped_reference_are_flagged(class30):
    run = class30
    # twin2 handed in twin1's very file: its manifest names twin1; one group of each kind
    twin1, twin2 = _row_of(run, "twin1")["flags"], _row_of(run, "twin2")["flags"]
    assert keys(twin1) == ["same_claim", "same_cluster", "same_content", "same_files"]
    assert keys(twin2) == [
        "manifest_learner",
        "same_claim",
        "same_cluster",
        "same_content",
        "same_files",
    ]
    assert groups_of(twin1) == groups_of(twin2)
    copycat = _row_of(run, "copycat")
    assert copycat["score"] == str(MAX_SCORE) and keys(copycat["flags"]) == ["reference_cluster"]
    late = _row_of(run, "latecomer")
    assert keys(late["flags"]) == ["after_deadline"]
    page = (run["out"] / "report.html").read_text()
    assert "tests/recorded/reference.gpushare.tgz" in page and "Submissions to look at" in page
    # the terminal lists them, and each group once
    out = run["stdout"].decode()
    assert "copycat: reference_cluster" in out and "latecomer: after_deadline" in out
    number = groups_of(twin1)["same_cluster"]
    assert f"  #{number} same_cluster: {TWIN_UID[:8]}…: twin1, twin2" in out


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
    twins = {r["learner"]: r["flags"] for r in rows if r["learner"].startswith("twin")}
    assert keys(twins["twin1"]) == ["same_claim", "same_cluster", "same_content", "same_files"]
    assert groups_of(twins["twin1"]) == groups_of(twins["twin2"])  # one group, across shards

    # the rows of the class of 30 graded from these files, in the order it wrote them (the
    # groups are numbered in each class: the keys are compared)
    def plain(row: dict[str, str]) -> dict[str, str]:
        return {**row, "flags": " ".join(keys(row["flags"]))}

    ours = [plain(_row_of(run, key)) for key in keep]
    assert [plain(r) for r in rows] == [plain(r) for r in run["rows"] if plain(r) in ours]


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


def row_of(folder: str, /, **sub: Any) -> gradebook.Row:
    """A graded row of ``folder`` whose class record (``extra_data.submission``) is ``sub``."""
    return gradebook.Row(folder, "s", "passed", 100, 100, "", 0, folder=folder, submission=sub)


def test_flags_need_no_more_than_the_rows():
    """The class-wide flags are computed from rows alone (what a merge has); what several
    rows share is a group, numbered, each row naming its group."""
    rows = [
        row_of("a", cluster_uid="u1", sha256="h1", claimed="a", captured_at="2026-11-01T00:00:00Z"),
        row_of("b", cluster_uid="u1", sha256="h2", claimed="a", mismatch=True),
        row_of("c", cluster_uid="u2", sha256="h2", claimed="c", captured_at="2999-01-01T00:00:00Z"),
        row_of("d", cluster_uid="ref", late=True, captured_at="2026-11-03T00:00:00Z"),
        # a time no capture writes: said, and neither future nor after the deadline
        row_of("e", cluster_uid="u5", captured_at="2026-12-09T09:00:00Z\u200b"),
        row_of("f", cluster_uid="u6", captured_at="2999-01-01 00:00:00 UTC"),
    ]
    deadline = flags.parse_time("2026-11-02T00:00:00")
    flags.mark(rows, deadline=deadline, shipped={"x.tgz": {"cluster_uid": "ref"}})
    got = {r.learner: r.flags for r in rows}
    assert got["a"] == {"same_claim": "#1: a", "same_cluster": "#2: u1"}
    assert got["b"] == {
        "manifest_learner": "a",
        "same_claim": "#1: a",
        "same_cluster": "#2: u1",
        "same_content": "#3: h2",
    }
    assert got["c"] == {
        "same_content": "#3: h2",
        "future": "2999-01-01T00:00:00Z",
        "after_deadline": "2999-01-01T00:00:00Z",
    }
    assert got["d"] == {
        "reference_cluster": "x.tgz",
        "after_deadline": "2026-11-03T00:00:00Z",
        "late": "late",
    }
    assert got["e"] == {"bad_time": "2026-12-09T09:00:00Z\\u200b"}
    assert got["f"] == {"bad_time": "2999-01-01 00:00:00 UTC"}
    assert [(k, d, [r.learner for r in m]) for k, d, m in flags.grouped(rows)] == [
        ("same_claim", "#1: a", ["a", "b"]),
        ("same_cluster", "#2: u1", ["a", "b"]),
        ("same_content", "#3: h2", ["b", "c"]),
    ]
    assert gradebook.flag_tokens(got["b"]) == [
        "manifest_learner",
        "same_claim#1",
        "same_cluster#2",
        "same_content#3",
    ]


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


# --------------------------------------------------------------------------- who a file is


def _chosen(paths: list[Path], roster: Path | None = None, every: bool = False) -> Any:
    """What a class grade would take of ``paths``: the layout (surveyed) and the rows."""
    found = inputs.locate(paths)
    layout = identity.Layout(roster)
    layout.survey(found)
    described = [inputs.describe(p, r, layout) for p, r in found]
    return layout, inputs.select(described, every)


def _class_grade(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushare", "class", "grade", *args, "--lang", "en", *UNSAFE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def _rows(out: Path) -> dict[str, dict[str, str]]:
    text = (out / "grades.csv").read_text(encoding="utf-8")
    return {r["learner"]: r for r in csv.DictReader(io.StringIO(text))}


PLANTED = "x:\n  :submitters:\n  - :sid: alice\n    :name: alice\n"
EXPORT = (
    "submission_111:\n  :submitters:\n  - :name: Alice Smith\n    :sid: '1001'\n"
    "submission_222:\n  :submitters:\n  - :name: Mallory\n    :sid: '1002'\n"
)
PLANTED_EXPORT = "x:\n  :submitters:\n  - :name: Alice Smith\n    :sid: '1001'\n"


def alias_bomb(n: int) -> str:
    """One anchored list of ``n`` submitters, aliased by ``n`` folders (block style)."""
    people = "".join(f"  - :sid: s{i}\n    :email: e{i}@x\n" for i in range(n))
    return (
        "a0:\n  :submitters: &s\n"
        + people
        + "".join(f"a{j}:\n  :submitters: *s\n" for j in range(1, n))
    )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A folder-per-learner class and a Gradescope export, each with a learner's own
    submission_metadata.yml naming a classmate (and metadata files that are a bomb and not
    YAML at all), the shipped reference handed in under a new cluster uid with one newline
    added, a copy pair, and a cluster state copied under a new kube-system uid; graded in
    one run."""
    base = tmp_path_factory.mktemp("hostile")
    subs, gs = base / "subs", base / "gs"
    t = {h: f"2026-12-01T{h}:00:00Z" for h in ("09", "10", "12")}
    # in each layout: the victim's own file, the attacker's, and the attacker's file that
    # claims the victim (captured later, a failing script) below the attacker's metadata file
    spoofs = {
        "": (subs / "alice", subs / "mallory", "alice", "mallory"),
        "gs-": (gs / "submission_111", gs / "submission_222", "Alice Smith", "Mallory"),
    }
    files: dict[str, Path] = {}
    for prefix, (victims, attackers, victim, attacker) in spoofs.items():
        own = victims / "alice-20261201T100000Z-aaaaaaaaaaaa.gpushare.tgz"
        files[f"{prefix}alice"] = forge(
            "reference", own, learner=victim, captured_at=t["10"], salt=f"{prefix}alice"
        )
        files[f"{prefix}mallory"] = forge(
            "reference",
            attackers / "mine.gpushare.tgz",
            learner=attacker,
            captured_at=t["09"],
            salt=f"{prefix}mallory",
        )
        files[f"{prefix}for-alice"] = forge(
            "6-2-script-reads-only-requests",
            attackers / "x" / "for-alice.gpushare.tgz",
            learner=victim,
            captured_at=t["12"],
            salt=f"{prefix}for alice",
        )
    files["eve"] = forge("reference", subs / "eve" / "s.gpushare.tgz", learner="eve", salt="eve")
    files["bomber"] = forge(
        "reference", subs / "bomber" / "x" / "s.gpushare.tgz", learner="bomber", salt="b"
    )
    (subs / "mallory" / "submission_metadata.yml").write_text(PLANTED)
    (subs / "eve" / "submission_metadata.yml").write_text("- {:sid: s0\n")  # not YAML
    (subs / "bomber" / "submission_metadata.yml").write_text(alias_bomb(3000))
    (gs / "submission_metadata.yml").write_text(EXPORT)
    (gs / "submission_222" / "submission_metadata.yml").write_text(PLANTED_EXPORT)
    # the shipped reference under a new cluster uid, one newline added to one file
    files["lazy"] = forge(
        "reference",
        subs / "lazy" / "s.gpushare.tgz",
        learner="lazy",
        same_lab=True,
        work=lambda wd: (wd / "k8s/gpu-quota.yaml").write_text(
            (wd / "k8s/gpu-quota.yaml").read_text() + "\n"
        ),
    )
    # bea's work, and cal's copy of it (one file edited) applied on cal's own lab
    files["bea"] = forge(
        "5-1-quota-file-says-3", subs / "bea" / "s.gpushare.tgz", learner="bea", salt="bea"
    )

    def edit_one(wd: Path) -> None:
        quota = wd / "k8s" / "team-over.yaml"
        quota.write_text(quota.read_text().replace("name: team-over", "name: team-over # cal"))

    files["cal"] = forge(
        "5-1-quota-file-says-3",
        subs / "cal" / "s.gpushare.tgz",
        learner="cal",
        salt="bea",
        work=edit_one,
    )
    # dee's cluster.json is bea's with a new kube-system uid (and manifest to match)
    bea_answers = json.loads(_member(files["bea"], "cluster.json"))
    dee_uid = str(uuid.uuid4())

    def beas_state(answers: dict[str, Any]) -> None:
        answers.clear()
        answers.update(json.loads(json.dumps(bea_answers)))
        answers["kube-system"]["value"]["metadata"]["uid"] = dee_uid

    files["dee"] = forge(
        "reference",
        subs / "dee" / "s.gpushare.tgz",
        learner="dee",
        uid=dee_uid,
        salt="dee",
        cluster=beas_state,
    )
    out = base / "out"
    started = time.monotonic()
    proc = _class_grade(str(subs), str(gs), "--out", str(out), "--jobs", "2")
    return {
        "files": files,
        "subs": subs,
        "gs": gs,
        "out": out,
        "proc": proc,
        "seconds": time.monotonic() - started,
    }


def _member(path: Path, name: str) -> bytes:
    with tarfile.open(path, "r:gz") as tar:
        fh = tar.extractfile(name)
        assert fh is not None
        return fh.read()


def test_a_learners_own_metadata_file_never_says_whose_a_file_is(hostile):
    """F8: only the export's own submission_metadata.yml (at the PATH) is read; one in a
    learner's folder is ignored, said, and flagged; alice keeps her own row and grade."""
    proc = hostile["proc"]
    assert proc.returncode == 0, proc.stderr
    rows = _rows(hostile["out"])
    alice = rows["alice"]
    assert alice["snapshot"] == hostile["files"]["alice"].name and alice["score"] == str(MAX_SCORE)
    assert keys(alice["flags"]) == ["same_claim"]  # mallory's file claims her: said, not obeyed
    mallory = rows["mallory"]  # both of mallory's files are hers (her folder): the latest
    assert mallory["snapshot"] == "for-alice.gpushare.tgz"
    assert keys(mallory["flags"])[:3] == ["manifest_learner", "stray_metadata", "same_claim"]
    # the Gradescope export: 1001 is the export's Alice Smith, from her own submission
    assert rows["1001"]["snapshot"] == hostile["files"]["gs-alice"].name
    assert rows["1001"]["score"] == str(MAX_SCORE)
    assert rows["1002"]["snapshot"] == "for-alice.gpushare.tgz"
    assert "stray_metadata" in keys(rows["1002"]["flags"])
    record = json.loads((hostile["out"] / "1002" / "results.json").read_text())
    assert record["extra_data"]["submission"]["stray_metadata"] == (
        "submission_222/submission_metadata.yml"
    )
    said = proc.stdout
    for planted in ("mallory", "eve", "bomber"):
        assert f"ignored {hostile['subs'] / planted / 'submission_metadata.yml'}" in said
    assert f"ignored {hostile['gs'] / 'submission_222' / 'submission_metadata.yml'}" in said


def test_a_bad_metadata_file_of_a_learner_costs_nothing(hostile):
    """F9: a metadata file that is not YAML, or an alias bomb, below a learner's folder is
    never parsed: the class grades (the bomb of 3000 x 3000 took 0.9 GiB to parse before)."""
    rows = _rows(hostile["out"])
    assert rows["eve"]["status"] == "passed" and rows["bomber"]["status"] == "passed"
    assert keys(rows["eve"]["flags"]) == ["stray_metadata"]
    assert keys(rows["bomber"]["flags"]) == ["stray_metadata"]


def test_the_exports_own_metadata_is_read_bounded_or_refused(tmp_path):
    """F9: a bad metadata file at the export's top is a clear one-line error (exit 2), and an
    alias bomb there is refused by its measure, never expanded."""
    gs = tmp_path / "gs"
    _copy(gs / "submission_1" / "a.gpushare.tgz")
    (gs / "submission_metadata.yml").write_text("- {:sid: s0\n")
    proc = _class_grade(str(gs), "--out", str(tmp_path / "o"), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "submission_metadata.yml: not a Gradescope export's metadata" in proc.stderr
    (gs / "submission_metadata.yml").write_text(alias_bomb(2000))
    started = time.monotonic()
    with pytest.raises(identity.LayoutError, match="values once its aliases are expanded"):
        identity.read_gradescope(gs / "submission_metadata.yml")
    assert time.monotonic() - started < 10
    # the export's own, well formed: each folder to its submitters
    (gs / "submission_metadata.yml").write_text(EXPORT.replace("submission_111", "submission_1"))
    _layout, chosen = _chosen([gs])
    assert [(s.learner_id, s.source) for s in chosen] == [("1001", "gradescope")]


def test_the_shipped_reference_under_a_new_cluster_uid_is_still_flagged(hostile):
    """F6: the cluster identity comes from cluster.json, not the manifest: the reference lab's
    kube-system and object uids are found, the manifest that disagrees is flagged, and one
    added newline leaves the files copies."""
    lazy = _rows(hostile["out"])["lazy"]
    assert lazy["score"] == str(MAX_SCORE)
    assert keys(lazy["flags"]) == ["manifest_cluster", "reference_cluster", "reference_files"]
    page = (hostile["out"] / "report.html").read_text()
    assert "its manifest names another cluster than the one its answers come from" in page


def test_copied_files_and_a_copied_cluster_state_are_groups(hostile):
    """F6: cal applied bea's files (one edited) on a lab of his own: one same_files group;
    dee's cluster.json is bea's under a new kube-system uid: its object uids make them one
    same_cluster group. No one else of the class is in either."""
    rows = _rows(hostile["out"])
    files = {k: r for k, r in rows.items() if "same_files" in keys(r["flags"])}
    clusters = {k: r for k, r in rows.items() if "same_cluster" in keys(r["flags"])}
    assert sorted(files) == ["bea", "cal"] and sorted(clusters) == ["bea", "dee"]
    assert (
        groups_of(rows["bea"]["flags"])["same_files"]
        == groups_of(rows["cal"]["flags"])["same_files"]
    )
    assert keys(rows["dee"]["flags"]) == ["same_cluster"]
    page = (hostile["out"] / "report.html").read_text()
    assert page.count("<td>bea, cal</td>") == 1 and page.count("<td>bea, dee</td>") == 1


def test_a_roster_bare_name_must_name_one_file(tmp_path):
    """F10: mallory/alice.gpushare.tgz cannot take alice's row by her roster entry's name."""
    subs = tmp_path / "subs"
    _copy(subs / "alice" / "alice.gpushare.tgz")
    _copy(subs / "mallory" / "mallory.gpushare.tgz")
    _copy(subs / "mallory" / "alice.gpushare.tgz")
    roster = tmp_path / "roster.csv"
    roster.write_text("file,learner\nalice.gpushare.tgz,alice\nmallory.gpushare.tgz,mallory\n")
    with pytest.raises(identity.LayoutError) as caught:
        _chosen([subs], roster)
    said = str(caught.value)
    assert str(subs / "alice" / "alice.gpushare.tgz") in said
    assert str(subs / "mallory" / "alice.gpushare.tgz") in said
    proc = _class_grade(str(subs), "--out", str(tmp_path / "o"), "--roster", str(roster))
    assert proc.returncode == 2 and "found twice" in proc.stderr, proc.stderr
    # by their paths, each is the roster's
    roster.write_text(
        "file,learner\nalice/alice.gpushare.tgz,alice\nmallory/alice.gpushare.tgz,mallory\n"
        "mallory.gpushare.tgz,mallory\n"
    )
    _layout, chosen = _chosen([subs], roster)
    assert [(s.folder(False), s.source, s.name) for s in chosen] == [
        ("alice", "roster", "alice.gpushare.tgz"),
        ("mallory", "roster", "mallory.gpushare.tgz"),
    ]


def test_two_places_of_one_learner_are_rows_apart_and_flagged(tmp_path):
    """F8: the layout gives alice a file from her folder and one from another (a roster entry
    each): the later capture time, which a learner writes, never decides; both are rows of
    their own, one same_learner group."""
    subs = tmp_path / "subs"
    forge("reference", subs / "alice" / "a.gpushare.tgz", learner="alice", salt="a")
    forge(
        "reference",
        subs / "late" / "b.gpushare.tgz",
        learner="alice",
        salt="b",
        captured_at=AFTER_DEADLINE,
    )
    forge("reference", subs / "bo" / "c.gpushare.tgz", learner="bo", salt="c")
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "file,learner\nalice/a.gpushare.tgz,alice\nlate/b.gpushare.tgz,alice\n"
        "bo/c.gpushare.tgz,bo\n"
    )
    _layout, chosen = _chosen([subs], roster)
    assert [(s.folder(False), s.apart) for s in chosen] == [
        ("alice/a", True),
        ("alice/b", True),
        ("bo", False),
    ]
    rows = [row_of(s.folder(False), **s.record()) for s in chosen]
    flags.mark(rows, shipped={})
    assert [list(r.flags) for r in rows] == [["same_learner"], ["same_learner"], []]
    assert rows[0].flags["same_learner"] == rows[1].flags["same_learner"] == "#1: alice"


def test_row_folders_never_hold_a_rows_file_and_a_regrade_survives(tmp_path):
    """F5: files named results.json.gpushare.tgz and junit.xml.gpushare.tgz claiming Alice
    get rows apart whose folders are no row's file; a regrade into the same --out works; a
    row whose folder cannot be written is an error row of its own, never the end of the run."""
    subs = tmp_path / "subs"
    forge("reference", subs / "Alice" / "a.gpushare.tgz", learner="Alice", salt="a")
    for name in ("results.json", "junit.xml", "JUNIT.XML"):
        forge("reference", subs / f"{name}.gpushare.tgz", learner="Alice", salt=name)
    for learner in ("zed", "yan"):
        forge("reference", subs / f"{learner}.gpushare.tgz", learner=learner, salt=learner)
    out = tmp_path / "out"
    first = _class_grade(str(subs), "--out", str(out), "--jobs", "2")
    assert first.returncode == 0, first.stderr
    rows = _rows(out)
    assert set(rows) == {
        "Alice",
        "Alice/%72esults.json",
        "Alice/%6Aunit.xml",
        "Alice/%4AUNIT.XML",
        "yan",
        "zed",
    }
    assert (out / "Alice" / "results.json").is_file() and (out / "Alice" / "junit.xml").is_file()
    # the second run: zed's folder is a file now, yan's results.json a folder
    shutil.rmtree(out / "zed")
    (out / "zed").write_text("not a folder\n")
    (out / "yan" / "results.json").unlink()
    (out / "yan" / "results.json").mkdir()
    (out / "old" / "results.json").mkdir(parents=True)  # a stale folder named like a row file
    second = _class_grade(str(subs), "--out", str(out), "--jobs", "2")
    assert second.returncode == 0, second.stderr
    again = _rows(out)
    assert set(again) == set(rows)
    assert again["Alice"] == rows["Alice"]
    for broken in ("zed", "yan"):
        assert again[broken]["status"] == "error" and again[broken]["score"] == ""
    assert "zed: error:" in second.stdout and "yan: error:" in second.stdout
    assert (out / "report.html").is_file()


def test_a_capture_time_no_capture_writes_is_flagged_and_never_the_latest(tmp_path):
    """F7: ``...Z`` with a zero-width space, another notation: flagged bad_time, no future
    or after_deadline can hide behind it, and it never orders as a learner's latest."""
    subs = tmp_path / "subs"
    forge("reference", subs / "kim" / "a.gpushare.tgz", learner="kim", salt="a")
    forge(
        "5-1-quota-file-says-3",
        subs / "kim" / "b.gpushare.tgz",
        learner="kim",
        salt="b",
        captured_at="2026-12-09T09:00:00Z\u200b",
    )
    forge(
        "reference",
        subs / "lu" / "c.gpushare.tgz",
        learner="lu",
        salt="c",
        captured_at="2999-01-01 00:00:00 UTC",
    )
    _layout, chosen = _chosen([subs])
    assert [(s.learner, s.name) for s in chosen] == [
        ("kim", "a.gpushare.tgz"),
        ("lu", "c.gpushare.tgz"),
    ]
    _layout, every = _chosen([subs], every=True)
    rows = [row_of(s.folder(True), **s.record()) for s in every]
    flags.mark(rows, deadline=flags.parse_time(DEADLINE), shipped={})
    assert [r.flags for r in rows] == [
        {},
        {"bad_time": "2026-12-09T09:00:00Z\\u200b"},
        {"bad_time": "2999-01-01 00:00:00 UTC"},
    ]
    assert snapshot.capture_time("2026-12-09T09:00:00Z") == dt.datetime(
        2026, 12, 9, 9, tzinfo=dt.UTC
    )
    for bad in (
        "2026-12-09T09:00:00Z\u200b",
        "2026-W50-3",
        "2026-12-09T09:00:00+00:00",
        "２０２６-12-09T09:00:00Z",
        "2026-13-09T09:00:00Z",
        20261209,
    ):
        assert snapshot.capture_time(bad) is None, bad


LOOK_ALIKES = (
    "Alice",
    "alice",
    "ALICE",
    "\uff21lice",
    "K\u212a",
    "kk",
    "\u00e9lise",
    "e\u0301lise",
)


def test_look_alike_ids_are_flagged_and_their_folders_never_merge(tmp_path):
    """F11: ids equal under NFKC and case folding are one look_alike group, and their folders
    stay apart on a case-insensitive, normalising file system (macOS, Windows)."""
    subs = tmp_path / "subs"
    for n, learner in enumerate(LOOK_ALIKES):
        forge("reference", subs / learner / "s.gpushare.tgz", learner=learner, salt=f"l{n}")
    _layout, chosen = _chosen([subs])
    folders = [s.folder(False) for s in chosen]
    assert sorted(s.learner_id for s in chosen) == sorted(LOOK_ALIKES)
    assert len({identity.fold(f) for f in folders}) == len(LOOK_ALIKES), folders
    assert sum("~" not in f for f in folders) == 3  # the first of each fold keeps its name
    again = [s.folder(False) for s in _chosen([subs])[1]]
    assert again == folders  # the same learner keeps the same folder
    rows = [row_of(s.folder(False), **s.record()) for s in chosen]
    flags.mark(rows, shipped={})
    groups = [(k, sorted(r.submission["learner"] for r in m)) for k, _d, m in flags.grouped(rows)]
    assert groups == [
        # NFC and NFD: the very same name on screen; the manifests name one learner too
        ("same_claim", sorted(["\u00e9lise", "e\u0301lise"])),
        ("look_alike", sorted(["Alice", "alice", "ALICE", "\uff21lice"])),
        ("look_alike", ["K\u212a", "kk"]),
        ("look_alike", sorted(["\u00e9lise", "e\u0301lise"])),
    ]


def test_a_class_of_copies_is_one_group_not_n_squared_names():
    """30 submissions of one cluster: one group of 30 names in the report and the summary,
    never each of 30 rows listing the 29 others."""
    rows = [
        row_of(f"learner{n:02}", cluster_uid="one-lab", claimed=f"learner{n:02}") for n in range(30)
    ]
    flags.mark(rows, shipped={})
    assert all(r.flags == {"same_cluster": "#1: one-lab"} for r in rows)
    page = report.render(rows, gradebook.catalog(), "en", seed=0)
    flagged = page[page.index('id="flags"') :]
    flagged = flagged[: flagged.index("</table>", flagged.index("</table>") + 1)]
    assert flagged.count("learner07") == 2  # in the group's list, and as its own row
    assert len(flagged) < 8000


def test_a_manifest_naming_a_classmates_cluster_makes_no_resubmission_of_theirs(tmp_path):
    """Only manifests say whose these files are: mallory's file claims bob and bob's cluster
    uid in its manifest, captured later. Its cluster.json is her own lab's, so it is no
    resubmission of bob's: a row apart, flagged, and bob keeps his row."""
    subs = tmp_path / "subs"
    forge("reference", subs / "bob.gpushare.tgz", learner="bob", uid=TWIN_UID, salt="bob")

    def bobs_cluster(manifest: dict[str, Any]) -> None:
        manifest["cluster"]["uid"] = TWIN_UID

    forge(
        "6-2-script-reads-only-requests",
        subs / "zz.gpushare.tgz",
        learner="bob",
        salt="mallory",
        captured_at=AFTER_DEADLINE,
        manifest=bobs_cluster,
    )
    _layout, chosen = _chosen([subs])
    assert [(s.folder(False), s.name) for s in chosen] == [
        ("bob/bob", "bob.gpushare.tgz"),
        ("bob/zz", "zz.gpushare.tgz"),
    ]
    rows = [row_of(s.folder(False), **s.record()) for s in chosen]
    flags.mark(rows, shipped={})
    assert [list(r.flags) for r in rows] == [["same_claim"], ["same_claim", "manifest_cluster"]]
