"""Parsing a stranger's bytes within bounds that are checked before anything is expanded.

Every YAML, JSON and tar header a learner wrote (their work dir's files, a snapshot's
``manifest.json`` and ``cluster.json``, the snapshot's tar headers) is read through this
module, because the standard parsers trust their input in ways a grader cannot:

- **YAML aliases.** ``&a [*b, *b, ...]`` nine levels deep is 600 bytes that PyYAML loads into
  a small graph of shared objects, and that anything walking it (``json.dumps``, a deep copy)
  expands to 9^9 nodes: 1 GB and 14 s in a grader before these bounds. The documents are
  composed first, measured as they would be expanded (without expanding them), and only then
  constructed: at most :data:`MAX_YAML_NODES` nodes over all documents of a file,
  :data:`MAX_YAML_DOCUMENTS` documents, nesting at most :data:`MAX_DEPTH`, no alias that
  points into itself.
- **JSON.** ``json.loads`` has no size bound of its own and fails deep input with a
  RecursionError: a snapshot's JSON may hold at most :data:`MAX_JSON_CONTAINERS` objects and
  arrays (counted on the raw bytes, before parsing), nest at most :data:`MAX_DEPTH`, and hold
  no lone surrogate (a string no UTF-8 writer can write: results.json would fail on it).
- **Tar headers.** tarfile reads a GNU long-name or a pax header whole, whatever size its
  512-byte header claims, before any caller sees the member: 1 MB of long name cost 1 GB of
  memory, 7.5 MB asked for 16 GiB. :func:`open_tar` checks the claimed size in the header
  itself and refuses more than :data:`MAX_TAR_HEADER` bytes, or a chain of more than
  :data:`MAX_TAR_EXTENSIONS` such headers, before tarfile reads the body.

Limits are far above what the lab's files ever hold (the reference solution's largest YAML
file has 90 values, its cluster.json 1 400 objects and arrays nested 15 deep), and far below what
costs the grader memory. A bound that is hit is :class:`TooLarge` (or a YAML error with a line
and column, for the learner's feedback), never a crash.
"""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import yaml

from gpushare.data import Json

# Nesting of YAML and JSON: a Kubernetes object nests about 15 deep (managedFields included);
# Python code that walks a value recursively (json.dumps, a grader) fails near 1000.
MAX_DEPTH = 100
# YAML nodes of one file after aliases are expanded (a scalar, a list, a mapping each count 1):
# a lab manifest has under a hundred; 100 000 expanded is some 10 MB as JSON.
MAX_YAML_NODES = 100_000
MAX_YAML_DOCUMENTS = 1000
# Objects and arrays of one JSON text, counted as "{" and "[" bytes (strings included, so an
# upper bound): 200 000 is a few tens of MB once parsed; the lab's cluster.json has ~1 400.
MAX_JSON_CONTAINERS = 200_000
# A GNU long name / long link or pax header's body, and how many may precede one member.
MAX_TAR_HEADER = 64 * 1024
MAX_TAR_EXTENSIONS = 4
# A member's name or link target (PATH_MAX).
MAX_TAR_NAME = 4096

_SURROGATE = re.compile("[\ud800-\udfff]")


class TooLarge(ValueError):
    """A bound of this module was hit; the message says which, in one line."""


class Malformed(ValueError):
    """JSON that parses but cannot be used (a lone surrogate); one line."""


# --------------------------------------------------------------------------- YAML


class YamlBoundError(yaml.MarkedYAMLError):
    """A YAML text over a bound: a YAML error with the line and column where it was hit, so the
    learner's feedback points at it like any other YAML error."""


class _Loader(Protocol):
    """What :func:`yaml_documents` uses of a PyYAML loader."""

    def check_node(self) -> bool: ...
    def get_node(self) -> yaml.Node | None: ...
    def construct_document(self, node: yaml.Node) -> Json: ...
    def dispose(self) -> None: ...


def yaml_documents(
    text: str, loader: Callable[[str], _Loader], nodes: int = MAX_YAML_NODES
) -> list[Json]:
    """Every document of ``text``, as ``yaml.load_all(text, Loader=loader)`` (a SafeLoader or
    CSafeLoader class) gives them, each measured before it is constructed; raises
    ``yaml.YAMLError`` (:class:`YamlBoundError` for a bound). ``nodes``: the values all
    documents may hold once aliases are expanded (an LMS export of a large class holds more).
    """
    reader = loader(text)
    docs: list[Json] = []
    budget = nodes
    try:
        while reader.check_node():
            node = reader.get_node()
            if len(docs) >= MAX_YAML_DOCUMENTS:
                raise YamlBoundError(
                    None,
                    None,
                    f"more than {MAX_YAML_DOCUMENTS} documents (gpushare reads at most that many)",
                    getattr(node, "start_mark", None),
                )
            if node is not None:
                budget -= _measure(node, budget, nodes)
            docs.append(reader.construct_document(node) if node is not None else None)
    finally:
        reader.dispose()
    return docs


def yaml_first_node(text: str, loader: Callable[[str], _Loader]) -> tuple[yaml.Node | None, bool]:
    """The first document of ``text``, composed and measured but not constructed (None for an
    empty stream), and whether another follows it: for a reader that decodes only the first,
    as Go's yaml.v2 ``Unmarshal`` does. Raises as :func:`yaml_documents` does."""
    reader = loader(text)
    try:
        node = reader.get_node() if reader.check_node() else None
        if node is not None:
            _measure(node, MAX_YAML_NODES)
        try:
            more = reader.check_node()
        except yaml.YAMLError:  # a broken second document: not the first one's reader's
            more = True
    finally:
        reader.dispose()
    return node, more


