"""Reading a learner's files without trusting them.

Every read is bounded (size cap, regular files only, so a FIFO or /dev/zero behind a link
cannot hang or flood a grader), and every failure is a value, not an exception: a
:class:`FileProblem` that a check turns into feedback with the file, line and column. YAML is
loaded safely into dicts that remember the line of each key (feedback points at
``k8s/mig-job.yaml:14``), within the bounds of :mod:`gpushare.submissions.bounded`:
:func:`load_yaml_text` is the one way a learner's YAML is read, from their files or from the
cluster (a ConfigMap's data).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import yaml

from gpushare.data import Json, JsonObject
from gpushare.feedback import WORKDIR_ABSENT as WORKDIR_ABSENT  # re-exported: the root it names
from gpushare.feedback import T
from gpushare.submissions import bounded

MAX_BYTES = 1024 * 1024


class LineDict(dict[Json, Json]):
    """A mapping from YAML that knows the line of itself and of each key (1-based)."""

    line: int = 0
    key_lines: dict[Json, int]

    def line_of(self, key: Json) -> int:
        return self.key_lines.get(key, self.line)


def _utf16(raw: bytes) -> bool:
    """Whether NUL-laden bytes are UTF-16 text: what Windows PowerShell's ``>`` writes.

    A byte-order mark, or text whose every other byte is NUL (UTF-16 without a mark, of
    ASCII text) and that decodes as UTF-16: such a file is text the learner can read, saved
    in the wrong encoding, which "binary data" would misdescribe.
    """
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return True
    half = raw[: len(raw) - len(raw) % 2]
    if len(half) < 4:
        return False
    for nuls, order in ((half[1::2], "utf-16-le"), (half[0::2], "utf-16-be")):
        if nuls.count(0) >= len(nuls) * 0.9:
            try:
                half.decode(order)
            except UnicodeDecodeError:
                return False
            return True
    return False


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # see below
    """SafeLoader whose mappings are :class:`LineDict`; nothing but plain data is built.

    libyaml's parser where PyYAML has it (ten times faster; the constructor, and so the safety
    of what is built, is the same SafeConstructor), chosen at run time (hence the ignore).
    """


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            key = str(key)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@dataclass
class FileProblem:
    """Why a file could not be used; ``problem`` is a catalog value with its parameters."""

    path: str
    problem: T
    line: int | None = None
    cause: str | None = None  # the root it follows from (checks.CheckFailed's), if not the file

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


def yaml_kind(value: Json) -> T:
    """What a YAML value is, in the learner's words (never a Python type name)."""
    if isinstance(value, dict):
        return T("yaml_type_mapping")
    if isinstance(value, list):
        return T("yaml_type_list")
    if isinstance(value, bool):
        return T("yaml_type_boolean")
    if isinstance(value, int | float):
        return T("yaml_type_number")
    if value is None:
        return T("yaml_type_null")
    if isinstance(value, str):
        return T("yaml_type_string")
    return T("yaml_type_other")  # dates and timestamps, binary: YAML types we never expect


