"""Who a submission belongs to, and the folder its results go to.

A snapshot is written on the learner's side: its manifest's ``learner`` is whatever the learner
(or someone else) typed. For a class grade, the instructor's own layout therefore decides whose
a file is, in this order:

1. ``--roster FILE``: a CSV with the columns ``file`` and ``learner`` (a path relative to the
   PATH the file was found under, or a bare file name);
2. a Gradescope export: ``submission_metadata.yml`` beside the ``submission_<id>/`` folders maps
   each folder to its submitters (``:sid:``, else ``:email:``, else ``:name:``; a group is one
   row named ``sid1+sid2``);
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
``report.html``). A name over :data:`MAX_BYTES` bytes is cut and given ``~`` and a hash of the
whole (an uncut name never holds a ``~``: no name can pass for a cut one).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import yaml

# Everything the class run writes at the top of --out (compared case-insensitively: a folder
# copied to a case-insensitive file system must not land on one of them either).
RESERVED = frozenset({"class.json", "grades.csv", "report.html"})
MAX_BYTES = 200
_HASH = 16  # hex digits of the hash a cut name ends with
# Windows forbids these; % is the escape itself; ~ ends a cut name (so no uncut name can be one)
_WINDOWS = set('\\/:*?"<>|%~')
GRADESCOPE_METADATA = "submission_metadata.yml"
_MAX_METADATA = 16 * 1024 * 1024
_MAX_ROSTER = 16 * 1024 * 1024
_CANVAS = re.compile(r"^(?P<name>[^_/]+?)(?P<late>_LATE)?_(?P<user>\d+)_(?P<sub>\d+)_.+$")
_MOODLE = re.compile(r"^(?P<name>.+)_(?P<id>\d+)_assignsubmission_file_(?P<rest>.*)$")

SOURCES = ("roster", "gradescope", "canvas", "moodle", "folder", "manifest", "file name")
TRUSTED = frozenset(SOURCES[:5])  # decided by the instructor's side, not the snapshot


class LayoutError(Exception):
    """The instructor's roster or export cannot be read; one line, exit 2."""


def _escape(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))


def _needs_escape(ch: str) -> bool:
    return ch in _WINDOWS or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def folder_name(learner: str) -> str:
    """``learner`` as one folder name under the class folder (see the module's rules)."""
    out = [_escape(ch) if _needs_escape(ch) else ch for ch in learner]
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


def _cap(name: str, learner: str) -> str:
    if len(name.encode()) <= MAX_BYTES:
        return name
    digest = hashlib.sha256(learner.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]
    room = MAX_BYTES - _HASH - 1
    cut = name.encode()[:room].decode("utf-8", "ignore")
    cut = re.sub(r"%[0-9A-F]?$", "", cut)  # never half an escape
    return f"{cut}~{digest}"


@dataclass(frozen=True)
class Placed:
    """Whose a file is by the instructor's layout, and what the layout says besides."""

    learner: str
    source: str  # one of SOURCES[:5]
    late: bool = False  # the LMS marked it late
    aliases: tuple[str, ...] = ()  # other names the layout knows the learner by

    def names(self, claimed: str) -> bool:
        """Whether a manifest's ``claimed`` learner is this one (case, spaces and punctuation
        aside: ``Jane Doe`` is ``janedoe``)."""
        want = _loose(claimed)
        return bool(want) and any(want == _loose(n) for n in (self.learner, *self.aliases))


def _loose(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch.isalnum())


class Layout:
    """The instructor's side of identity: a roster, the Gradescope exports found, and the
    PATHs the snapshots were found under."""

    def __init__(self, roster: Path | None = None) -> None:
        self.roster = read_roster(roster) if roster else None
        self._gradescope: dict[Path, dict[str, tuple[str, tuple[str, ...]]]] = {}

    def place(self, path: Path, root: Path | None) -> Placed | None:
        """Whose ``path`` is by the layout, or None when the layout does not say."""
        rel = _relative(path, root)
        if self.roster is not None:
            for key in (rel.as_posix(), path.name):
                if key in self.roster:
                    return Placed(self.roster[key], "roster")
        if root is not None:
            found = self._gradescope_of(path, root)
            if found is not None:
                return found
        for part in rel.parts:
            moodle = _MOODLE.match(part)
            if moodle:
                name = moodle["name"]
                return Placed(f"{name}_{moodle['id']}", "moodle", aliases=(name,))
        canvas = _CANVAS.match(path.name)
        if canvas:  # wherever it was unpacked: a folder above it is not a learner's then
            late = bool(canvas["late"])
            name = canvas["name"]
            return Placed(f"{name}_{canvas['user']}", "canvas", late, aliases=(name,))
        if root is not None and len(rel.parts) >= 2:
            return Placed(rel.parts[0], "folder")
        return None

    def _gradescope_of(self, path: Path, root: Path) -> Placed | None:
        """The submitters of the ``submission_<id>/`` folder ``path`` is in, when a
        ``submission_metadata.yml`` beside that folder names it."""
        for folder in path.parents:
            if folder == root or root not in folder.parents:
                break
            meta = folder.parent / GRADESCOPE_METADATA
            if meta.is_file():
                names = self._metadata(meta)
                if folder.name in names:
                    learner, aliases = names[folder.name]
                    return Placed(learner, "gradescope", aliases=aliases)
        return None

    def _metadata(self, meta: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
        if meta not in self._gradescope:
            self._gradescope[meta] = read_gradescope(meta)
        return self._gradescope[meta]


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
        data = yaml.safe_load(meta.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise LayoutError(f"{meta}: not a Gradescope export's metadata ({exc})") from None
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
                name = who.get(":sid") or who.get(":email") or who.get(":name")
                if name:
                    ids.append(str(name))
                for key in (":sid", ":email", ":name"):
                    if who.get(key):
                        aliases.append(str(who[key]))
                if who.get(":email"):
                    aliases.append(str(who[":email"]).split("@")[0])
        if ids:
            out[str(folder)] = ("+".join(sorted(ids)), tuple(aliases))
    return out
