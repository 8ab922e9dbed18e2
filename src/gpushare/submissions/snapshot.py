"""A submission as one file: the learner's cluster answers and work dir, hashed.

``<learner>-<UTC time>-<hash12>.gpushare.tgz`` is a gzip'd tar with, in this order:

- ``manifest.json``: format version, learner, capture time, gpushare and lab versions, the
  cluster's identity (the kube-system namespace's uid, the server, context and user), the
  learner's python3 and PyYAML versions, what was recorded instead of content (links that
  leave the work dir, FIFOs, files over the cap), the sha256 of every other member and of the
  whole;
- ``cluster.json``: every answer of the apiserver the graders read, taken at capture time
  (the GETs and server-side dry-runs the graders declare), as :meth:`LabState.export` gives them;
- ``work/...``: the work dir as it is: bytes and modes of regular files, folders, and links
  that stay inside it (recorded, never followed).

The whole hash is the sha256 of the sorted ``name sha256`` lines of the members: the
content's identity, independent of tar and gzip metadata. Reading is defensive: size and count
caps before anything is unpacked, tar headers and JSON bounded before they are parsed
(:mod:`gpushare.submissions.bounded`), the shapes checked in one place
(:func:`manifest_problem`, :func:`cluster_problem`), only regular files, folders and links that
stay inside, tarfile's ``data`` filter on top, every hash checked, nothing written outside the
caller's scratch folder. A bad snapshot is :class:`SnapshotError` (one line, exit 2), never
another exception, whatever the bytes.
"""

from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import io
import json
import os
import re
import stat
import subprocess
import tarfile
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpushare import __version__, versions
from gpushare.data import Json, JsonObject
from gpushare.feedback import T
from gpushare.reports import clean
from gpushare.submissions import bounded
from gpushare.submissions.workdir import MAX_BYTES, link_outside

FORMAT = 1
SUFFIX = ".gpushare.tgz"
MAX_ARCHIVE = 32 * 1024 * 1024  # compressed, on disk
MAX_UNPACKED = 64 * 1024 * 1024  # all members' sizes added up
MAX_MEMBERS = 5000
# The lab's cluster answers are some 50 KB; 8 MiB of JSON is at most a few hundred MB parsed
# (eight-byte numbers in one array), which the memory cap of a grade still holds.
MAX_CLUSTER_JSON = 8 * 1024 * 1024
MAX_TEXT = 4096  # a manifest's strings: learner, workdir, the cluster's identity...
# The capture time as :func:`build` writes it (UTC, to the second) and the only one
# :func:`capture_time` reads: whatever else a manifest holds is a time no one wrote by capturing.
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
# what a damaged or cut-short archive raises (tarfile, gzip, JSON; a UnicodeError is a ValueError)
_BROKEN = (tarfile.TarError, EOFError, zlib.error, OSError, ValueError, RecursionError)


class SnapshotError(Exception):
    """The snapshot cannot be written or graded; the message is one line saying why, in English.

    ``kind`` sorts the reasons for whoever is told in their own language (a class report, a
    learner's results): ``unreadable`` (damaged, cut short, not a snapshot at all),
    ``altered`` (changed after capture), ``format`` (made by a gpushare this one cannot read)
    or ``refused`` (holds what is never unpacked: a path leading out, a device, too much).
    ``detail`` says the same without the snapshot's path, as a translatable value.
    """

    KINDS = ("unreadable", "altered", "format", "refused")

    def __init__(self, message: str, kind: str = "unreadable", detail: T | None = None) -> None:
        super().__init__(clean.line(message))  # names in it are the snapshot's: no escapes
        self.kind = kind if kind in self.KINDS else "unreadable"
        self.detail = detail


@dataclass
class Captured:
    """A snapshot in memory: what :func:`write` puts in the file."""

    manifest: JsonObject
    cluster: JsonObject
    work: list[tuple[tarfile.TarInfo, bytes]] = field(default_factory=list)


