"""Which snapshots a class grade takes: found in folders, one per learner, split into shards.

Whose a snapshot is, is decided by the instructor's layout (:mod:`.identity`: a roster, an LMS
download, a folder per learner); only without one by its manifest (the first member of the
file, read alone, with a size cap), else by its file name as ``gpushare snapshot`` writes it
(``<learner>-<YYYYmmddTHHMMSSZ>-<hash12>.gpushare.tgz``), so a corrupt file still lands in a
row of its own as an error instead of vanishing. The manifest's capture time orders a
learner's files (a time that is not what ``gpushare snapshot`` writes orders as the oldest);
:func:`gpushare.submissions.snapshot.load` verifies every byte before a grade.

What the copy flags compare is read from the snapshot's data, not its manifest
(:func:`fingerprint`): the cluster's identity and every object uid in ``cluster.json`` (a lab
gives each object a random uid: two learners' labs share none), and a hash of each work file
taken apart, so a copy with one file edited still shares the others.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpushare.classroom import identity
from gpushare.classroom.identity import Layout
from gpushare.data import Json, JsonObject
from gpushare.submissions import bounded, workdir
from gpushare.submissions.snapshot import (
    MAX_ARCHIVE,
    MAX_CLUSTER_JSON,
    MAX_MEMBERS,
    MAX_UNPACKED,
    SUFFIX,
    capture_time,
)

_MAX_MANIFEST = 1024 * 1024
MAX_OBJECTS = 2000  # object uids kept of one cluster.json (the lab's has some 20)
MAX_FILES = 500  # work files hashed of one snapshot (the lab's work dir has a dozen)
_FILE_HASH = 16  # hex digits kept of a work file's hash
_NAME = re.compile(
    r"^(?P<learner>.+)-(?P<d>\d{8})T(?P<t>\d{6})Z-(?P<hash>[0-9a-f]{12})\.gpushare\.tgz$"
)


class InputError(Exception):
    """A PATH that names nothing to grade; one line, exit 2."""


@dataclass(frozen=True)
class Submission:
    """One snapshot file to grade, whose it is, and what its row is called."""

    path: Path
    learner: str  # as a folder name (identity.folder_name): the learner column of grades.csv
    captured_at: str  # "2026-11-30T10:15:00Z", or "" when neither manifest nor name says
    digest: str  # the manifest's sha256 of the content, or "" when unreadable
    learner_id: str = ""  # the learner as decided, before it became a folder name
    source: str = "manifest"  # what decided it: one of identity.SOURCES
    claimed: str = ""  # the manifest's learner, whatever it says ("" when unreadable)
    cluster_uid: str = ""  # the manifest's cluster identity (kube-system uid), or ""
    late: bool = False  # the LMS's download marked it late
    mismatch: bool = False  # the manifest names another learner than the layout
    apart: bool = False  # one of several files that name one learner: each its own row
    origin: str = ""  # where in the layout its placement comes from (identity.Placed.origin)
    stray: str = ""  # a learner-placed submission_metadata.yml above it (ignored), or ""
    data: JsonObject = field(default_factory=dict)  # what its data says (fingerprint)
    leaf: str = ""  # its own row's folder inside the learner's, once select named it
    shipped: str = ""  # the snapshot gpushare ships that this very file is, or ""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def cluster(self) -> str:
        """The cluster it was graded from: cluster.json's kube-system uid, else the manifest's
        (a manifest naming a classmate's cluster makes no resubmission of theirs)."""
        return str(self.data.get("graded_cluster_uid") or self.cluster_uid)

    @property
    def trusted(self) -> bool:
        """Whether the instructor's layout (not the snapshot) says whose it is."""
        return self.source in identity.TRUSTED

    def folder(self, every: bool) -> str:
        """Where its results go under the class folder: the learner, or with ``--all`` (or
        when several files name one learner in their manifests),
        ``<learner>/<snapshot name without the suffix>``."""
        if not (every or self.apart):
            return self.learner
        return f"{self.learner}/{self.leaf or _leaf(self)}"

    def record(self) -> dict[str, object]:
        """What a class run keeps of it in results.json (``extra_data.submission``): what
        the flags are computed from, again, by ``class merge``."""
        return {
            "learner": _utf8(self.learner_id),
            "source": self.source,
            "claimed": _utf8(self.claimed),
            "cluster_uid": _utf8(self.cluster_uid),
            "captured_at": _utf8(self.captured_at),
            "sha256": self.digest,
            "late": self.late,
            "mismatch": self.mismatch,
            "apart": self.apart,
            "file": _utf8(self.name),
            "origin": _utf8(self.origin),
            "stray_metadata": _utf8(self.stray),
            "shipped": self.shipped,
            **self.data,
        }


def _utf8(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate (a JSON ``\\ud800`` in a manifest, or a
    file name the file system gave undecoded) becomes its escape, never an error at writing."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def locate(paths: list[Path]) -> list[tuple[Path, Path | None]]:
    """Every snapshot named (a file as given, a folder searched recursively for
    ``*.gpushare.tgz``), with the PATH (a folder) it was found under, or None for a file named
    itself. Sorted by file, without duplicates (the first PATH that finds a file keeps it)."""
    found: dict[Path, Path | None] = {}
    for path in paths:
        if path.is_dir():
            for p in sorted(path.rglob(f"*{SUFFIX}")):
                if p.is_file():
                    found.setdefault(p, path)
        elif path.is_file():
            found.setdefault(path, None)
        else:
            raise InputError(f"no such snapshot or folder: {path}")
    return sorted(found.items())


def describe(path: Path, root: Path | None = None, layout: Layout | None = None) -> Submission:
    """Whose ``path`` is (the layout's word, else its manifest's), its capture time and content
    hash, as far as they can be read."""
    manifest = peek(path)
    match = _NAME.match(path.name)
    claimed = _text(manifest.get("learner"))
    cluster = manifest.get("cluster")
    uid = _text(cluster.get("uid")) if isinstance(cluster, dict) else ""
    captured = _text(manifest.get("captured_at"))
    if not captured and match:
        d, t = match["d"], match["t"]
        captured = f"{d[:4]}-{d[4:6]}-{d[6:]}T{t[:2]}:{t[2:4]}:{t[4:]}Z"
    layout = layout or Layout()
    placed = layout.place(path, root)
    if placed is not None:
        learner, source = placed.learner, placed.source
    elif claimed:
        learner, source = claimed, "manifest"
    else:
        stem = path.name.removesuffix(SUFFIX)
        learner, source = (match["learner"] if match else stem), "file name"
    digest = _text(manifest.get("sha256"))
    return Submission(
        path,
        identity.folder_name(learner),
        captured,
        digest if re.fullmatch(r"[0-9a-f]{64}", digest) else "",
        learner_id=learner,
        source=source,
        claimed=claimed,
        cluster_uid=uid[:200],
        late=bool(placed and placed.late),
        mismatch=bool(placed and claimed and not placed.names(claimed)),
        origin=placed.origin if placed else "",
        stray=layout.stray_of(path, root),
        data=fingerprint(path),
    )


def _text(value: object) -> str:
    """A manifest's string field as text (anything else, e.g. a list, is no answer)."""
    return value if isinstance(value, str) else ""


def peek(path: Path) -> dict[str, object]:
    """The manifest alone (the first member), or {} when it cannot be read."""
    try:
        if path.stat().st_size > MAX_ARCHIVE:
            return {}
        with bounded.open_tar(path) as tar:  # a header's claimed size is checked first
            first = tar.next()
            if first is None or first.name != "manifest.json" or not first.isreg():
                return {}
            if first.size > _MAX_MANIFEST:
                return {}
            fh = tar.extractfile(first)
            data = bounded.json_loads(fh.read(_MAX_MANIFEST), "manifest") if fh else {}
    except Exception:  # any unreadable file is graded (and refused) later, as an error row
        return {}
    return data if isinstance(data, dict) else {}


def fingerprint(path: Path) -> JsonObject:
    """What the snapshot's own data says of where it came from, for the copy flags:
    ``graded_cluster_uid`` (cluster.json's kube-system namespace uid: the cluster the grade
    is computed from, whatever the manifest says), ``objects`` (every object uid of the
    cluster's answers, sorted), ``state`` (a hash of cluster.json) and ``files`` (each regular
    work file: a hash of its text with blank lines and the spaces around each line left out,
    and that text's size, so one added newline is no new file). Read within the snapshot's
    own bounds; what cannot be read is left out (the grade says why the file is bad)."""
    found: JsonObject = {}
    files: dict[str, list[Json]] = {}
    try:
        if path.stat().st_size > MAX_ARCHIVE:
            return {}
        total = 0
        with bounded.open_tar(path) as tar:
            for count, ti in enumerate(tar):
                total += ti.size
                if count > MAX_MEMBERS or total > MAX_UNPACKED:
                    break
                if not ti.isreg():
                    continue
                if ti.name == "cluster.json" and ti.size <= MAX_CLUSTER_JSON:
                    raw = _member(tar, ti)
                    found["state"] = hashlib.sha256(raw).hexdigest()[:_FILE_HASH]
                    # bounded as a grade bounds it (containers counted before parsing);
                    # only uids are read of it, so its strings need no other check here
                    if raw.count(b"{") + raw.count(b"[") <= bounded.MAX_JSON_CONTAINERS:
                        found.update(_cluster_ids(json.loads(raw)))
                elif (
                    ti.name.startswith("work/")
                    and ti.size <= workdir.MAX_BYTES
                    and len(files) < MAX_FILES
                ):
                    text = _normal(_member(tar, ti))
                    digest = hashlib.sha256(text).hexdigest()[:_FILE_HASH]
                    files[_utf8(ti.name.removeprefix("work/"))] = [digest, len(text)]
    except Exception:  # a bad file is the grade's to refuse; its fingerprint is what was read
        pass
    if files:
        found["files"] = dict(sorted(files.items()))
    return found


def _member(tar: tarfile.TarFile, ti: tarfile.TarInfo) -> bytes:
    fh = tar.extractfile(ti)
    return fh.read(ti.size) if fh else b""


def _normal(data: bytes) -> bytes:
    """A work file's text as a copy keeps it: no blank lines, no spaces around a line, any
    line ending."""
    lines = (line.strip() for line in data.replace(b"\r", b"\n").split(b"\n"))
    return b"\n".join(line for line in lines if line)


def _cluster_ids(answers: Json) -> JsonObject:
    """The kube-system uid and every object uid of the cluster's GET answers (a dry-run's
    body is the learner's own file, not the cluster's)."""
    if not isinstance(answers, dict):
        return {}
    uids: set[str] = set()
    stack: list[Json] = [a.get("value") for a in answers.values() if isinstance(a, dict)]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            uid = item.get("uid")
            if isinstance(uid, str) and 0 < len(uid) <= 100:
                uids.add(_utf8(uid))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    system = answers.get("kube-system")
    value = system.get("value") if isinstance(system, dict) else None
    meta = value.get("metadata") if isinstance(value, dict) else None
    uid = meta.get("uid") if isinstance(meta, dict) else None
    out: JsonObject = {"objects": sorted(uids)[:MAX_OBJECTS]}
    if isinstance(uid, str) and uid:
        out["graded_cluster_uid"] = _utf8(uid[:200])
    return out


def _latest_key(sub: Submission) -> tuple[str, str]:
    """What orders one learner's files: a capture time as ``gpushare snapshot`` writes it,
    then the file name; a time no capture writes (``...Z`` and a zero-width space, another
    notation) orders as the oldest, never as the latest."""
    return (sub.captured_at if capture_time(sub.captured_at) else "", sub.name)


def select(submissions: list[Submission], every: bool = False) -> list[Submission]:
    """The latest snapshot of each learner (by capture time, then file name), or every one
    (a file found twice, in two folders, once); ordered by learner, then file name: the order
    of every output.

    When only manifests say whose files are (no layout), files that name one learner from
    different clusters are not one learner's resubmissions: each is graded, in a row of its
    own (``<learner>/<snapshot>``), never one replacing another. Neither are files the layout
    gives one learner from two places (two folders, two submissions of an export, a roster
    entry for each): the capture time, which the learner writes, never decides between them;
    each is a row apart, and flagged (``same_learner``). Nor does a file only its manifest
    calls someone's take the row of a learner the layout names: it is a row apart too. Folder
    names are then made distinct under :func:`identity.fold`."""
    kept: dict[tuple[str, bool, str], Submission] = {}
    for sub in submissions:  # in path order: of two copies of one file, the first is kept
        if every:
            key = (str(sub.path.resolve()), True, "")
        else:
            key = (sub.folder(False), sub.trusted, sub.origin if sub.trusted else sub.cluster)
        held = kept.get(key)
        if held is None or _latest_key(sub) > _latest_key(held):
            kept[key] = sub
    learner_of = {key: sub.folder(False) for key, sub in kept.items()}
    groups = Counter(learner_of.values())
    places = Counter(learner_of[k] for k, sub in kept.items() if sub.trusted)
    chosen = []
    for key, sub in kept.items():
        folder = learner_of[key]
        apart = places[folder] > 1 if sub.trusted else groups[folder] > 1
        chosen.append(replace(sub, apart=True) if apart and not every else sub)
    return sorted(_named(chosen, every), key=lambda s: (s.learner, s.name))


def _named(chosen: list[Submission], every: bool) -> list[Submission]:
    """Each row's folder names, distinct under :func:`identity.fold`: a learner's folder (by
    the learner's id) and a snapshot's own row folder inside it (by its place)."""
    tops = identity.distinct((s.learner, s.learner_id) for s in chosen)
    named = [replace(s, learner=tops[(s.learner, s.learner_id)]) for s in chosen]
    inside: dict[str, list[int]] = {}  # learner folder -> the rows of their own in it
    for i, s in enumerate(named):
        if every or s.apart:
            inside.setdefault(s.learner, []).append(i)
    for rows in inside.values():
        keys = [(_leaf(named[i]), f"{named[i].origin}/{named[i].path}") for i in rows]
        leaves = identity.distinct(keys)
        for i, key in zip(rows, keys, strict=True):
            named[i] = replace(named[i], leaf=leaves[key])
    return named


def _leaf(sub: Submission) -> str:
    return identity.leaf_name(sub.name.removesuffix(SUFFIX))


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N) as (I, N)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match:
        raise InputError(f"--shard takes INDEX/COUNT, e.g. 0/4 (got {text!r})")
    index, count = int(match[1]), int(match[2])
    if count < 1 or index >= count:
        raise InputError(f"--shard {text}: the index must be 0 to {max(count - 1, 0)}")
    return index, count


def shard(submissions: list[Submission], index: int, count: int) -> list[Submission]:
    """This shard's part: every count-th submission of the ordered list, from index.

    Every shard sees the same snapshots and selects the same list, so the shards together
    grade each selected submission exactly once.
    """
    return submissions[index::count]


def seed_for(base: int, digest: str) -> int:
    """The unseen-case seed of one submission: from ``--seed`` and the snapshot's content hash,
    so a regrade of the same file with the same grader is the same grade."""
    raw = hashlib.sha256(f"gpushare-class:{base}:{digest}".encode()).digest()
    return int.from_bytes(raw[:4], "big") & 0x7FFFFFFF
