"""Who a submission belongs to, and the folder its results go to.

A snapshot is written on the learner's side: its manifest's ``learner`` is whatever the learner
(or someone else) typed. For a class grade, the instructor's own layout therefore decides whose
a file is, in this order:

1. ``--roster FILE``: a CSV with the columns ``file`` and ``learner`` (a path relative to the
   PATH the file was found under, or a bare file name);
2. a Gradescope export: the export's own ``submission_metadata.yml``, at the top of the PATH
   given, beside the ``submission_<id>/`` folders, maps each folder to its submitters
   (``:sid:``, else ``:email:``, else ``:name:``; a group is one row named ``sid1+sid2``). That
   is the export's shape as its readers take it: one root folder holding the metadata file
   and a folder per submission (ucbds-infra/otter-grader ``otter/grade/metadata.py``,
   ``GradescopeParser.__init__``, commit 3b7c5b05e60e, reads
   ``<submissions_dir>/submission_metadata.yml``, each top-level key a folder of that
   directory, ``:submitters`` a list of ``:name``, ``:sid``, ``:email``). A metadata file
   anywhere below the PATH lies inside what a learner uploaded (a submission folder holds the
   learner's files as they sent them): it is never read, and the run says it was ignored
   (:attr:`Layout.notes`) and flags the files below it;
3. a Moodle download: ``<Full Name>_<participantid>_assignsubmission_file_/<file>`` (or the same
   as a file name prefix), the learner ``<Full Name>_<participantid>``;
4. a Canvas bulk download (a flat folder, wherever it was unpacked) of
   ``<sortablename>[_LATE]_<userid>_<submissionid>_<filename>``: the learner
   ``<sortablename>_<userid>`` (a sortable name alone is not unique); ``_LATE_`` is kept as a flag;
5. a folder per learner: ``PATH/<learner>/...``;
6. only when none of these says: the manifest's ``learner`` (else the learner part of the file
   name ``gpushare snapshot`` writes, else the file name).

Folder names (:func:`folder_name`) are reversible and collision-free: Unicode letters stay as
they are (``张三``), ``zhang san`` and ``zhang_san`` stay two folders; what a file system or a
shell cannot hold is percent-encoded (``%``, ``~``, ``/``, ``\\``, control and format characters,
the characters Windows forbids, a leading ``.`` or ``-``, a trailing ``.`` or space), and so is
the first character of a name the class folder uses itself (``class.json``, ``grades.csv``,
``report.html``) and, for the folder of a snapshot's own row inside a learner's
(:func:`leaf_name`), of a file a row writes (``results.json``, ``junit.xml``). A name over
:data:`MAX_BYTES` bytes is cut and given ``~`` and a hash of the whole (an uncut name never
holds a ``~``: no name can pass for a cut one). Names of one class that are equal under
:func:`fold` (``Alice``, ``ALICE``; the Kelvin sign and ``K``; fullwidth letters; NFC and NFD)
would be one folder on a case-insensitive or normalising file system (macOS, Windows, a zip
opened there): :func:`distinct` gives all but the first ``~`` and a hash of their own id.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpushare.submissions import bounded

# Everything the class run, and `class export` after it, write at the top of --out (compared
# case-insensitively: a folder copied to a case-insensitive file system must not land on one of
# them either). The export's names are lms.canvas/moodle FILE and UNMAPPED, spelt here because
# lms imports classroom, not the other way (tests/test_lms_export.py holds the two lists equal).
RESERVED = frozenset(
    {
        "class.json",
        "grades.csv",
        "report.html",
        "canvas-import.csv",
        "canvas-unmapped.csv",
        "moodle-import.csv",
        "moodle-unmapped.csv",
    }
)
# What a row writes in its own folder: a snapshot's row folder inside a learner's never takes
# one of these names (``results.json.gpushare.tgz`` is a file name like any other).
ROW_FILES = frozenset({"results.json", "junit.xml"})
MAX_BYTES = 200
_HASH = 16  # hex digits of the hash a cut name ends with
# Windows forbids these; % is the escape itself; ~ ends a cut name (so no uncut name can be one)
_WINDOWS = set('\\/:*?"<>|%~')
# controls, format, surrogates, private use, unassigned, line and paragraph separators
_UNSEEN = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
GRADESCOPE_METADATA = "submission_metadata.yml"
_MAX_METADATA = 16 * 1024 * 1024
# values of the export's metadata once aliases are expanded: some 130 a submission with a long
# history, so 7 000 submissions; what a plain file of the size cap could hold at most
_METADATA_NODES = 1_000_000
_SUFFIX_HEX = 8  # hex digits of the hash that tells apart folder names equal under fold
_MAX_ROSTER = 16 * 1024 * 1024
_CANVAS = re.compile(r"^(?P<name>[^_/]+?)(?P<late>_LATE)?_(?P<user>\d+)_(?P<sub>\d+)_.+$")
_MOODLE = re.compile(r"^(?P<name>.+)_(?P<id>\d+)_assignsubmission_file_(?P<rest>.*)$")

SOURCES = ("roster", "gradescope", "canvas", "moodle", "folder", "manifest", "file name")
TRUSTED = frozenset(SOURCES[:5])  # decided by the instructor's side, not the snapshot


class LayoutError(Exception):
    """The instructor's roster or export cannot be read; one line, exit 2."""


