"""Which snapshots a class grade takes: found in folders, one per learner, split into shards.

A snapshot's learner and capture time are read from its manifest (the first member of the
file, read alone, with a size cap), else from its file name as ``gpushare snapshot`` writes it
(``<learner>-<YYYYmmddTHHMMSSZ>-<hash12>.gpushare.tgz``), so a corrupt file still lands in its
learner's row as an error instead of vanishing. Nothing here trusts the manifest: it only
orders and names; :func:`gpushare.submissions.snapshot.load` verifies every byte before a grade.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from gpushare.submissions import bounded
from gpushare.submissions.snapshot import MAX_ARCHIVE, SUFFIX, safe_name

# Names the class folder uses itself; a learner folder never takes one of them.
RESERVED = frozenset({"grades.csv", "report.html"})
_MAX_MANIFEST = 1024 * 1024
_NAME = re.compile(
    r"^(?P<learner>.+)-(?P<d>\d{8})T(?P<t>\d{6})Z-(?P<hash>[0-9a-f]{12})\.gpushare\.tgz$"
)


class InputError(Exception):
    """A PATH that names nothing to grade; one line, exit 2."""


@dataclass(frozen=True)
class Submission:
    """One snapshot file to grade, and what its row is called."""

    path: Path
    learner: str  # as a folder name: the learner column of grades.csv
    captured_at: str  # "2026-11-30T10:15:00Z", or "" when neither manifest nor name says
    digest: str  # the manifest's sha256 of the content, or "" when unreadable

    @property
    def name(self) -> str:
        return self.path.name

    def folder(self, every: bool) -> str:
        """Where its results go under the class folder: the learner, or with ``--all``,
        ``<learner>/<snapshot name without the suffix>``."""
        if not every:
            return self.learner
        stem = self.name[: -len(SUFFIX)] if self.name.endswith(SUFFIX) else self.name
        return f"{self.learner}/{safe_name(stem)}"


def find(paths: list[Path]) -> list[Path]:
    """Every snapshot named: a file as given, a folder searched (recursively) for
    ``*.gpushare.tgz``. Sorted and without duplicates."""
    found: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found.update(p for p in path.rglob(f"*{SUFFIX}") if p.is_file())
        elif path.is_file():
            found.add(path)
        else:
            raise InputError(f"no such snapshot or folder: {path}")
    return sorted(found)


def describe(path: Path) -> Submission:
    """Learner, capture time and content hash of ``path``, as far as they can be read."""
    manifest = peek(path)
    match = _NAME.match(path.name)
    learner = str(manifest.get("learner") or "") or (match["learner"] if match else "")
    captured = str(manifest.get("captured_at") or "")
    if not captured and match:
        d, t = match["d"], match["t"]
        captured = f"{d[:4]}-{d[4:6]}-{d[6:]}T{t[:2]}:{t[2:4]}:{t[4:]}Z"
    if not learner:
        stem = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
        learner = stem
    name = safe_name(learner)
    if name in RESERVED:
        name += "_"
    digest = str(manifest.get("sha256") or "")
    return Submission(path, name, captured, digest if re.fullmatch(r"[0-9a-f]{64}", digest) else "")


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
    of every output."""
    kept: dict[str, Submission] = {}
    for sub in submissions:  # in path order: of two copies of one file, the first is kept
        key = sub.folder(every)  # the learner, or with every, the learner and the file
        held = kept.get(key)
        if held is None or (sub.captured_at, sub.name) > (held.captured_at, held.name):
            kept[key] = sub
    return sorted(kept.values(), key=lambda s: (s.learner, s.name))


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