def _measure(root: yaml.Node, budget: int, limit: int = MAX_YAML_NODES) -> int:
    """How many nodes ``root`` has once its aliases are expanded; YamlBoundError when that is
    over ``budget``, it nests deeper than :data:`MAX_DEPTH`, or an alias points into itself.

    Each distinct node is visited once (an alias is the node it names: composing shares it),
    without recursion, so a 600-byte bomb is measured in microseconds and never expanded.
    """
    scalar, mapping = yaml.ScalarNode, yaml.MappingNode
    done: dict[int, tuple[int, int]] = {}  # node -> (expanded size, depth)
    on_path: set[int] = set()  # the collections whose children are being measured
    stack: list[tuple[yaml.Node, list[yaml.Node] | None]] = [(root, None)]
    while stack:
        node, kids = stack[-1]
        key = id(node)
        if kids is None:  # first visit
            if key in done or isinstance(node, scalar):
                done.setdefault(key, (1, 1))
                stack.pop()
                continue
            if isinstance(node, mapping):
                kids = [part for pair in node.value for part in pair]
            else:
                kids = list(node.value)
            stack[-1] = (node, kids)
            on_path.add(key)
            for kid in kids:
                if id(kid) in on_path:
                    raise YamlBoundError(
                        None, None, "an alias refers to a node that contains it", kid.start_mark
                    )
                if not isinstance(kid, scalar) and id(kid) not in done:
                    stack.append((kid, None))
            continue
        stack.pop()  # every child measured
        on_path.discard(key)
        total, deep = 1, 1
        for kid in kids:
            size, depth = (1, 1) if isinstance(kid, scalar) else done[id(kid)]
            total += size
            deep = max(deep, depth + 1)
        if total > budget:
            raise YamlBoundError(
                None,
                None,
                f"more than {limit} values once its aliases are expanded "
                "(gpushare reads at most that many)",
                node.start_mark,
            )
        if deep > MAX_DEPTH:
            raise YamlBoundError(
                None, None, f"nested more than {MAX_DEPTH} levels deep", node.start_mark
            )
        done[key] = (total, deep)
    return done[id(root)][0]


# --------------------------------------------------------------------------- JSON


def json_loads(raw: bytes | str, what: str) -> Json:
    """``json.loads(raw)`` within bounds; TooLarge or Malformed (``what`` names the text),
    ValueError for text that is not JSON."""
    data = raw.encode() if isinstance(raw, str) else raw
    containers = data.count(b"{") + data.count(b"[")
    if containers > MAX_JSON_CONTAINERS:
        raise TooLarge(
            f"{what} has over {MAX_JSON_CONTAINERS} objects and arrays (at most that many are read)"
        )
    try:
        value = json.loads(data)
    except RecursionError:
        raise TooLarge(f"{what} nests more than {MAX_DEPTH} levels deep") from None
    check_json(value, what)
    return value


def check_json(value: Json, what: str) -> None:
    """Depth and strings of parsed JSON (walked without recursion)."""
    stack: list[tuple[Json, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise Malformed(f"{what} holds a string that is not valid Unicode")
            continue
        if isinstance(item, dict):
            children = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > MAX_DEPTH:
            raise TooLarge(f"{what} nests more than {MAX_DEPTH} levels deep")
        stack.extend((child, level + 1) for child in children)


# --------------------------------------------------------------------------- tar

_EXTENSIONS = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)


class _BoundedInfo(tarfile.TarInfo):
    """A TarInfo that checks what a header claims before tarfile reads what follows it.

    ``_proc_member`` is where tarfile, having parsed the 512-byte header, dispatches on its
    type, and reads a long-name or pax header's body whole right after. (Private, but the same
    since Python 2.5; tests/test_hostile_snapshots.py fails if a Python changes it.)
    """

    def _proc_member(self, archive: _BoundedTar) -> tarfile.TarInfo:
        if self.type in _EXTENSIONS:
            archive.chain += 1
            if self.size > MAX_TAR_HEADER:
                raise TooLarge(
                    f"a tar header claims {self.size} bytes of name or attributes "
                    f"(at most {MAX_TAR_HEADER} are read)"
                )
            if archive.chain > MAX_TAR_EXTENSIONS:
                raise TooLarge(f"more than {MAX_TAR_EXTENSIONS} tar extension headers in a row")
        elif self.type == tarfile.GNUTYPE_SPARSE:  # never written by gpushare
            raise TooLarge("a sparse tar member (gpushare never writes one)")
        else:
            archive.chain = 0
        member: tarfile.TarInfo = super()._proc_member(archive)  # type: ignore[misc]  # tarfile's private hook, absent from typeshed
        if len(member.name) > MAX_TAR_NAME or len(member.linkname) > MAX_TAR_NAME:
            raise TooLarge(f"a tar member's name or link is over {MAX_TAR_NAME} characters")
        return member


class _BoundedTar(tarfile.TarFile):
    """The archive of :func:`open_tar`: it counts the extension headers read in a row."""

    chain = 0


def open_tar(path: Path) -> tarfile.TarFile:
    """``tarfile.open(path, "r:gz")`` whose headers are checked before their bodies are read;
    reading a member raises TooLarge when one is over a bound."""
    return _BoundedTar.open(path, "r:gz", tarinfo=_BoundedInfo)