def _escape(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))


def folder_name(learner: str) -> str:
    """``learner`` as one folder name under the class folder (see the module's rules)."""
    out = [
        _escape(ch) if ch in _WINDOWS or unicodedata.category(ch) in _UNSEEN else ch
        for ch in learner
    ]
    if not out:
        return "%"  # no name at all (never made by :func:`decide`, which always finds one)
    if out[0] in (".", "-"):
        out[0] = _escape(out[0])
    if out[-1] in (".", " "):
        out[-1] = _escape(out[-1])
    name = "".join(out)
    if name.casefold() in RESERVED:
        name = _escape(name[0]) + name[1:]
    return _cap(name, learner)


def leaf_name(stem: str) -> str:
    """The folder of one snapshot's row inside its learner's folder: :func:`folder_name` of its
    file name (without the suffix), never one of the files a row writes (:data:`ROW_FILES`)."""
    name = folder_name(stem)
    if name.casefold() in ROW_FILES:
        name = _escape(name[0]) + name[1:]
    return name


def fold(name: str) -> str:
    """``name`` as a case-insensitive, normalising file system (or a reader) may take it: NFKC
    and case folding (``ALICE``, ``Ａlice`` and ``alice`` are one; so are ``\u212a`` and ``k``)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def distinct(items: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(folder name, what it stands for) -> a folder name equal under :func:`fold` to no other
    one's.

    What a name stands for is the learner's id, or a snapshot's place: of the names that fold
    alike, the first (by name, then by what it stands for) keeps its own, and each other is
    given ``~`` and a hash of what it stands for, so the same learner keeps the same folder
    from one run to the next. A name that folds alike to no other is kept as it is."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for item in sorted(set(items)):
        groups.setdefault(fold(item[0]), []).append(item)
    taken = set(groups)
    out: dict[tuple[str, str], str] = {}
    for group in groups.values():
        out[group[0]] = group[0][0]
        for name, meaning in group[1:]:
            digest, size = _digest(meaning), _SUFFIX_HEX
            candidate = _tagged(name, digest[:size])
            while fold(candidate) in taken:
                size += 4
                candidate = _tagged(
                    name, digest[:size] if size <= len(digest) else f"{digest}{size}"
                )
            taken.add(fold(candidate))
            out[(name, meaning)] = candidate
    return out


def _cap(name: str, learner: str) -> str:
    fits = len(name.encode()) <= MAX_BYTES
    return name if fits else _tagged(name, _digest(learner)[:_HASH])


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _tagged(name: str, tag: str) -> str:
    """``name`` cut to :data:`MAX_BYTES` with ``~`` and ``tag`` (never half an escape)."""
    cut = name.encode()[: MAX_BYTES - len(tag) - 1].decode("utf-8", "ignore")
    return f"{re.sub(r'%[0-9A-F]?$', '', cut)}~{tag}"


@dataclass(frozen=True)
class Placed:
    """Whose a file is by the instructor's layout, and what the layout says besides."""

    learner: str
    source: str  # one of SOURCES[:5]
    late: bool = False  # the LMS marked it late
    aliases: tuple[str, ...] = ()  # other names the layout knows the learner by
    # what of the layout placed it: the PATH's top-level entry (a learner's folder, an LMS
    # submission), so that two places that name one learner are told apart (Layout.place)
    origin: str = ""

    def names(self, claimed: str) -> bool:
        """Whether a manifest's ``claimed`` learner is this one (case, spaces and punctuation
        aside: ``Jane Doe`` is ``janedoe``)."""
        want = _loose(claimed)
        return bool(want) and any(want == _loose(n) for n in (self.learner, *self.aliases))


