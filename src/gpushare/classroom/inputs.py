"""Which snapshots a class grade takes: found in folders, one per learner, split into shards.

Whose a snapshot is, is decided by the instructor's layout (:mod:`.identity`: a roster, an LMS
download, a folder per learner); only without one by its manifest (the first member of the
file, read alone, with a size cap), else by its file name as ``gpushare snapshot`` writes it
(``<learner>-<YYYYmmddTHHMMSSZ>-<hash12>.gpushare.tgz``), so a corrupt file still lands in a
row of its own as an error instead of vanishing. The manifest's capture time orders a
learner's files; :func:`gpushare.submissions.snapshot.load` verifies every byte before a grade.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from gpushare.classroom import identity
from gpushare.classroom.identity import Layout
from gpushare.submissions import bounded
from gpushare.submissions.snapshot import MAX_ARCHIVE, SUFFIX

_MAX_MANIFEST = 1024 * 1024
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
    root: Path | None = None  # the PATH it was found under

    @property
    def name(self) -> str:
        return self.path.name

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
        return f"{self.learner}/{identity.folder_name(self.name.removesuffix(SUFFIX))}"

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
    placed = (layout or Layout()).place(path, root)
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
        root=root,
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


def select(submissions: list[Submission], every: bool = False) -> list[Submission]:
    """The latest snapshot of each learner (by capture time, then file name), or every one
    (a file found twice, in two folders, once); ordered by learner, then file name: the order
    of every output.

    When only manifests say whose files are (no layout), files that name one learner from
    different clusters are not one learner's resubmissions: each is graded, in a row of its
    own (``<learner>/<snapshot>``), never one replacing another."""
    kept: dict[tuple[str, bool, str], Submission] = {}
    for sub in submissions:  # in path order: of two copies of one file, the first is kept
        key = (sub.folder(every), sub.trusted, "" if sub.trusted else sub.cluster_uid)
        held = kept.get(key)
        if held is None or (sub.captured_at, sub.name) > (held.captured_at, held.name):
            kept[key] = sub
    groups = Counter(folder for folder, _trusted, _uid in kept)
    # a file only its manifest calls someone's never takes the row of a learner the layout
    # names, nor of another cluster's file that names the same learner: it gets a row apart
    chosen = [
        replace(sub, apart=True) if not trusted and groups[folder] > 1 else sub
        for (folder, trusted, _uid), sub in kept.items()
    ]
    return sorted(chosen, key=lambda s: (s.learner, s.name))


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