@dataclass
class Snapshot:
    """A verified snapshot, its work dir unpacked under the caller's scratch folder."""

    path: Path
    manifest: JsonObject
    cluster: JsonObject
    work_root: Path

    @property
    def digest(self) -> str:
        return str(self.manifest["sha256"])

    @property
    def recorded(self) -> dict[str, JsonObject]:
        return dict(self.manifest.get("recorded") or {})


# --------------------------------------------------------------------------- capture


def default_learner() -> str:
    """``$GPUSHARE_LEARNER``, else the user name."""
    return os.environ.get("GPUSHARE_LEARNER") or getpass.getuser()


def safe_name(text: str) -> str:
    """A learner id as it may appear in a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "learner"


def learner_runtime(env: dict[str, str] | None = None) -> dict[str, str]:
    """The python3 and PyYAML versions a learner's script gets from PATH (the lab pod's)."""
    code = "import sys\ntry:\n import yaml; y=yaml.__version__\nexcept Exception: y='none'\n"
    code += "print(sys.version.split()[0], y)"
    cmd = ["python3", "-c", code]
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=10, env=env, stdin=subprocess.DEVNULL
        )
        py, yml = out.stdout.split()
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {"python3": "none", "pyyaml": "none"}
    return {"python3": py, "pyyaml": yml}


def capture_workdir(root: Path) -> tuple[list[tuple[tarfile.TarInfo, bytes]], JsonObject]:
    """The work dir's members, and what is recorded instead of content, as
    :class:`~gpushare.submissions.workdir.Workdir` reports it: a link that leads out (with
    where), a FIFO, socket or device, a file over the reader's cap (by its size alone).

    Walks without following links; a link that stays inside is kept (its target made
    relative). Snapshot files are left out: ``gpushare submit`` writes into the work dir, and
    each submission holding all the earlier ones would double in size every time.
    """
    members: list[tuple[tarfile.TarInfo, bytes]] = []
    recorded: JsonObject = {}
    total = 0
    if not root.is_dir():
        return members, recorded
    base = Path(os.path.realpath(root))
    stack = [""]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(base / folder), key=lambda e: e.name)
        except OSError:
            recorded[folder] = {"kind": "not_regular"}
            continue
        for entry in entries:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            if len(members) + len(recorded) >= MAX_MEMBERS:
                raise SnapshotError(f"the work dir {root} has over {MAX_MEMBERS} entries")
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                outside = link_outside(base, rel)
                if outside is not None:
                    recorded[rel] = {"kind": "link_outside", "target": outside}
                    continue
                target = os.path.relpath(os.path.realpath(base / rel), base / folder)
                members.append((_member(f"work/{rel}", tarfile.SYMTYPE, 0o777, link=target), b""))
            elif stat.S_ISDIR(st.st_mode):
                members.append((_member(f"work/{rel}", tarfile.DIRTYPE, st.st_mode), b""))
                stack.append(rel)
            elif stat.S_ISREG(st.st_mode):
                if entry.name.endswith(SUFFIX):  # an earlier submission: no grader reads it
                    continue
                data = _regular(base / rel, st.st_size)
                if not isinstance(data, bytes):
                    recorded[rel] = data
                    continue
                total += len(data)
                if total > MAX_UNPACKED // 2:
                    raise SnapshotError(f"the work dir {root} holds over {MAX_UNPACKED // 2} bytes")
                member = _member(f"work/{rel}", tarfile.REGTYPE, st.st_mode, len(data))
                members.append((member, data))
            else:
                recorded[rel] = {"kind": "not_regular"}
    return members, recorded


def _member(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
    """A member's header: no owner, no time, no mode bits but rwx."""
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.size, ti.mtime, ti.linkname = kind, mode & 0o755, size, 0, link
    return ti


def _regular(path: Path, size: int) -> bytes | JsonObject:
    """A regular file's content, or what is recorded instead (too large, not readable)."""
    if size > MAX_BYTES:
        return {"kind": "too_large", "size": size}
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_BYTES + 1)
    except OSError:
        return {"kind": "not_regular"}


