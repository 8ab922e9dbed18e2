"""Suspicion flags of a class: what an instructor should look at before trusting a row.

A snapshot is made on the learner's side, hashes included, so nothing in it proves who made
it, when, or on which cluster. These flags point at what honest work rarely looks like; a flag
is a reason to look, never a verdict, and never changes a score:

- ``manifest_learner``: the manifest names another learner than the instructor's layout;
- ``same_learner``: the layout gives one learner files from two places (two folders, two
  submissions of an export, two roster entries): each is a row apart, none chosen by the
  capture time, which the learner writes;
- ``stray_metadata``: the file lies below a ``submission_metadata.yml`` of a learner's upload
  (never read: only the export's own, at the top of PATH, says whose a file is);
- ``same_claim``: the manifests of files of different learners (or clusters) name one learner;
- ``look_alike``: learner ids that differ but are one under NFKC and case folding (``Alice``
  and ``ALICE``, the Kelvin sign and ``K``, fullwidth letters);
- ``manifest_cluster``: the manifest's cluster identity is not the one in ``cluster.json``
  (the kube-system namespace the grade is computed from), or cluster.json has none;
- ``same_cluster``: learners whose snapshots share a cluster: a kube-system uid, or any object
  uid (a lab gives each object a random one; two learners' labs share none);
- ``same_content``: learners whose snapshots have one content hash, or one cluster.json;
- ``same_files``: learners whose work files are copies: files equal once blank lines and the
  spaces around lines are left out, of a text few of the class share (a short answer most of
  the class gives alike is no sign), at least :data:`COPY_BYTES` of it and a third of what
  is their own (so a copy with one file edited is still one);
- ``reference_cluster`` / ``reference_files``: the same of a snapshot this project ships (the
  examples, the sample class, the recorded reference solution), read from those files at run
  time; a shipped file graded as itself is not compared with itself;
- ``bad_time``: a capture time that is not what ``gpushare snapshot`` writes (no ``future``
  or ``after_deadline`` can be said of it, and it never orders as a learner's latest);
- ``future``: captured later than the moment of grading (beyond a few minutes of clock skew);
- ``after_deadline``: captured after ``--deadline``;
- ``late``: the LMS's download marked the submission late (Canvas ``_LATE_``).

The flags shared by several rows (:data:`GROUPED`) are groups, not pairs: one group per shared
cluster, copied file set, claimed or look-alike id; each row says its group (``#N: what is
shared``) and :func:`grouped` lists each group's rows once, so a class of 30 copies is one
group of 30 names, not 30 lists of 29.

Every flag is computed from the rows' ``results.json`` (``extra_data.submission``, written by
the class run) and the run's options, in :func:`mark`, the one place both ``class grade`` and
``class merge`` call: the shards of a class merged carry the very flags of one run.
"""

from __future__ import annotations

import datetime as dt
import functools
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from gpushare import locations
from gpushare.classroom import identity
from gpushare.classroom.gradebook import Row
from gpushare.classroom.inputs import fingerprint, peek
from gpushare.data import JsonObject
from gpushare.reports import clean
from gpushare.submissions.snapshot import capture_time

KEYS = (
    "manifest_learner",
    "same_learner",
    "stray_metadata",
    "same_claim",
    "look_alike",
    "manifest_cluster",
    "same_cluster",
    "same_content",
    "same_files",
    "reference_cluster",
    "reference_files",
    "bad_time",
    "future",
    "after_deadline",
    "late",
)
GROUPED = ("same_learner", "same_claim", "look_alike", "same_cluster", "same_content", "same_files")
SKEW = dt.timedelta(minutes=10)  # a learner's clock ahead of ours by this much is not "future"
# Copied work files: at least this much shared text (the lab's own work dir holds some 5 KB;
# its longest answer file, out/quota-denied.txt, 240 bytes, which most of a class writes alike)
COPY_BYTES = 512
_SHIPPED = (
    "examples/*.gpushare.tgz",
    "examples/class/**/*.gpushare.tgz",
    "tests/recorded/reference.gpushare.tgz",
)
_SHIPPED_ONE = "\0shipped"  # every shipped snapshot, as one member of the class's file counts