def load_yaml_text(text: str, origin: str, first_line: int = 1) -> list[Json] | FileProblem:
    """All documents of ``text``; a syntax error (or a bound of
    :mod:`~gpushare.submissions.bounded` hit) is a FileProblem at its line and column.

    PyYAML's own description of the error is kept (in English): it names the token, which a
    translation could not; the sentence around it is the learner's language.
    """
    try:
        docs = bounded.yaml_documents(text, _LineLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(filter(None, [exc.context, exc.problem])) or "syntax error"
        if mark is None:
            return FileProblem(origin, T("yaml_invalid_nowhere", error=what))
        line = mark.line + first_line
        return FileProblem(
            origin, T("yaml_invalid", line=line, column=mark.column + 1, error=what), line
        )
    except (yaml.YAMLError, RecursionError, ValueError, MemoryError) as exc:
        return FileProblem(origin, T("yaml_invalid_nowhere", error=str(exc)[:200]))
    return docs


def link_outside(root: Path, rel: str) -> str | None:
    """Where ``root/rel`` really leads when that is outside ``root`` (a link), else None."""
    base = os.path.realpath(root)
    real = os.path.realpath(os.path.join(base, rel))
    if real == base or real.startswith(base + os.sep):
        return None
    return real


def recorded_problem(rel: str, entry: JsonObject) -> FileProblem:
    """The problem a snapshot's record of ``rel`` stands for (see :class:`Workdir`)."""
    kind = entry.get("kind")
    if kind == "link_outside":
        return FileProblem(rel, T("file_link_outside", target=str(entry.get("target"))))
    if kind == "too_large":
        return FileProblem(rel, T("file_too_large", size=entry.get("size"), limit=MAX_BYTES))
    return FileProblem(rel, T("file_not_regular"))


class Workdir:
    """The learner's work directory (``k8s/``, ``bin/``, ``out/``)."""

    def __init__(self, root: Path, recorded: dict[str, JsonObject] | None = None) -> None:
        """``recorded``: what a snapshot kept instead of a path's content (a link out, a FIFO,
        a file over the cap), so grading the snapshot gives the live work dir's verdict."""
        self.root = root
        self.recorded = recorded or {}
        self._objects: dict[str, list[LineDict] | FileProblem] = {}
        # the paths the checks read (read_text), which `gpushare watch` grades a step again on
        self.touched: set[str] = set()

    @cached_property
    def absent(self) -> bool:
        """Whether the work dir itself is missing (or not a folder): a wrong ``--workdir`` or
        ``WORKDIR=``, not a file the learner forgot. Looked at once per grade."""
        return not self.root.is_dir()

    def _recorded(self, rel: str) -> FileProblem | None:
        """The snapshot's record for ``rel`` or for a folder on its way (``k8s`` -> /tmp)."""
        parts = rel.split("/")
        for n in range(len(parts), 0, -1):
            entry = self.recorded.get("/".join(parts[:n]))
            if entry is not None:
                rest = parts[n:]
                if rest and entry.get("kind") == "link_outside":
                    entry = {**entry, "target": os.path.join(str(entry["target"]), *rest)}
                return recorded_problem(rel, entry)
        return None

    def read_text(self, rel: str) -> str | FileProblem:
        """The file's text with CRLF folded to LF; or why it cannot be read as text. A link
        that leads out of the work dir is a problem, as in a snapshot, which never follows it.
        """
        self.touched.add(rel)
        if self.absent:  # every file fails for that one reason, said once, first (the report)
            return FileProblem(rel, T("workdir_absent", root=str(self.root)), cause=WORKDIR_ABSENT)
        if (recorded := self._recorded(rel)) is not None:
            return recorded
        if (outside := link_outside(self.root, rel)) is not None:
            return FileProblem(rel, T("file_link_outside", target=outside))
        p = self.root / rel
        try:
            st = p.stat()
        except FileNotFoundError:
            if p.is_symlink():
                return FileProblem(rel, T("file_dangling_link"))
            return FileProblem(rel, T("file_missing"))
        except OSError as exc:
            return FileProblem(rel, T("file_unreadable", error=exc.strerror or str(exc)))
        if stat.S_ISDIR(st.st_mode):
            return FileProblem(rel, T("file_is_directory"))
        if not stat.S_ISREG(st.st_mode):
            return FileProblem(rel, T("file_not_regular"))
        if st.st_size > MAX_BYTES:
            return FileProblem(rel, T("file_too_large", size=st.st_size, limit=MAX_BYTES))
        try:
            with open(p, "rb") as fh:
                raw = fh.read(MAX_BYTES + 1)
        except OSError as exc:
            return FileProblem(rel, T("file_unreadable", error=exc.strerror or str(exc)))
        if b"\x00" in raw:
            return FileProblem(rel, T("file_utf16" if _utf16(raw) else "file_binary"))
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            return FileProblem(rel, T("file_not_utf8", line=line), line)
        text = text.replace("\r\n", "\n")
        if not text.strip():
            return FileProblem(rel, T("file_empty"))
        return text

    def yaml_docs(self, rel: str) -> list[Json] | FileProblem:
        """Non-empty YAML documents of a file (``---`` separated)."""
        text = self.read_text(rel)
        if isinstance(text, FileProblem):
            return text
        docs = load_yaml_text(text, rel)
        if isinstance(docs, FileProblem):
            return docs
        return [d for d in docs if d is not None] or FileProblem(rel, T("file_empty"))

    def objects(self, rel: str) -> list[LineDict] | FileProblem:
        """Kubernetes objects of a manifest, flattening ``kind: List``; parsed once per grading
        session (several checks read the same file, which does not change while it is graded).
        """
        if rel not in self._objects:
            self._objects[rel] = self._parse_objects(rel)
        return self._objects[rel]

    def _parse_objects(self, rel: str) -> list[LineDict] | FileProblem:
        docs = self.yaml_docs(rel)
        if isinstance(docs, FileProblem):
            return docs
        out: list[LineDict] = []
        for doc in docs:  # every mapping _LineLoader builds is a LineDict
            if not isinstance(doc, LineDict):
                return FileProblem(
                    rel, T("yaml_not_object", found=yaml_kind(doc)), getattr(doc, "line", None)
                )
            if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                out.extend(i for i in doc["items"] if isinstance(i, LineDict))
            else:
                out.append(doc)
        return out

    def key_values(self, rel: str) -> dict[str, tuple[str, int]] | FileProblem:
        """``KEY=value`` lines: key -> (value, line); blank lines, ``#`` comments and spaces
        around ignored. Any other line is a problem at its line: the learner sees which one."""
        text = self.read_text(rel)
        if isinstance(text, FileProblem):
            return text
        out: dict[str, tuple[str, int]] = {}
        for n, raw in enumerate(text.split("\n"), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                return FileProblem(rel, T("line_not_key_value", line=n, text=line[:80]), n)
            key, _, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if key in out:
                return FileProblem(rel, T("line_duplicate_key", key=key[:80], line=n), n)
            out[key] = (value, n)
        return out