def build(
    *,
    learner: str,
    cluster: JsonObject,
    identity: JsonObject,
    workdir: Path,
    runtime: dict[str, str],
) -> Captured:
    """A snapshot in memory: cluster answers (from a LabState), identity and the work dir."""
    work, recorded = capture_workdir(workdir)
    manifest = {
        "format": FORMAT,
        "learner": learner,
        "captured_at": time.strftime(TIME_FORMAT, time.gmtime()),
        "gpushare_version": __version__,
        "lab_versions": dict(versions.LAB),
        "cluster": identity,
        "workdir": str(workdir),
        "runtime": runtime,
        "recorded": recorded,
    }
    return Captured(manifest, cluster, work)


def capture_time(text: object) -> dt.datetime | None:
    """A manifest's ``captured_at`` as a UTC time when it is exactly what :func:`build` writes
    (ASCII digits, ``T``, ``Z``, nothing before or after), else None: a zero-width space after
    the ``Z``, another notation or a time zone is no capture's."""
    if not isinstance(text, str) or not _TIME.fullmatch(text):
        return None
    try:
        return dt.datetime.strptime(text, TIME_FORMAT).replace(tzinfo=dt.UTC)
    except ValueError:  # month 13, hour 25
        return None


def _cluster_bytes(cluster: JsonObject) -> bytes:
    raw = json.dumps(cluster, sort_keys=True, ensure_ascii=False).encode()
    if len(raw) > MAX_CLUSTER_JSON:  # said at capture, not when the instructor grades it
        raise SnapshotError(
            f"the cluster's answers are {len(raw)} bytes of JSON, over the {MAX_CLUSTER_JSON} "
            "a snapshot may hold (delete the objects the lab does not need)",
            "refused",
        )
    return raw