def parse_time(text: str) -> dt.datetime | None:
    """An ISO 8601 time (``2026-12-01T23:59:00Z``, or with an offset; UTC when it has none):
    what an instructor may type for ``--deadline``. A snapshot's own time is read strictly
    (:func:`gpushare.submissions.snapshot.capture_time`)."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _shipped() -> list[tuple[Path, str]]:
    """Each snapshot this project ships and its name, relative to the folder that holds the
    graders: the checkout, or /opt/gpushare in the grading image."""
    base = locations.graders_dir().parent
    return [(p, p.relative_to(base).as_posix()) for pat in _SHIPPED for p in sorted(base.glob(pat))]


def shipped_snapshots() -> dict[str, JsonObject]:
    """Each snapshot this project ships (:func:`_shipped`) -> what its data and manifest say
    of where it came from (:func:`gpushare.classroom.inputs.fingerprint`, and the manifest's
    ``cluster_uid``)."""
    found: dict[str, JsonObject] = {}
    for path, name in _shipped():
        cluster = peek(path).get("cluster")
        uid = cluster.get("uid") if isinstance(cluster, dict) else None
        data = fingerprint(path)
        if isinstance(uid, str) and uid:
            data["cluster_uid"] = uid
        if data:
            found[name] = data
    return found


def shipped_name(path: Path) -> str:
    """The shipped snapshot ``path`` is (the very file, by its place), or ""."""
    try:
        return _shipped_files().get(path.resolve(), "")
    except OSError:
        return ""


@functools.cache
def _shipped_files() -> dict[Path, str]:
    return {path.resolve(): name for path, name in _shipped()}


def mark(
    rows: Iterable[Row],
    *,
    deadline: dt.datetime | None = None,
    shipped: dict[str, JsonObject] | None = None,
) -> None:
    """Set ``row.flags`` (key -> detail, in :data:`KEYS` order) of every row."""
    rows = list(rows)
    now = dt.datetime.now(dt.UTC)
    shipped = dict(shipped if shipped is not None else shipped_snapshots())
    for row in rows:  # a shipped file graded as itself is a learner of this class, not a source
        shipped.pop(str(row.submission.get("shipped") or ""), None)
    found: dict[int, dict[str, str]] = {id(r): {} for r in rows}
    groups = [
        *_same_learner(rows),
        *_by_key(rows, "same_claim", _claim, apart_clusters=True),
        *_by_key(rows, "look_alike", _look_alike),
        *_same_cluster(rows),
        *_same_content(rows),
        *_same_files(rows, shipped, found),
    ]
    for number, (key, what, members) in enumerate(groups, start=1):
        for r in members:
            found[id(r)][key] = f"#{number}: {what}"
    refs = _shipped_keys(shipped)
    for row in rows:
        sub = row.submission
        flags = found[id(row)]
        if sub.get("mismatch"):
            flags["manifest_learner"] = printable(sub.get("claimed") or "")
        if sub.get("stray_metadata"):
            flags["stray_metadata"] = printable(sub["stray_metadata"])
        manifest_uid, graded = _text(sub, "cluster_uid"), _text(sub, "graded_cluster_uid")
        if sub.get("state") and manifest_uid and manifest_uid != graded:
            flags["manifest_cluster"] = printable(graded or "none")
        hits = sorted({name for key in _cluster_keys(sub) for name in refs.get(key, ())})
        if hits:
            flags["reference_cluster"] = ", ".join(hits)
        captured_at = _text(sub, "captured_at")
        captured = capture_time(captured_at)
        if captured_at and captured is None:
            flags["bad_time"] = printable(captured_at)
        if captured is not None and captured > now + SKEW:
            flags["future"] = captured_at
        if captured is not None and deadline is not None and captured > deadline:
            flags["after_deadline"] = captured_at
        if sub.get("late"):
            flags["late"] = "late"
        row.flags = {k: flags[k] for k in KEYS if k in flags}


def grouped(rows: Iterable[Row]) -> list[tuple[str, str, list[Row]]]:
    """Each group of :data:`GROUPED` flags once: (key, ``#N: what is shared``, its rows), in
    the order of N (what :func:`mark` wrote in the rows)."""
    found: dict[tuple[int, str, str], list[Row]] = {}
    for row in rows:
        for key, detail in row.flags.items():
            if key in GROUPED and detail.startswith("#"):
                number = int(detail[1:].split(":", 1)[0] or 0)
                found.setdefault((number, key, detail), []).append(row)
    return [(key, detail, members) for (_n, key, detail), members in sorted(found.items())]


# --------------------------------------------------------------------------- the groups

Group = tuple[str, str, list[Row]]  # (key, what is shared, the rows)


def _who(row: Row) -> str:
    """The learner a row is (the layout's id as recorded, else the row's name)."""
    return str(row.submission.get("learner") or row.learner)


def _text(sub: JsonObject, key: str) -> str:
    value = sub.get(key)
    return value if isinstance(value, str) else ""


def _same_learner(rows: list[Row]) -> Iterator[Group]:
    """Rows the layout (trusted) gives one learner from more than one place."""
    by_learner: dict[str, list[Row]] = {}
    for row in rows:
        if row.submission.get("source") in identity.TRUSTED and row.submission.get("origin"):
            by_learner.setdefault(_who(row), []).append(row)
    for learner, members in sorted(by_learner.items()):
        if len({r.submission["origin"] for r in members}) > 1:
            yield "same_learner", printable(learner), members


def _claim(row: Row) -> str:
    """The learner a manifest names, as an id: exact (``zhang san`` is not ``zhang_san``) but
    for Unicode normalisation; ids equal only once folded are ``look_alike``'s."""
    return unicodedata.normalize("NFC", _text(row.submission, "claimed"))


def _look_alike(row: Row) -> str:
    return identity.fold(_who(row))


def _by_key(
    rows: list[Row], key: str, of: Callable[[Row], str], apart_clusters: bool = False
) -> Iterator[Group]:
    """Rows whose ``of(row)`` is one value, of different learners (for claims: or of
    different clusters). ``same_claim`` groups by what the manifests claim; ``look_alike`` by
    the folded learner id, of ids that differ."""
    by: dict[str, list[Row]] = {}
    for row in rows:
        value = of(row)
        if value:
            by.setdefault(value, []).append(row)
    for value, members in sorted(by.items()):
        learners = {_who(r) for r in members}
        # files only their manifests place, from two clusters (two rows apart); two places
        # the layout gives one learner are same_learner's
        untrusted = [r for r in members if r.submission.get("source") not in identity.TRUSTED]
        clusters = {_graded(r.submission) for r in untrusted}
        if len(learners) > 1 or (apart_clusters and len(clusters) > 1):
            shown = _text(members[0].submission, "claimed") if apart_clusters else value
            yield key, printable(shown), members


def _graded(sub: JsonObject) -> str:
    """The cluster a row was graded from: cluster.json's kube-system uid, else the manifest's
    (as inputs.Submission.cluster)."""
    return _text(sub, "graded_cluster_uid") or _text(sub, "cluster_uid")


def _cluster_keys(sub: JsonObject) -> set[str]:
    """Every identity of the cluster a row was graded from: the manifest's, cluster.json's
    kube-system uid and its object uids."""
    keys = {_text(sub, "cluster_uid"), _text(sub, "graded_cluster_uid")}
    objects = sub.get("objects")
    if isinstance(objects, list):
        keys.update(o for o in objects if isinstance(o, str))
    keys.discard("")
    return keys


def _components(rows: list[Row], keys: dict[int, set[str]]) -> list[list[Row]]:
    """Rows joined when they share a key (union-find), in row order."""
    parent = list(range(len(rows)))

    def top(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i in range(len(rows)):
        for key in keys.get(i, ()):
            j = first.setdefault(key, i)
            parent[top(i)] = top(j)
    out: dict[int, list[Row]] = {}
    for i, row in enumerate(rows):
        out.setdefault(top(i), []).append(row)
    return list(out.values())


def _same_cluster(rows: list[Row]) -> Iterator[Group]:
    keys = {i: _cluster_keys(r.submission) for i, r in enumerate(rows)}
    for members in _components(rows, keys):
        if len({_who(r) for r in members}) < 2:
            continue
        shared = Counter(k for r in members for k in _cluster_keys(r.submission))
        systems = (
            _text(r.submission, key)
            for r in members
            for key in ("graded_cluster_uid", "cluster_uid")
        )
        system = next((s for s in systems if shared[s] > 1), "")
        uid = system or min(k for k, n in shared.items() if n > 1)
        yield "same_cluster", _short(uid), members  # the kube-system uid, else an object's


def _same_content(rows: list[Row]) -> Iterator[Group]:
    keys: dict[int, set[str]] = {}
    for i, r in enumerate(rows):
        whole, state = str(r.submission.get("sha256") or r.digest), _text(r.submission, "state")
        keys[i] = {
            k for k in (f"all:{whole}" if whole else "", f"state:{state}" if state else "") if k
        }
    for members in _components(rows, keys):
        if len({_who(r) for r in members}) > 1:
            ids = {id(r) for r in members}
            shared = Counter(k for i, r in enumerate(rows) if id(r) in ids for k in keys[i])
            key = min(k for k, n in shared.items() if n > 1)
            yield "same_content", _short(key.split(":", 1)[1]), members


def _files(sub: JsonObject) -> dict[tuple[str, str], int]:
    """(work file, hash) -> the size of its text, of one row (inputs.fingerprint)."""
    files = sub.get("files")
    out: dict[tuple[str, str], int] = {}
    if isinstance(files, dict):
        for name, held in files.items():
            if isinstance(held, list) and len(held) == 2 and isinstance(held[1], int):
                out[(str(name), str(held[0]))] = held[1]
    return out


def _same_files(
    rows: list[Row], shipped: dict[str, JsonObject], found: dict[int, dict[str, str]]
) -> Iterator[Group]:
    """Rows whose work files are copies of each other's (see the module), in groups; a row
    whose files are a shipped snapshot's gets ``reference_files`` (in ``found``) too."""
    who = [_who(r) for r in rows] + [_SHIPPED_ONE]
    held = [_files(r.submission) for r in rows]
    reference: dict[tuple[str, str], int] = {}
    for data in shipped.values():
        reference.update(_files(data))
    held.append(reference)
    learners = len(set(who)) - 1
    holders: dict[tuple[str, str], set[str]] = {}
    for i, files in enumerate(held):
        for f in files:
            holders.setdefault(f, set()).add(who[i])
    few, some = max(2, learners // 5), max(2, learners // 3)

    def telling(f: tuple[str, str], size: int) -> bool:
        many = len(holders[f])
        return many <= few or (size >= COPY_BYTES and many <= some)

    own = [sum(size for f, size in files.items() if telling(f, size)) for files in held]
    shared: Counter[tuple[int, int]] = Counter()
    by_file: dict[tuple[str, str], list[int]] = {}
    for i, files in enumerate(held):
        for f, size in files.items():
            if len(holders[f]) > 1 and telling(f, size):
                by_file.setdefault(f, []).append(i)
    for f, holding in by_file.items():
        size = held[holding[0]][f]
        for a, i in enumerate(holding):
            for j in holding[a + 1 :]:
                if who[i] != who[j]:
                    shared[(i, j)] += size
    edges: dict[int, set[str]] = {}
    for (i, j), size in shared.items():
        if size < COPY_BYTES or 3 * size < min(own[i], own[j]):
            continue
        if j == len(rows):  # its files are copies of a shipped snapshot's
            mine = {f for f in held[i] if f in reference and telling(f, held[i][f])}
            hit = sorted(n for n, data in shipped.items() if mine & set(_files(data)))
            found[id(rows[i])]["reference_files"] = ", ".join(hit)
            continue
        edges.setdefault(i, set()).add(f"{i}-{j}")
        edges.setdefault(j, set()).add(f"{i}-{j}")
    index = {id(r): i for i, r in enumerate(rows)}
    for ours in _components(rows, edges):
        if len({_who(r) for r in ours}) > 1:
            group = {index[id(r)] for r in ours}
            copied = sorted(
                {f[0] for f, holding in by_file.items() if len(group & set(holding)) > 1}
            )
            listed = ", ".join(copied[:3]) + (", …" if len(copied) > 3 else "")
            yield "same_files", printable(listed, 200), ours


def _shipped_keys(shipped: dict[str, JsonObject]) -> dict[str, list[str]]:
    """Each cluster identity of a shipped snapshot -> the shipped snapshots that carry it."""
    out: dict[str, list[str]] = {}
    for name, data in sorted(shipped.items()):
        for key in _cluster_keys(data):
            out.setdefault(key, []).append(name)
    return out


def _short(value: str, size: int = 8) -> str:
    """A uid or hash as the report names a group by it: its first characters."""
    return printable(value[:size]) + ("…" if len(value) > size else "")


def printable(text: str, limit: int = 120) -> str:
    """``text`` cut to ``limit``, its control characters shown as escapes
    (:func:`gpushare.reports.clean.line`), and so is any other character that shows nothing
    (a zero-width space, a joiner): what a snapshot says, safe on a terminal and seen whole."""
    shown = clean.line(text[:limit])
    shown = "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in shown)
    return shown + ("…" if len(text) > limit else "")
