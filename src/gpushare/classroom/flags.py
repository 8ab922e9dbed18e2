"""Suspicion flags of a class: what an instructor should look at before trusting a row.

A snapshot is made on the learner's side, hashes included, so nothing in it proves who made
it, when, or on which cluster. These flags point at what honest work rarely looks like; a flag
is a reason to look, never a verdict, and never changes a score:

- ``manifest_learner``: the manifest names another learner than the instructor's layout;
- ``same_claim``: the manifests of files of different learners (or clusters) name one learner;
- ``same_cluster``: learners whose snapshots carry one cluster identity (kube-system uid);
- ``same_content``: learners whose snapshots have one content hash;
- ``reference_cluster``: the cluster identity of a snapshot this project ships (the examples,
  the recorded reference solution), read from those files at run time;
- ``future``: captured later than the moment of grading (beyond a few minutes of clock skew);
- ``after_deadline``: captured after ``--deadline``;
- ``late``: the LMS's download marked the submission late (Canvas ``_LATE_``).

Every flag is computed from the rows' ``results.json`` (``extra_data.submission``, written by
the class run) and the run's options, in :func:`mark`, the one place both ``class grade`` and
``class merge`` call: the shards of a class merged carry the very flags of one run.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from collections.abc import Iterable
from operator import attrgetter
from pathlib import Path

from gpushare import locations
from gpushare.classroom.gradebook import Row
from gpushare.classroom.inputs import peek
from gpushare.data import JsonObject
from gpushare.reports import clean

KEYS = (
    "manifest_learner",
    "same_claim",
    "same_cluster",
    "same_content",
    "reference_cluster",
    "future",
    "after_deadline",
    "late",
)
SKEW = dt.timedelta(minutes=10)  # a learner's clock ahead of ours by this much is not "future"
_SHIPPED = ("examples/*.gpushare.tgz", "tests/recorded/reference.gpushare.tgz")


def parse_time(text: str) -> dt.datetime | None:
    """An ISO 8601 time (``2026-12-01T23:59:00Z``, or with an offset; UTC when it has none)."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def shipped_clusters(root: Path | None = None) -> dict[str, str]:
    """cluster uid -> the shipped snapshot that carries it (examples, the recorded reference)."""
    # the folder that holds the graders: the checkout, or /opt/gpushare in the grading image
    base = root or locations.graders_dir().parent
    found: dict[str, str] = {}
    for pattern in _SHIPPED:
        for path in sorted(base.glob(pattern)):
            cluster = peek(path).get("cluster")
            uid = cluster.get("uid") if isinstance(cluster, dict) else None
            if isinstance(uid, str) and uid:
                held = found.get(uid)
                name = path.relative_to(base).as_posix()
                found[uid] = f"{held}, {name}" if held else name
    return found


def mark(
    rows: Iterable[Row],
    *,
    deadline: dt.datetime | None = None,
    now: dt.datetime | None = None,
    shipped: dict[str, str] | None = None,
) -> None:
    """Set ``row.flags`` (key -> detail, in :data:`KEYS` order) of every row."""
    rows = list(rows)
    now = now or dt.datetime.now(dt.UTC)
    shipped = shipped if shipped is not None else shipped_clusters()
    by_uid: dict[str, list[Row]] = {}
    by_hash: dict[str, list[Row]] = {}
    by_claim: dict[str, list[Row]] = {}
    for row in rows:
        sub = row.submission
        if sub.get("cluster_uid"):
            by_uid.setdefault(sub["cluster_uid"], []).append(row)
        digest = sub.get("sha256") or row.digest
        if digest:
            by_hash.setdefault(digest, []).append(row)
        claim = _claim(sub)
        if claim:
            by_claim.setdefault(claim, []).append(row)
    for row in rows:
        sub = row.submission
        found: dict[str, str] = {}
        if sub.get("mismatch"):
            found["manifest_learner"] = printable(sub.get("claimed") or "")
        same = by_claim.get(_claim(sub), [])
        if len({r.learner for r in same}) > 1 or len({_uid(r) for r in same}) > 1:
            found["same_claim"] = _others(row, same, by_folder=True)
        uid = sub.get("cluster_uid") or ""
        if uid and len({r.learner for r in by_uid[uid]}) > 1:
            found["same_cluster"] = _others(row, by_uid[uid])
        digest = sub.get("sha256") or row.digest
        if digest and len({r.learner for r in by_hash[digest]}) > 1:
            found["same_content"] = _others(row, by_hash[digest])
        if uid in shipped:
            found["reference_cluster"] = shipped[uid]
        captured = parse_time(sub.get("captured_at") or "")
        if captured is not None and captured > now + SKEW:
            found["future"] = sub["captured_at"]
        if captured is not None and deadline is not None and captured > deadline:
            found["after_deadline"] = sub["captured_at"]
        if sub.get("late"):
            found["late"] = "late"
        row.flags = {k: found[k] for k in KEYS if k in found}


def _uid(row: Row) -> str:
    return str(row.submission.get("cluster_uid") or "")


def _others(row: Row, rows: list[Row], by_folder: bool = False) -> str:
    """The other learners (or rows) of a group, as the report names them."""
    name = attrgetter("folder" if by_folder else "learner")
    return ", ".join(sorted({name(r) for r in rows if name(r) != name(row)}))


def _claim(sub: JsonObject) -> str:
    """The learner a manifest names, as an id: exact (``zhang san`` is not ``zhang_san``)
    but for Unicode normalisation."""
    return unicodedata.normalize("NFC", str(sub.get("claimed") or ""))


def printable(text: str, limit: int = 120) -> str:
    """``text`` cut to ``limit``, its control characters shown as escapes
    (:func:`gpushare.reports.clean.line`): what a snapshot says, safe on a terminal."""
    return clean.line(text[:limit]) + ("…" if len(text) > limit else "")