def _loose(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch.isalnum())


class Layout:
    """The instructor's side of identity: a roster, the Gradescope export at the top of each
    PATH, and the PATHs the snapshots were found under.

    :meth:`survey` reads what needs the whole class first: every PATH's export metadata (a
    bad one is a :class:`LayoutError`), the metadata files below a PATH, which are ignored and
    said (:attr:`notes`, :meth:`stray_of`), and a roster's bare file names, each of which must
    name one file of the class."""

    def __init__(self, roster: Path | None = None) -> None:
        self.roster = read_roster(roster) if roster else None
        self._gradescope: dict[Path, dict[str, tuple[str, tuple[str, ...]]]] = {}
        self._ignored: dict[Path, Path] = {}  # a folder below a PATH -> its metadata file
        self.notes: list[str] = []  # what the layout ignored, one line each, for the summary

    def survey(self, found: list[tuple[Path, Path | None]]) -> None:
        """Read the whole class's layout once, before any file is placed (see the class)."""
        for root in sorted({r for _p, r in found if r is not None}):
            self._metadata(root)
            for meta in sorted(root.rglob(GRADESCOPE_METADATA)):
                if meta.parent == root or not meta.is_file():
                    continue
                self._ignored[meta.parent] = meta
                hint = ""
                if any(p.name.startswith("submission_") for p in meta.parent.iterdir()):
                    hint = f"; if it is an export's own, give {meta.parent} itself as PATH"
                self.notes.append(
                    f"ignored {meta}: a {GRADESCOPE_METADATA} below PATH is part of a "
                    f"learner's upload, never who a file belongs to{hint}"
                )
        self._check_bare_names(found)

    def _check_bare_names(self, found: list[tuple[Path, Path | None]]) -> None:
        """A roster entry that is a bare file name must name one file of the class: a learner
        who names a file like a classmate's entry would otherwise take the classmate's row."""
        if self.roster is None:
            return
        named: dict[str, tuple[Path, Path]] = {}
        for path, root in found:
            rel = _relative(path, root)
            if len(rel.parts) > 1 and rel.as_posix() in self.roster:
                continue  # named by its own path
            if path.name in self.roster:
                held, held_rel = named.setdefault(path.name, (path, rel))
                if held != path:
                    raise LayoutError(
                        f"--roster names {path.name} by its bare name, which is found twice: "
                        f"{held} and {path}; name each file by its path under PATH "
                        f"(e.g. {held_rel.as_posix()})"
                    )

    def stray_of(self, path: Path, root: Path | None) -> str:
        """The ignored metadata file in a folder above ``path`` (below its PATH), relative to
        the PATH, or "": a learner's upload that tried to say whose its files are."""
        if root is None:
            return ""
        for folder in path.parents:
            if folder == root or root not in folder.parents:
                break
            if folder in self._ignored:
                return self._ignored[folder].relative_to(root).as_posix()
        return ""

    def place(self, path: Path, root: Path | None) -> Placed | None:
        """Whose ``path`` is by the layout, or None when the layout does not say."""
        rel = _relative(path, root)
        top = rel.parts[0] if len(rel.parts) > 1 else ""
        where = _origin(root, top)
        if self.roster is not None:
            for key in (rel.as_posix(), path.name):
                if key in self.roster:
                    return Placed(self.roster[key], "roster", origin=where)
        if root is not None and top:
            names = self._metadata(root)
            if top in names:
                learner, aliases = names[top]
                return Placed(learner, "gradescope", aliases=aliases, origin=where)
        for i, part in enumerate(rel.parts):
            if moodle := _MOODLE.match(part):
                name = moodle["name"]
                origin = _origin(root, "/".join(rel.parts[: i + 1]))
                return Placed(f"{name}_{moodle['id']}", "moodle", aliases=(name,), origin=origin)
        if canvas := _CANVAS.match(path.name):  # wherever it was unpacked: no learner's folder
            late = bool(canvas["late"])
            name = canvas["name"]
            origin = _origin(root, f"canvas {canvas['user']} {canvas['sub']}")
            return Placed(f"{name}_{canvas['user']}", "canvas", late, (name,), origin)
        if root is not None and top:
            return Placed(top, "folder", origin=where)
        return None

    def _metadata(self, root: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The submitters of each ``submission_<id>/`` folder of the export at ``root`` (the
        PATH itself), or {} when it holds no metadata file."""
        if root not in self._gradescope:
            meta = root / GRADESCOPE_METADATA
            self._gradescope[root] = read_gradescope(meta) if meta.is_file() else {}
        return self._gradescope[root]


def _origin(root: Path | None, top: str) -> str:
    """Where in the layout a placement comes from: the PATH (by a short hash, so two PATHs
    with folders of one name stay two) and its top-level entry."""
    tag = _digest(str(root))[:8] if root else ""
    return f"{tag}:{top}"


def _relative(path: Path, root: Path | None) -> Path:
    return path.relative_to(root) if root and path.is_relative_to(root) else Path(path.name)


def read_roster(path: Path) -> dict[str, str]:
    """``file`` -> ``learner`` of a roster CSV (UTF-8, a header row naming both columns)."""
    try:
        if path.stat().st_size > _MAX_ROSTER:
            raise LayoutError(f"--roster {path}: over {_MAX_ROSTER} bytes")
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"--roster {path}: cannot be read ({exc})") from None
    rows = csv.DictReader(io.StringIO(raw))
    fields = [f.strip().lower() for f in rows.fieldnames or []]
    if "file" not in fields or "learner" not in fields:
        raise LayoutError(f"--roster {path}: needs a header row with the columns file,learner")
    rows.fieldnames = fields
    out: dict[str, str] = {}
    for number, row in enumerate(rows, start=2):
        file, learner = (row.get("file") or "").strip(), (row.get("learner") or "").strip()
        if not file and not learner:
            continue
        if not file or not learner:
            raise LayoutError(f"--roster {path}:{number}: a row needs both a file and a learner")
        if out.get(file, learner) != learner:
            raise LayoutError(f"--roster {path}:{number}: {file} is given to two learners")
        out[file] = learner
    return out


def read_gradescope(meta: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``submission_<id>`` -> (learner, other names) of a Gradescope export's metadata: the
    submitters' SIDs (else e-mail, else name), joined with ``+`` for a group; the names and
    e-mail addresses (and their local parts) as the other names."""
    try:
        if meta.stat().st_size > _MAX_METADATA:
            raise LayoutError(f"{meta}: over {_MAX_METADATA} bytes")
        text = meta.read_text(encoding="utf-8")
        # bounded: an anchored list of submitters aliased by every folder is counted expanded
        # libyaml's safe loader where PyYAML was built with it, else the pure-Python one
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        docs = bounded.yaml_documents(text, loader, nodes=_METADATA_NODES)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split())[:300]
        raise LayoutError(f"{meta}: not a Gradescope export's metadata ({reason})") from None
    data = docs[0] if len(docs) == 1 else None
    if not isinstance(data, dict):
        raise LayoutError(f"{meta}: not a Gradescope export's metadata (no submission folders)")
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for folder, entry in data.items():
        submitters = entry.get(":submitters") if isinstance(entry, dict) else None
        if not isinstance(submitters, list):
            continue
        ids, aliases = [], []
        for who in submitters:
            if isinstance(who, dict):
                given = [str(who[key]) for key in (":sid", ":email", ":name") if who.get(key)]
                ids += given[:1]  # the SID, else the e-mail address, else the name
                aliases += given
                if who.get(":email"):
                    aliases.append(str(who[":email"]).split("@")[0])
        if ids:
            out[str(folder)] = ("+".join(sorted(ids)), tuple(aliases))
    return out