def _whole(members: dict[str, str]) -> str:
    lines = "".join(f"{name} {digest}\n" for name, digest in sorted(members.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _member_digest(ti: tarfile.TarInfo, data: bytes) -> str:
    """Content and kind: a link's target and a file's mode are part of what was submitted."""
    h = hashlib.sha256()
    h.update(f"{ti.type.decode()}:{ti.mode & 0o755:o}:{ti.linkname}\0".encode())
    h.update(data)
    return h.hexdigest()


def write(captured: Captured, out: Path | None = None) -> Path:
    """Write the file (atomically) and return its path; ``out`` is a file or a folder."""
    cluster = _cluster_bytes(captured.cluster)
    members = {"cluster.json": hashlib.sha256(cluster).hexdigest()}
    for ti, data in captured.work:
        members[ti.name] = _member_digest(ti, data)
    manifest = dict(captured.manifest, members=members, sha256=_whole(members))
    stamp = manifest["captured_at"].replace("-", "").replace(":", "")
    name = f"{safe_name(manifest['learner'])}-{stamp}-{manifest['sha256'][:12]}{SUFFIX}"
    out = Path(out) if out else Path.cwd()
    path = out / name if out.is_dir() or not out.name.endswith(".tgz") else out
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        head = json.dumps(manifest, indent=1, sort_keys=True).encode()
        with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            for name, data in (("manifest.json", head), ("cluster.json", cluster)):
                tar.addfile(_member(name, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))
            for ti, data in captured.work:
                tar.addfile(ti, io.BytesIO(data) if ti.isreg() else None)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# --------------------------------------------------------------------------- reading


def load(path: Path, scratch: Path) -> Snapshot:
    """Verify ``path`` and unpack its work dir under ``scratch`` (which must be empty)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        error = str(exc.strerror or exc)
        raise SnapshotError(
            f"cannot read snapshot {path}: {error}",
            detail=T("snapshot_unreadable_file", error=error),
        ) from None
    if size > MAX_ARCHIVE:
        raise SnapshotError(
            f"{path} is {size} bytes, over the {MAX_ARCHIVE} a snapshot may be",
            "refused",
            T("snapshot_too_large", size=size, limit=MAX_ARCHIVE),
        )
    try:
        work = scratch / "work"
        work.mkdir(parents=True)
        manifest, cluster_raw, digests = _members(path, scratch)
        _verify(path, manifest, digests)
        return Snapshot(path, manifest, _cluster(path, cluster_raw), work)
    except bounded.TooLarge as exc:
        raise SnapshotError(f"{path}: {exc}", "refused") from None
    except MemoryError:
        raise SnapshotError(f"{path} needs more memory than a grade may use", "refused") from None
    except _BROKEN as exc:
        raise SnapshotError(
            f"{path} is not a readable snapshot (corrupt or truncated: {exc})",
            detail=T("snapshot_corrupt", error=str(exc)[:200]),
        ) from None


def _members(path: Path, scratch: Path) -> tuple[JsonObject, bytes, dict[str, str]]:
    """The manifest, cluster.json's bytes and every member's digest; the work dir unpacked
    under ``scratch`` (bounded: members, bytes, each file's size)."""
    manifest: JsonObject | None = None
    cluster_raw: bytes | None = None
    digests: dict[str, str] = {}
    unpacked = 0
    with bounded.open_tar(path) as tar:
        # one member at a time (never the whole list first: a bomb could be endless)
        for count, ti in enumerate(iter(tar.next, None)):
            unpacked += ti.size
            _within_limits(path, count, unpacked)
            if count == 0:
                if ti.name != "manifest.json" or not ti.isreg() or ti.size > MAX_BYTES:
                    raise SnapshotError(
                        f"{path} does not start with a manifest", detail=T("snapshot_no_manifest")
                    )
                manifest = _manifest(path, _read(tar, ti))
                continue
            if ti.name == "cluster.json" and ti.isreg() and cluster_raw is None:
                if ti.size > MAX_CLUSTER_JSON:
                    raise SnapshotError(
                        f"{path}: cluster.json is too large",
                        "refused",
                        T("snapshot_cluster_too_large"),
                    )
                cluster_raw = _read(tar, ti)
                digests[ti.name] = hashlib.sha256(cluster_raw).hexdigest()
                continue
            data = _unpack(path, tar, ti, scratch)
            digests[ti.name] = _member_digest(ti, data)
    if manifest is None or cluster_raw is None:
        raise SnapshotError(
            f"{path} is incomplete (no manifest or no cluster answers)",
            detail=T("snapshot_incomplete"),
        )
    return manifest, cluster_raw, digests


def _within_limits(path: Path, count: int, unpacked: int) -> None:
    """Refuse an archive of too many members, or one that unpacks to too many bytes."""
    if count >= MAX_MEMBERS:
        raise SnapshotError(
            f"{path} has over {MAX_MEMBERS} members",
            "refused",
            T("snapshot_too_many_members", limit=MAX_MEMBERS),
        )
    if unpacked > MAX_UNPACKED:
        raise SnapshotError(
            f"{path} unpacks to over {MAX_UNPACKED} bytes",
            "refused",
            T("snapshot_unpacks_too_much", limit=MAX_UNPACKED),
        )


def _verify(path: Path, manifest: JsonObject, digests: dict[str, str]) -> None:
    """The members' digests are those the manifest states, and so is the whole's."""
    expected = manifest.get("members") or {}
    if digests != expected or _whole(digests) != manifest.get("sha256"):
        names = set(digests) | set(expected)
        changed = sorted(k for k in names if digests.get(k) != expected.get(k)) or ["the whole"]
        raise SnapshotError(
            f"{path} was altered after capture (sha256 mismatch: {', '.join(changed[:5])})",
            "altered",
            T("snapshot_altered", members=tuple(changed[:5])),
        )


def _cluster(path: Path, cluster_raw: bytes) -> JsonObject:
    """cluster.json parsed (bounded) and of the shape a grade reads."""
    try:
        cluster: JsonObject = bounded.json_loads(cluster_raw, "cluster.json")  # its shape: below
    except bounded.TooLarge:
        raise
    except ValueError as exc:
        raise SnapshotError(
            f"{path}: cluster.json is not usable JSON ({exc})",
            detail=T("snapshot_cluster_not_json", error=str(exc)[:200]),
        ) from None
    problem = cluster_problem(cluster)
    if problem:
        raise SnapshotError(
            f"{path}: cluster.json {problem}", detail=T("snapshot_cluster_shape", problem=problem)
        )
    return cluster


def peek_digest(path: Path) -> str:
    """The content hash the manifest states (its first member, read alone, bounded), or "".
    Not verified here: :func:`load` does that before any grade, so a grade that goes ahead
    had exactly this hash."""
    try:
        if path.stat().st_size > MAX_ARCHIVE:
            return ""
        with bounded.open_tar(path) as tar:
            first = tar.next()
            if first is None or first.name != "manifest.json" or not first.isreg():
                return ""
            if first.size > MAX_BYTES:
                return ""
            manifest = bounded.json_loads(_read(tar, first), "the manifest")
    except Exception:  # whatever it is, load() refuses it with the reason
        return ""
    digest = manifest.get("sha256") if isinstance(manifest, dict) else None
    return digest if isinstance(digest, str) and _HEX64.fullmatch(digest) else ""


def _read(tar: tarfile.TarFile, ti: tarfile.TarInfo) -> bytes:
    fh = tar.extractfile(ti)
    if fh is None:
        raise SnapshotError(
            f"member {ti.name} has no content",
            detail=T("snapshot_member_empty", member=ti.name[:200]),
        )
    data = fh.read(ti.size + 1)
    if len(data) != ti.size:
        raise SnapshotError(
            f"member {ti.name} is truncated",
            detail=T("snapshot_member_truncated", member=ti.name[:200]),
        )
    return data


def _manifest(path: Path, raw: bytes) -> JsonObject:
    try:
        manifest = bounded.json_loads(raw, "the manifest")
    except bounded.TooLarge:
        raise
    except bounded.Malformed as exc:
        raise SnapshotError(
            f"{path}: {exc}", detail=T("snapshot_manifest_shape", problem=str(exc)[:200])
        ) from None
    except ValueError:
        raise SnapshotError(
            f"{path}: the manifest is not usable JSON", "format", T("snapshot_manifest_not_json")
        ) from None
    if not isinstance(manifest, dict):
        raise SnapshotError(
            f"{path}: the manifest is not an object", "format", T("snapshot_manifest_not_object")
        )
    version = manifest.get("format")
    if type(version) is not int or version != FORMAT:  # not True, which == 1
        raise SnapshotError(
            f"{path} has snapshot format {repr(version)[:40]}; this gpushare reads "
            f"format {FORMAT} (gpushare {__version__})",
            "format",
            T("snapshot_format", found=str(version)[:40], format=FORMAT, version=__version__),
        )
    for key in ("learner", "captured_at", "members", "sha256", "cluster"):
        if key not in manifest:
            raise SnapshotError(
                f"{path}: the manifest has no {key}",
                "format",
                T("snapshot_manifest_missing", key=key),
            )
    problem = manifest_problem(manifest)
    if problem:
        raise SnapshotError(
            f"{path}: the manifest's {problem}",
            detail=T("snapshot_manifest_shape", problem=problem[:200]),
        )
    return manifest


# --------------------------------------------------------------------------- shapes
# What every reader of a snapshot may take for granted, checked once, here: the graders, the
# session, the reports and the class code then never meet a list where a mapping belongs.

_HEX64 = re.compile(r"[0-9a-f]{64}")


# a dry-run's refusal: [status, reason, message]
_STATUS = [int, str, str]


def _text(value: Json, limit: int = MAX_TEXT) -> bool:
    return isinstance(value, str) and len(value) <= limit


def _text_map(value: Json, most: int) -> bool:
    """A mapping of at most ``most`` short strings to strings (or null)."""
    return (
        isinstance(value, dict)
        and len(value) <= most
        and all(_text(k, 64) and (v is None or _text(v)) for k, v in value.items())
    )


def manifest_problem(manifest: JsonObject) -> str | None:
    """What is wrong with a manifest's shape ("<field> is ..."), or None."""
    if not _text(manifest["learner"]):
        return "learner is not a name (a string)"
    if not _text(manifest["captured_at"], 64):
        return "captured_at is not a time (a string)"
    if not (isinstance(manifest["sha256"], str) and _HEX64.fullmatch(manifest["sha256"])):
        return "sha256 is not a sha256 (64 hex digits)"
    members = manifest["members"]
    if not (isinstance(members, dict) and len(members) <= MAX_MEMBERS + 1):
        return "members is not a mapping of names to hashes"
    if not all(_text(k) and isinstance(v, str) and _HEX64.fullmatch(v) for k, v in members.items()):
        return "members is not a mapping of names to hashes"
    if not _text_map(manifest["cluster"], 64):
        return "cluster is not a mapping of names to strings"
    for key in ("workdir", "gpushare_version"):
        if key in manifest and not _text(manifest[key]):
            return f"{key} is not a string"
    for key in ("runtime", "lab_versions"):
        if key in manifest and not _text_map(manifest[key], 16):
            return f"{key} is not a mapping of names to strings"
    recorded = manifest.get("recorded") or {}
    if not (isinstance(recorded, dict) and len(recorded) <= MAX_MEMBERS):
        return "recorded is not a mapping of paths to records"
    for rel, entry in recorded.items():
        if not (_text(rel) and isinstance(entry, dict) and _text(entry.get("kind"), 64)):
            return "recorded is not a mapping of paths to records"
        if "target" in entry and not _text(entry["target"]):
            return "recorded is not a mapping of paths to records"
        size = entry.get("size")
        if size is not None and (type(size) is not int or size < 0):
            return "recorded is not a mapping of paths to records"
    return None


def cluster_problem(cluster: Json) -> str | None:
    """What is wrong with cluster.json's shape (see ``LabState.export``), or None.

    Each answer: a GET's ``{"path", "value"}`` (an object, or null for absent) or a dry-run's
    ``{"namespace", "body", "answer"}`` (null for admitted, else ``[status, reason,
    message]``); a list answer's items are objects with a ``metadata.name``.
    """
    if not isinstance(cluster, dict):
        return "is not an object"
    if len(cluster) > 1000:
        return "holds over 1000 answers"
    for key, answer in cluster.items():
        said = repr(key)[:60]
        if not isinstance(answer, dict):
            return f"answer {said} is not an object"
        if "unreadable" in answer and not _text(answer["unreadable"]):
            return f"answer {said}: unreadable is not a string"
        if key.startswith("dry-run:"):
            raw = answer.get("answer")
            if not (raw is None or (isinstance(raw, list) and [type(x) for x in raw] == _STATUS)):
                return f"answer {said}: answer is not null or [status, reason, message]"
            if not (_text(answer.get("namespace"), 253) and isinstance(answer.get("body"), dict)):
                return f"answer {said}: no namespace and body"
            continue
        if "path" in answer and not _text(answer["path"]):
            return f"answer {said}: path is not a string"
        value = answer.get("value")
        if value is None:
            continue
        if not isinstance(value, dict):
            return f"answer {said}: value is not an object"
        objects: list[Json] = [value]
        kind = value.get("kind")
        if "items" in value:
            kind = kind.removesuffix("List") if isinstance(kind, str) else None
            items = value["items"]
            if items is not None and not isinstance(items, list):
                return f"answer {said}: items is not a list"
            objects = items or []
            for item in objects:
                meta = item.get("metadata") if isinstance(item, dict) else None
                if not (isinstance(meta, dict) and isinstance(meta.get("name"), str)):
                    return f"answer {said}: an item has no metadata.name"
        for obj in objects:
            for part in ("metadata", "spec", "status"):
                if obj.get(part) is not None and not isinstance(obj[part], dict):
                    return f"answer {said}: {part} is not an object"
            wrong = _field_problem(obj, obj.get("kind") or kind)
            if wrong:
                return f"answer {said}: {wrong}"
    return None


# Fields of the objects graded (Namespace, Node, ConfigMap, Pod, ResourceQuota) whose type the
# apiserver fixes wherever they appear; the graders read them with that type in mind.
_MAPPINGS = frozenset(
    {"metadata", "spec", "resources", "limits", "requests", "nodeSelector", "affinity",
     "nodeAffinity", "capacity", "allocatable", "hard", "used", "labels", "annotations"}
)  # fmt: skip
_LISTS_OF_MAPPINGS = frozenset(
    {"containers", "initContainers", "conditions", "nodeSelectorTerms", "matchExpressions",
     "tolerations", "taints", "managedFields", "ownerReferences"}
)  # fmt: skip
_STRING_MAPS = frozenset({"labels", "annotations", "nodeSelector"})
_STRINGS = frozenset({"name", "namespace", "uid", "key", "operator", "nodeName", "image"})
# Kinds where a name above means another type: a Role's rules name their ``resources`` (and
# verbs, groups) as lists of strings, where a container's ``resources`` is a mapping.
_RULES_KINDS = frozenset({"Role", "ClusterRole"})
_RULE_LISTS = frozenset({"resources", "verbs", "apiGroups", "resourceNames", "nonResourceURLs"})


def _all_str(values: Iterable[Json]) -> bool:
    return all(isinstance(v, str) for v in values)


def _field_problem(obj: JsonObject, kind: Json = None) -> str | None:
    """The first field of ``obj`` (at any depth) whose type is not the apiserver's, or None.
    A ConfigMap's ``data`` is strings, and a node-selector ``values`` a list of strings;
    ``kind`` (the object's, or its list's) says which meaning a name has (``_RULES_KINDS``)."""
    lists = _RULE_LISTS if kind in _RULES_KINDS else frozenset()
    data = obj.get("data")
    if data is not None and not (isinstance(data, dict) and _all_str(data.values())):
        return "data is not a mapping of strings"
    stack: list[Json] = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if value is None or key == "fieldsV1":  # managedFields: the apiserver's own notes
                continue
            if key in lists or key == "values":  # a node selector's values, a rule's lists
                if not (isinstance(value, list) and _all_str(value)):
                    return f"{key} is not a list of strings"
                continue
            if key in _MAPPINGS and not isinstance(value, dict):
                return f"{key} is not an object"
            if key in _LISTS_OF_MAPPINGS and not (
                isinstance(value, list) and all(isinstance(v, dict) for v in value)
            ):
                return f"{key} is not a list of objects"
            if key in _STRING_MAPS and not _all_str(value.values()):
                return f"{key} is not a mapping of strings"
            if key in _STRINGS and not isinstance(value, str):
                return f"{key} is not a string"
            stack.append(value)
    return None


def _unpack(path: Path, tar: tarfile.TarFile, ti: tarfile.TarInfo, scratch: Path) -> bytes:
    """Write one ``work/`` member under ``scratch``; refuse anything that could leave it."""
    name = ti.name

    def refused(key: str, why: str) -> SnapshotError:
        return SnapshotError(f"{path}: {why}", "refused", T(key, member=name[:200]))

    if not name.startswith("work/"):
        raise refused("snapshot_unexpected_member", f"unexpected member {name!r}")
    if not (ti.isreg() or ti.isdir() or ti.issym()):
        raise refused("snapshot_special_member", f"member {name!r} is a device, FIFO or hard link")
    if ".." in name.split("/"):
        raise refused("snapshot_climbs_out", f"member {name!r} refused: it climbs out")
    data_filter = getattr(tarfile, "data_filter", None)  # Python 3.11.4+: a second opinion
    if data_filter is not None:
        try:
            data_filter(ti, str(scratch))
        except tarfile.FilterError as exc:
            raise SnapshotError(
                f"{path}: a member that cannot be unpacked safely, refused ({exc})",
                "refused",
                T("snapshot_hostile", error=str(exc)[:200]),
            ) from None
    dest = os.path.join(scratch, name)
    os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)  # a folder left out
    parent = os.path.realpath(os.path.dirname(dest))
    root = os.path.realpath(scratch / "work")
    if not (parent == root or parent.startswith(root + os.sep)):
        raise refused("snapshot_outside", f"member {name!r} would be written outside the work dir")
    if ti.issym():
        target = os.path.realpath(os.path.join(os.path.dirname(dest), ti.linkname))
        if not (target == root or target.startswith(root + os.sep)):
            raise refused("snapshot_link_outside", f"link {name!r} points out of the work dir")
        os.symlink(ti.linkname, dest)
        return b""
    if ti.isdir():
        os.makedirs(dest, mode=0o755, exist_ok=True)
        return b""
    data = _read(tar, ti)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(dest, (ti.mode or 0o644) & 0o755)
    return data
