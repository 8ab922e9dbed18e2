"""A device-plugin config read as the NVIDIA device plugin reads it: what it refuses, what it
drops, and what is left.

A learner's config is judged on what a real GPU node would do with it, not on its text: the
plugin reads it leniently (a misspelt field is dropped without a word) and refuses some
things a text check would let pass (an upper-case resource name, ``"true"`` where a boolean
goes), while it accepts some a strict reading would refuse (``replicas: 4.0``, an empty
``migStrategy:``, two YAML documents). :func:`read_config` returns a :class:`Reading`: the
plugin's refusals (the first is the one it would report), the fields it drops, and the
effective config, whose every value is what the plugin would use (a refused value is None, so
a grader can still judge the rest).

The rules are those of NVIDIA/k8s-device-plugin at commit
``bf637253a73be15950884c8c295fdca661f7acc3`` (2026), read with the project's search tools:
``api/config/v1`` (config.go, flags.go, sharing.go, replicas.go, resources.go, consts.go,
strategy.go, duration.go, imex.go, and config_test.go for the renaming that is kept) and
``cmd/nvidia-device-plugin/main.go`` (``validateFlags``), with the config parsed by
sigs.k8s.io/yaml (v1.4 to v1.6: the same ``Unmarshal``: YAML 1.1 through yaml.v2, converted to
JSON, then Go's encoding/json). Each rule below names its upstream file and function. The
deployment is the plugin's Helm chart with its defaults: no flag set on the command line, so
every flag the config leaves out takes the binary's default (``main.go`` ``main``), and the
checks that need the node itself (``--mps-root`` set by the chart, CDI needing NVML) hold.

This is the project's own code, written from reading the Go, none of it copied.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import math
import re
import string
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

import yaml

from gpulab import yamlv2
from gpushare.lab_api import T, yaml_first_node

PREFIX = "nvidia.com"  # api/config/v1/consts.go ResourceNamePrefix
SHARED_SUFFIX = ".shared"  # consts.go DefaultSharedResourceNameSuffix
MAX_NAME = 63  # consts.go MaxResourceNameLength
MIG_STRATEGIES = ("none", "single", "mixed")  # consts.go MigStrategy*
LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")  # strategy.go
ID_STRATEGIES = ("uuid", "index")  # consts.go DeviceIDStrategy*
DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra")  # main.go validateFlags
TIME_SLICING, MPS, NONE = "time-slicing", "mps", "none"  # sharing.go SharingStrategy*


# --------------------------------------------------------------------------- YAML as yaml.v2


@dataclass
class Scalar:
    """A YAML scalar as yaml.v2 resolves it (YAML 1.1): None, bool, int, float or str."""

    value: bool | int | float | str | None
    text: str  # as written
    line: int
    quoted: bool = False


@dataclass
class Mapping:
    """A YAML mapping after sigs.k8s.io/yaml turned its keys into JSON's strings."""

    items: dict[str, Node]
    key_lines: dict[str, int]
    line: int


@dataclass
class Sequence:
    items: list[Node]
    line: int


Node = Scalar | Mapping | Sequence


class Unreadable(Exception):
    """The text never reaches the config decoder: YAML the plugin's reader refuses."""

    def __init__(self, reason: T, line: int | None = None) -> None:
        super().__init__(reason.key)
        self.reason = reason
        self.line = line


_TAG = "tag:yaml.org,2002:"
# yaml.v2 resolve.go init: the plain scalars it looks up before anything else (YAML 1.1:
# "yes", "on", "y" are booleans; "~" and the empty scalar null)
_WORDS: dict[str, bool | float | str | None] = {
    **dict.fromkeys(
        ["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], True
    ),
    **dict.fromkeys(
        ["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], False
    ),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], None),
    **dict.fromkeys([".nan", ".NaN", ".NAN"], math.nan),
    **dict.fromkeys([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], math.inf),
    **dict.fromkeys(["-.inf", "-.Inf", "-.INF"], -math.inf),
}
_HINTS = set("+-0123456789yYnNtTfFoO~.")  # resolve.go resolveTable: all else is a string
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")  # yamlStyleFloat
_GO_FLOAT = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
_INT64, _UINT64 = 2**63, 2**64


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), or ParseUint as yaml.v2 tries next: 0x, 0o, 0b and a
    leading 0 (octal) prefixes; None when neither parses."""
    m = re.fullmatch(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[1-9][0-9]*|0)", text)
    if m is None:
        return None
    digits = m.group(2)
    if digits[:2] in ("0x", "0X", "0b", "0B", "0o", "0O"):
        n = int(digits, 0)
    elif digits != "0" and digits.startswith("0"):
        n = int(digits, 8)
    else:
        n = int(digits)
    n = -n if m.group(1) == "-" else n
    if -_INT64 <= n < _UINT64 and not (m.group(1) == "-" and n < -_INT64):
        return n if n < _UINT64 else None
    return None


def _go_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) on decimal text; None on a syntax or range error."""
    if not _GO_FLOAT.fullmatch(text):
        return None
    value = float(text)
    return None if math.isinf(value) else value


def resolve_plain(text: str) -> bool | int | float | str | None:
    """A plain scalar's value as yaml.v2 resolves it (resolve.go ``resolve`` with no tag).

    Timestamps resolve to their text for an untyped target (decode.go ``scalar``), which is
    what falling through to a string gives.
    """
    if text in _WORDS:
        return _WORDS[text]
    if text[:1] not in _HINTS:
        return text
    if text[0] == ".":
        floating = _go_float(text)
        return text if floating is None else floating
    if text[0] in "yYnNtTfFoO~":
        return text
    plain = text.replace("_", "")
    integer = _go_int(plain)
    if integer is not None:
        return integer
    if _YAML_FLOAT.fullmatch(plain):
        floating = _go_float(plain)
        if floating is not None:
            return floating
    for sign, body in (("", plain[2:]), ("-", plain[3:])):
        if plain.startswith(sign + "0b") and body and set(body) <= {"0", "1"}:
            n = int(body, 2)
            return -n if sign else n
    return text


def _tagged(tag: str, text: str, line: int) -> bool | int | float | str | None:
    """A scalar with an explicit tag, as yaml.v2 ``resolve`` takes it: !!str and !!binary are
    text; !!int, !!float, !!bool and !!null must resolve to their type (an int may become a
    float); any other tag leaves the text as it is."""
    short = tag[len(_TAG) :] if tag.startswith(_TAG) else None
    if short == "str":
        return text
    if short == "binary":
        try:
            return base64.b64decode(text.encode(), validate=False).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            raise Unreadable(T("dpr_yaml", error=f"!!binary {text[:40]}"), line) from None
    if short not in ("int", "float", "bool", "null", "timestamp"):
        return text
    value = resolve_plain(text)
    kinds: dict[str, Callable[[object], bool]] = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "timestamp": lambda v: isinstance(v, str),
    }
    if not kinds[short](value):
        raise Unreadable(T("dpr_yaml", error=f"cannot decode {text[:40]!r} as !!{short}"), line)
    if short == "float" and isinstance(value, int):
        return float(value)
    return value


def _float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32), as sigs.k8s.io/yaml writes a float key or a
    float given to a string field (yaml.go ``convertToJSONableObject``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    target = struct.unpack("f", struct.pack("f", value))[0] if abs(value) < 3.5e38 else value
    for digits in range(1, 10):
        text = f"{target:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == target:
            break
    mantissa, _, exp = text.partition("e")
    if exp:
        sign, num = exp[0], exp[1:].lstrip("0")
        return f"{mantissa}e{sign}{num.zfill(2)}"
    return text


def json_number(value: int | float) -> str:
    """The JSON text Go's json.Marshal writes for a number yaml.v2 gave (an int, or a float64
    in its shortest form, without exponent from 1e-6 to 1e21): ``4.0`` becomes ``4``."""
    if isinstance(value, int):
        return str(value)
    if value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21):
        mantissa, _, exp = repr(value).partition("e")
        mantissa = mantissa.removesuffix(".0")
        return f"{mantissa}e{exp[0]}{exp[1:].lstrip('0')}" if exp else mantissa
    return format(Decimal(repr(value)).normalize(), "f")


class _Composer:
    """yaml.v2's reading of the first document, on the nodes PyYAML composed.

    PyYAML's parser is libyaml's, as yaml.v2's is (a port of it): the same syntax, but for the
    corners :mod:`gpulab.yamlv2` rewrites before the parse. What differs is resolution, so
    plain scalars are resolved here by yaml.v2's table, not PyYAML's; and keys become JSON's
    strings as sigs.k8s.io/yaml makes them.
    """

    def __init__(self, loader: yaml.SafeLoader, first_line: int, bom: str | None = None) -> None:
        self.loader = loader
        self.first_line = first_line
        self.bom = bom  # what stands in for a BOM that starts a line (yamlv2.hide_boms)

    def line(self, node: yaml.Node) -> int:
        return int(node.start_mark.line) + self.first_line

    def node(self, node: yaml.Node) -> Node:
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return Sequence([self.node(kid) for kid in node.value], self.line(node))
        assert isinstance(node, yaml.MappingNode)
        return self.mapping(node)

    def scalar(self, node: yaml.ScalarNode) -> Scalar:
        text, line = str(node.value), self.line(node)
        if self.bom is not None:
            text = text.replace(self.bom, yamlv2.BOM)
        if not node.style:  # plain: None in PyYAML's parser, "" in libyaml's
            # PyYAML's own resolution of this plain text: a tag that differs was written
            implicit = self.loader.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]  # PyYAML ships no annotations
            value = resolve_plain(text) if node.tag == implicit else _tagged(node.tag, text, line)
            return Scalar(value, text, line)
        if node.tag == _TAG + "str":  # quoted or a block scalar: text (decode.go ``scalar``)
            return Scalar(text, text, line, quoted=True)
        return Scalar(_tagged(node.tag, text, line), text, line, quoted=True)

    def mapping(self, node: yaml.MappingNode) -> Mapping:
        out = Mapping({}, {}, self.line(node))
        for key_node, value_node in node.value:
            if (
                isinstance(key_node, yaml.ScalarNode)
                and key_node.value == "<<"
                and not key_node.style
                and key_node.tag in (_TAG + "merge", _TAG + "str")
            ):
                self.merge(value_node, out)  # decode.go ``merge``: in place, in order
                continue
            key = self.key(key_node)
            out.items[key] = self.node(value_node)  # a later key wins (decode.go mapping)
            out.key_lines[key] = self.line(key_node)
        return out

    def merge(self, node: yaml.Node, out: Mapping) -> None:
        parts = [node] if isinstance(node, yaml.MappingNode) else node.value
        if not isinstance(node, yaml.MappingNode | yaml.SequenceNode) or any(
            not isinstance(p, yaml.MappingNode) for p in parts
        ):
            reason = T("dpr_yaml", error="map merge requires map or sequence of maps as the value")
            raise Unreadable(reason, self.line(node))
        for part in reversed(parts) if isinstance(node, yaml.SequenceNode) else parts:
            merged = self.mapping(part)
            out.items.update(merged.items)
            out.key_lines.update(merged.key_lines)

    def key(self, node: yaml.Node) -> str:
        """A mapping key as sigs.k8s.io/yaml's ``convertToJSONableObject`` writes it: text,
        an int in decimal, a float as Go's 'g' format, a bool as true or false; a null, a
        uint64 or a collection is an error (yaml.v2 decode.go refuses collections)."""
        if not isinstance(node, yaml.ScalarNode):
            raise Unreadable(T("dpr_yaml_key", key=_clip(_source(node))), self.line(node))
        value = self.scalar(node).value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int) and value < _INT64:
            return str(value)
        if isinstance(value, float):
            text = _float32_g(value)
            return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(text, text)
        if isinstance(value, str):
            return value
        raise Unreadable(T("dpr_yaml_key", key=_clip(str(node.value)) or "~"), self.line(node))


def _source(node: yaml.Node) -> str:
    """The text of a collection used as a key, as written, for the learner."""
    buffer = getattr(node.start_mark, "buffer", None)
    if buffer is not None and node.end_mark is not None:
        return str(buffer[node.start_mark.pointer : node.end_mark.pointer])
    return "[…]" if isinstance(node, yaml.SequenceNode) else "{…}"


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _no_float_specials(node: Node) -> None:
    """json.Marshal refuses NaN and infinities (sigs.k8s.io/yaml ``yamlToJSONTarget``), but
    for the one string field a float is made text for first: the top-level ``version``."""
    stack: list[Node] = [node]
    if isinstance(node, Mapping):
        stack = [v for k, v in node.items.items() if _fold(k) != _fold("version")]
    while stack:
        n = stack.pop()
        if isinstance(n, Scalar):
            if isinstance(n.value, float) and not math.isfinite(n.value):
                raise Unreadable(T("dpr_not_json", value=n.text), n.line)
        elif isinstance(n, Mapping):
            stack.extend(n.items.values())
        else:
            stack.extend(n.items)


def _first_node(text: str, loader: type[yaml.SafeLoader]) -> tuple[yaml.Node | None, bool]:
    """:func:`yaml_first_node`, past the libyaml errors yaml.v2 does not make (see
    :mod:`gpulab.yamlv2`): each is rewritten as yaml.v2 reads it, and the text parsed again."""
    for _ in range(yamlv2.MAX_REPAIRS):
        try:
            return yaml_first_node(text, loader)
        except yaml.MarkedYAMLError as exc:
            repaired = yamlv2.repair(text, exc, loader)
            if repaired is None or repaired == text:
                raise
            text = repaired
    return yaml_first_node(text, loader)


def parse_yaml(text: str, first_line: int = 1) -> tuple[Node | None, bool]:
    """The first document of ``text`` as yaml.v2 and sigs.k8s.io/yaml give it to JSON, and
    whether more documents follow (yaml.v2 yaml.go ``unmarshal`` parses one document: the
    plugin never sees the others). Raises :class:`Unreadable`."""
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    readable, stand_in = yamlv2.hide_boms(text)
    try:
        problem = yamlv2.version_problem(readable, loader_class)
        if problem is not None:
            raise Unreadable(T("dpr_yaml", error=problem), first_line)
        root, more = _first_node(readable, loader_class)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(filter(None, [exc.context, exc.problem])) or "syntax error"
        line = mark.line + first_line if mark is not None else None
        raise Unreadable(T("dpr_yaml", error=what), line) from None
    except (yaml.YAMLError, RecursionError, ValueError, MemoryError) as exc:
        raise Unreadable(T("dpr_yaml", error=str(exc)[:200])) from None
    if root is None:
        return None, more
    composer = _Composer(loader_class(""), first_line, stand_in)
    node = composer.node(root)
    _no_float_specials(node)  # before any decoding: the JSON text is never made
    return node, more


# --------------------------------------------------------------------------- the config

# The order the plugin meets errors in, and so which one it reports: YAML it cannot read;
# an error a decoder of its own returns at once; a type error encoding/json saves and returns
# at the end (decode.go ``saveError``); the version (config.go ``parseConfigFrom``); the flag
# checks in main.go ``validateFlags``'s order; the device map built on a node.
YAML, DECODER, SAVED, VERSION = 0.0, 1.0, 2.0, 3.0
LIST_STRATEGY, ID_STRATEGY, MPS_MIXED, DISCOVERY, MIG, IMEX = 4.0, 4.1, 4.2, 4.3, 4.4, 4.5
ON_NODE = 5.0


@dataclass(frozen=True)
class Refusal:
    """Why the plugin refuses the config: its reason, at a line of the config."""

    reason: T
    line: int | None
    path: str
    phase: float = DECODER


@dataclass(frozen=True)
class Note:
    """A field the plugin does not read. ``meant``: the field it probably stands for.

    ``why``: ``unknown`` (no such field there), ``case`` (a field read only when written
    exactly so), ``unused`` (read, then set aside: the top-level ``resources``).
    """

    path: str
    line: int
    meant: str | None = None
    why: str = "unknown"


@dataclass(frozen=True)
class Devices:
    """``devices`` of a shared resource (replicas.go ``ReplicatedDevices``)."""

    all: bool = True
    count: int = 0
    refs: tuple[str, ...] = ()
    written: str = "all"


@dataclass(frozen=True)
class Shared:
    """One entry of ``sharing.<method>.resources`` as the plugin reads it."""

    name: str | None  # normalised (nvidia.com/ prefixed); None: missing or refused
    written: str
    advertised: str | None  # the name its replicas are advertised under; None: refused
    renamed_by: str  # "" | "rename" | "renameByDefault"
    replicas: int | None  # None: missing or refused
    replicas_node: Node | None
    devices: Devices | None  # None: refused
    line: int


@dataclass(frozen=True)
class Method:
    """``sharing.timeSlicing`` or ``sharing.mps`` as the plugin reads it."""

    key: str  # timeSlicing | mps
    line: int
    rename_by_default: bool
    fail_requests: bool | None  # None: refused
    fail_requests_node: Node | None
    fail_requests_line: int | None
    resources: tuple[Shared, ...]


@dataclass
class Reading:
    """A config as the plugin reads it. ``refusals`` empty: the plugin accepts it."""

    refusals: list[Refusal] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    readable: bool = True  # YAML the plugin's reader takes, holding a mapping or nothing
    more_documents: bool = False
    version: str = "v1"
    mig_strategy: str | None = "none"  # None: refused
    mig_strategy_line: int | None = None
    sharing_line: int | None = None
    time_slicing: Method | None = None
    mps: Method | None = None

    @property
    def accepted(self) -> bool:
        return not self.refusals

    @property
    def refusal(self) -> Refusal | None:
        """The reason the plugin gives: the first error of the earliest phase it meets."""
        return min(self.refusals, key=lambda r: r.phase) if self.refusals else None

    @property
    def strategy(self) -> str:
        """sharing.go ``SharingStrategy``: MPS when set, else time-slicing when set, else
        none (a method the plugin reads has at least one resource of at least 2 replicas,
        so a method that is set replicates)."""
        if self.mps is not None:
            return MPS
        return TIME_SLICING if self.time_slicing is not None else NONE

    @property
    def active(self) -> Method | None:
        """The method the plugin shares by (sharing.go ``ReplicatedResources``): MPS over
        time-slicing when a config has both."""
        return self.mps if self.mps is not None else self.time_slicing


def normalise(name: str) -> str:
    """A resource name as the plugin keys it: ``gpu`` is ``nvidia.com/gpu``
    (resources.go ``NewResourceName``)."""
    return name if name.startswith(PREFIX + "/") else f"{PREFIX}/{name}"


_DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def name_problem(name: str) -> T | None:
    """Why the plugin refuses ``name`` as a resource name, or None (resources.go
    ``NewResourceName``: at most 63 characters in all; after the prefix, a lower-case
    DNS-1123 subdomain, apimachinery validation ``NameIsDNSSubdomain``)."""
    full = normalise(name)
    if len(full) > MAX_NAME:
        return T("dpr_name_long", value=_clip(name), limit=MAX_NAME)
    rest = full.split("/", 1)[1]
    if len(rest) > 253 or not _DNS1123.fullmatch(rest):
        return T("dpr_name_format", value=_clip(name) or '""')
    return None


def _kind(node: Node | None) -> T:
    if _null(node):
        return T("yaml_type_null")
    if isinstance(node, Mapping):
        return T("yaml_type_mapping")
    if isinstance(node, Sequence):
        return T("yaml_type_list")
    value = node.value if isinstance(node, Scalar) else None
    if isinstance(value, bool):
        return T("yaml_type_boolean")
    if isinstance(value, int | float):
        return T("yaml_type_number")
    return T("yaml_type_string")


def shown(node: Node | None) -> str:
    """A value as the learner wrote it, on one line (quoted if they quoted it)."""
    if node is None:
        return "~"
    if isinstance(node, Scalar):
        if node.quoted:
            return _clip(f'"{node.text}"')
        return _clip(node.text) if node.text else "~"
    if isinstance(node, Sequence):
        return _clip("[" + ", ".join(shown(n) for n in node.items) + "]")
    return _clip("{" + ", ".join(f"{k}: {shown(v)}" for k, v in node.items.items()) + "}")


def _null(node: Node | None) -> bool:
    return node is None or (isinstance(node, Scalar) and node.value is None)


def _number(node: Node | None) -> int | float | None:
    """The number a scalar holds (a bool is none), else None."""
    if isinstance(node, Scalar) and isinstance(node.value, int | float):
        return None if isinstance(node.value, bool) else node.value
    return None


def _text(node: Node | None) -> str | None:
    """The string a JSON string (or null, "") gives a Go string, else None."""
    if _null(node):
        return ""
    if isinstance(node, Scalar) and isinstance(node.value, str):
        return node.value
    return None


@lru_cache(maxsize=4096)  # keys are strangers': bounded
def _fold(text: str) -> str:
    """A key folded as encoding/json matches field names: case-insensitively, by Unicode
    simple folding (the long s matches s, the Kelvin sign k)."""
    out = []
    for ch in text:
        orbit = {ch}
        while more := {c for o in orbit for c in (o.lower(), o.upper()) if len(c) == 1} - orbit:
            orbit |= more
        out.append(min(orbit))
    return "".join(out)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# Where a field the plugin knows belongs, when it turns up at a level that drops it.
HOMES = {
    "timeSlicing": "sharing",
    "mps": "sharing",
    "migStrategy": "flags",
    "failRequestsGreaterThanOne": "sharing.timeSlicing",
    "renameByDefault": "sharing.timeSlicing",
    "resources": "sharing.timeSlicing",
    "replicas": "sharing.timeSlicing.resources[0]",
    "rename": "sharing.timeSlicing.resources[0]",
    "devices": "sharing.timeSlicing.resources[0]",
}

Field = Callable[[Node, str, int], None]
# what a Go type takes, as the learner reads it
_WANT = {
    "bool": T("type_bool"),
    "string": T("type_string"),
    "int": T("type_int"),
    "list": T("type_list"),
    "mapping": T("type_mapping"),
}


class _Decoder:
    """The config decoded as encoding/json decodes it into the plugin's structs, collecting
    every error instead of stopping at the first (:attr:`Reading.refusal` picks the one the
    plugin reports), so the rest can still be judged."""

    def __init__(self, reading: Reading) -> None:
        self.r = reading
        self.version_node: Node | None = None
        self.mig_node: Node | None = None

    # -- errors and dropped fields -----------------------------------------------------------

    def refuse(self, reason: T, node: Node | None, path: str, phase: float = DECODER) -> None:
        self.r.refusals.append(
            Refusal(reason, node.line if node is not None else None, path, phase)
        )

    def wrong_type(self, node: Node, path: str, want: str, phase: float = DECODER) -> None:
        """encoding/json ``UnmarshalTypeError``: saved in a plain struct, returned at once
        from a decoder of the plugin's own."""
        reason = T("dpr_type", path=path or "config", want=_WANT[want], found=shown(node))
        self.refuse(reason, node, path, phase)

    def drop(
        self, mapping: Mapping, key: str, path: str, known: tuple[str, ...], exact: bool
    ) -> None:
        """Note a key no field takes, and the field it probably stands for: the same name in
        another case where only the exact one is read, a close spelling, or a field of
        another level (:data:`HOMES`)."""
        full = _join(path, key)
        line = mapping.key_lines.get(key, mapping.line)
        folded = {_fold(k): k for k in known}
        if exact and _fold(key) in folded:
            self.r.notes.append(Note(full, line, _join(path, folded[_fold(key)]), "case"))
            return
        close = difflib.get_close_matches(key.lower(), [k.lower() for k in known], 1, 0.75)
        meant = next((_join(path, k) for k in known if close and k.lower() == close[0]), None)
        if meant is None:
            for k, home in HOMES.items():
                near = difflib.get_close_matches(key.lower(), [k.lower()], 1, 0.75)
                if near and home != path:
                    meant = f"{home}.{k}"
                    break
        self.r.notes.append(Note(full, line, meant))

    # -- encoding/json into plain structs --------------------------------------------------------

    def struct(self, node: Node | None, path: str, fields: dict[str, Field]) -> None:
        """encoding/json ``object`` into a struct: keys in the order json.Marshal wrote them
        (sorted), each matched to a field exactly, else case-insensitively (decode.go
        ``object``); unknown keys dropped; null leaves the struct as it was."""
        if node is None or _null(node):
            return
        if not isinstance(node, Mapping):
            self.wrong_type(node, path, "mapping", SAVED)
            return
        by_fold = {_fold(k): k for k in fields}
        for key in sorted(node.items):
            name = key if key in fields else by_fold.get(_fold(key))
            if name is None:
                self.drop(node, key, path, tuple(fields), exact=False)
                continue
            fields[name](node.items[key], _join(path, name), node.key_lines.get(key, node.line))

    def string(self, node: Node, path: str) -> str | None:
        """A JSON string into a Go string or *string; None for null (the value unchanged)."""
        if _null(node):
            return None
        got = _text(node)
        if got is None:
            self.wrong_type(node, path, "string", SAVED)
        return got

    def boolean(self, node: Node, path: str, phase: float = SAVED) -> bool | None:
        if _null(node):
            return None
        if isinstance(node, Scalar) and isinstance(node.value, bool):
            return node.value
        self.wrong_type(node, path, "bool", phase)
        return None

    def integer(self, node: Node, path: str, phase: float = DECODER) -> int | None:
        """A JSON number into a Go int: only an integer literal in range, which a whole
        float of YAML is (``4.0`` is written ``4``); None for null."""
        if _null(node):
            return None
        number = _number(node)
        if number is not None:
            text = json_number(number)
            if re.fullmatch(r"-?[0-9]+", text) and -_INT64 <= int(text) < _INT64:
                return int(text)
        self.wrong_type(node, path, "int", phase)
        return None

    def slice(self, node: Node, path: str) -> list[Node] | None:
        """A JSON array into a Go slice in a plain struct: its items; None for null (a nil
        slice) and for anything else, which is a type error."""
        if _null(node):
            return None
        if not isinstance(node, Sequence):
            self.wrong_type(node, path, "list", SAVED)
            return None
        return node.items

    def _bool(self, node: Node, path: str, line: int) -> None:
        self.boolean(node, path)

    def _str(self, node: Node, path: str, line: int) -> None:
        self.string(node, path)

    # -- the config ----------------------------------------------------------------------------

    def config(self, root: Node | None) -> None:
        """config.go ``Config``: plain encoding/json, then ``parseConfigFrom``'s version."""
        if root is not None and not isinstance(root, Mapping) and not _null(root):
            self.r.readable = False
            self.refuse(T("dpr_not_mapping", kind=_kind(root)), root, "", SAVED)
            return
        self.struct(
            root,
            "",
            {
                "version": self.version,
                "flags": self.flags,
                "resources": self.resources,
                "sharing": self.sharing,
                "imex": self.imex,
            },
        )
        if self.r.version != "v1":  # config.go parseConfigFrom: "" is v1, all else refused
            self.refuse(
                T("dpr_version", value=shown(self.version_node)),
                self.version_node,
                "version",
                VERSION,
            )

    def version(self, node: Node, path: str, line: int) -> None:
        """sigs.k8s.io/yaml ``convertToJSONableObject`` gives this string field a number or
        a bool as text (``1.0`` is ``"1"``): the one such coercion this config has, every
        other string being under a decoder of the plugin's own or the embedded flags."""
        if isinstance(node, Scalar) and isinstance(node.value, bool | int | float):
            value = node.value
            if isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = _float32_g(value) if isinstance(value, float) else str(value)
            node = Scalar(text, node.text, node.line)
        got = self.string(node, path)
        if got is not None:
            self.version_node = node
            self.r.version = got or "v1"

    def flags(self, node: Node, path: str, line: int) -> None:
        """flags.go ``Flags``, with ``CommandLineFlags`` embedded: its fields sit right
        under ``flags``, and sigs.k8s.io/yaml, looking a field up by the embedded struct,
        makes no number text there. A flag left out or null takes main.go's default
        (flags.go ``UpdateFromCLIFlags``: ``migStrategy`` none)."""
        self.struct(
            node,
            path,
            {
                "migStrategy": self.mig_strategy,
                "failOnInitError": self._bool,
                "mpsRoot": self._str,
                "nvidiaDriverRoot": self._str,
                "nvidiaDevRoot": self._str,
                "gdrcopyEnabled": self._bool,
                "gdsEnabled": self._bool,
                "mofedEnabled": self._bool,
                "useNodeFeatureAPI": self._bool,
                "deviceDiscoveryStrategy": self.choice(
                    DISCOVERY_STRATEGIES,
                    lambda v: T("dpr_discovery", value=v, values=DISCOVERY_STRATEGIES),
                    DISCOVERY,
                ),
                "plugin": lambda n, p, line: self.struct(n, p, self.plugin_fields()),
                "gfd": lambda n, p, line: self.struct(n, p, self.gfd_fields()),
            },
        )

    def mig_strategy(self, node: Node, path: str, line: int) -> None:
        self.r.mig_strategy_line = line
        if _null(node):
            return
        got = self.string(node, path)
        self.r.mig_strategy = got
        self.mig_node = node

    def choice(self, allowed: tuple[str, ...], why: Callable[[str], T], phase: float) -> Field:
        """A string flag main.go ``validateFlags`` checks against its values (an empty
        value is one written, so it is checked; null leaves the default)."""

        def take(node: Node, path: str, line: int) -> None:
            got = self.string(node, path)
            if got is not None and got not in allowed:
                self.refuse(why(shown(node)), node, path, phase)

        return take

    def plugin_fields(self) -> dict[str, Field]:
        """flags.go ``PluginCommandLineFlags``."""
        return {
            "passDeviceSpecs": self._bool,
            "deviceListStrategy": self.list_strategy,
            "deviceIDStrategy": self.choice(
                ID_STRATEGIES,
                lambda v: T("dpr_id_strategy", value=v, values=ID_STRATEGIES),
                ID_STRATEGY,
            ),
            "cdiAnnotationPrefix": self._str,
            "nvidiaCTKPath": self._str,
            "containerDriverRoot": self._str,
            "kubeletSocket": self._str,
            "cdiFeatureFlags": self._str,
        }

    def gfd_fields(self) -> dict[str, Field]:
        """flags.go ``GFDCommandLineFlags``: read, then set aside for GPU Feature Discovery
        (main.go ``loadConfig``)."""
        return {
            "oneshot": self._bool,
            "noTimestamp": self._bool,
            "sleepInterval": self.duration,
            "outputFile": self._str,
            "machineTypeFile": self._str,
        }

    def list_strategy(self, node: Node, path: str, line: int) -> None:
        """flags.go ``deviceListStrategyFlag.UnmarshalJSON``: one string or a list of
        strings (a null item is ""); then strategy.go ``NewDeviceListStrategies`` from
        main.go ``validateFlags``: at least one, each a known strategy."""
        if _null(node):
            return
        reason = T("dpr_list_strategy", value=shown(node), values=LIST_STRATEGIES)
        values = [_text(n) for n in node.items] if isinstance(node, Sequence) else [_text(node)]
        if None in values:
            self.refuse(reason, node, path, DECODER)
        elif not values or any(v not in LIST_STRATEGIES for v in values):
            self.refuse(reason, node, path, LIST_STRATEGY)

    def duration(self, node: Node, path: str, line: int) -> None:
        """duration.go ``Duration.UnmarshalJSON``: a number (nanoseconds) or text for Go's
        ``time.ParseDuration``; null leaves the default."""
        if _null(node):
            return
        text = _text(node)
        if _number(node) is not None or (text is not None and _GO_DURATION.fullmatch(text)):
            return
        self.refuse(T("dpr_duration", value=shown(node)), node, path)

    def imex(self, node: Node, path: str, line: int) -> None:
        """imex.go ``Imex``, and its ``AssertChannelIDsValid`` from main.go
        ``validateFlags``: channel IDs [] or [0]."""

        def channels(n: Node, p: str, line: int) -> None:
            items = self.slice(n, p)
            if items is None:
                return
            ids = [self.integer(item, f"{p}[{i}]", SAVED) for i, item in enumerate(items)]
            if None not in ids and ids not in ([], [0]):
                self.refuse(T("dpr_imex", value=shown(n)), n, p, IMEX)

        self.struct(node, path, {"channelIDs": channels, "required": self._bool})

    def resources(self, node: Node, path: str, line: int) -> None:
        """config.go ``Resources``: each entry read (resources.go ``Resource.UnmarshalJSON``:
        a pattern and a valid name), then all set aside by config.go
        ``DisableResourceNamingInConfig`` ("not yet supported")."""

        def entries(n: Node, p: str, line: int) -> None:
            for i, item in enumerate(self.slice(n, p) or []):
                self.pattern_resource(item, f"{p}[{i}]")

        before = len(self.r.refusals)
        self.struct(node, path, {"gpus": entries, "mig": entries})
        if not _null(node) and len(self.r.refusals) == before:
            self.r.notes.append(Note(path, line, None, "unused"))

    def pattern_resource(self, node: Node, path: str) -> None:
        if not isinstance(node, Mapping) and not _null(node):
            self.wrong_type(node, path, "mapping")
            return
        items = node.items if isinstance(node, Mapping) else {}
        for want in ("pattern", "name"):
            if want not in items:
                self.refuse(T("dpr_missing", path=path, field=want), node, path)
                return
        if _text(items["pattern"]) is None:
            self.wrong_type(items["pattern"], f"{path}.pattern", "string")
            return
        self.resource_name(items["name"], f"{path}.name")

    def resource_name(self, node: Node, path: str) -> str | None:
        """resources.go ``ResourceName.UnmarshalJSON``: a string (null reads as ""), then
        ``NewResourceName``. The normalised name, or None when refused."""
        raw = _text(node)
        if raw is None:
            self.wrong_type(node, path, "string")
            return None
        problem = name_problem(raw)
        if problem is not None:
            self.refuse(problem, node, path)
            return None
        return normalise(raw)

    # -- sharing -------------------------------------------------------------------------------

    def sharing(self, node: Node, path: str, line: int) -> None:
        """sharing.go ``Sharing``: ``timeSlicing`` a value, whose decoder runs even on
        null (and so asks for resources), ``mps`` a pointer that null leaves unset."""
        if not _null(node):
            self.r.sharing_line = line

        def time_slicing(n: Node, p: str, line: int) -> None:
            self.r.time_slicing = self.method(n, p, "timeSlicing", line)

        def mps(n: Node, p: str, line: int) -> None:
            if not _null(n):
                self.r.mps = self.method(n, p, "mps", line)

        self.struct(node, path, {"timeSlicing": time_slicing, "mps": mps})

    def method(self, node: Node, path: str, key: str, line: int) -> Method:
        """replicas.go ``ReplicatedResources.UnmarshalJSON``: its keys looked up exactly as
        written (a map lookup, not encoding/json's matching); ``resources`` required and
        not empty; ``renameByDefault`` names every entry without a rename
        ``<name>.shared``. For MPS an unset ``failRequestsGreaterThanOne`` is true (config.go
        ``NewConfig``)."""
        known = ("renameByDefault", "failRequestsGreaterThanOne", "resources")
        if not isinstance(node, Mapping) and not _null(node):
            self.wrong_type(node, path, "mapping")
            return Method(key, line, False, None, None, None, ())
        items = node.items if isinstance(node, Mapping) else {}
        if isinstance(node, Mapping):
            for k in sorted(items):
                if k not in known:
                    self.drop(node, k, path, known, exact=True)
        rename = items.get("renameByDefault")
        by_default = rename is not None and bool(
            self.boolean(rename, f"{path}.renameByDefault", DECODER)
        )
        fail_node = items.get("failRequestsGreaterThanOne")
        fail: bool | None = key == "mps"
        if fail_node is not None and not _null(fail_node):
            fail = self.boolean(fail_node, f"{path}.failRequestsGreaterThanOne", DECODER)
        fail_line = (
            node.key_lines.get("failRequestsGreaterThanOne") if isinstance(node, Mapping) else None
        )
        entries: list[Shared] = []
        res = items.get("resources")
        where = _join(path, "resources")
        if res is None or _null(res):
            self.refuse(T("dpr_no_resources", path=where), res or node, where)
        elif not isinstance(res, Sequence):
            self.wrong_type(res, where, "list")
        elif not res.items:
            self.refuse(T("dpr_no_resources", path=where), res, where)
        else:
            for i, item in enumerate(res.items):
                entries.append(self.shared(item, f"{where}[{i}]", by_default))
        return Method(key, line, by_default, fail, fail_node, fail_line, tuple(entries))

    def shared(self, node: Node, path: str, by_default: bool) -> Shared:
        """replicas.go ``ReplicatedResource.UnmarshalJSON``: ``name`` required, ``devices``
        ``all`` unless given, ``replicas`` required and at least 2, ``rename`` optional. The
        renaming and the choice of devices are kept (config.go
        ``DisableResourceNamingInConfig``, as config_test.go
        ``TestDisableResourceNamingInConfig_PreservesPerDevice*Selection`` has it)."""
        known = ("name", "rename", "devices", "replicas")
        if not isinstance(node, Mapping):
            if _null(node):
                self.refuse(T("dpr_missing", path=path, field="name"), node, path)
            else:
                self.wrong_type(node, path, "mapping")
            return Shared(None, shown(node), None, "", None, None, None, node.line)
        items = node.items
        for k in sorted(items):
            if k not in known:
                self.drop(node, k, path, known, exact=True)
        name_node = items.get("name")
        name = None
        if name_node is None:
            self.refuse(T("dpr_missing", path=path, field="name"), node, path)
        else:
            name = self.resource_name(name_node, f"{path}.name")
        devices = self.devices(items.get("devices"), f"{path}.devices")
        replicas_node = items.get("replicas")
        replicas = None
        if replicas_node is None:
            self.refuse(T("dpr_missing", path=path, field="replicas"), node, path)
        else:
            replicas = self.integer(replicas_node, f"{path}.replicas")
            given = replicas is not None or _null(replicas_node)
            if given and (replicas or 0) < 2:
                value = shown(replicas_node)
                self.refuse(T("dpr_replicas_min", path=path, value=value), replicas_node, path)
                replicas = None
        renamed_by, advertised = "", name
        rename_node = items.get("rename")
        if rename_node is not None:
            target = self.resource_name(rename_node, f"{path}.rename")
            renamed_by, advertised = "rename", target
        elif by_default and name is not None:
            renamed_by, advertised = "renameByDefault", name + SHARED_SUFFIX
        written = shown(name_node) if name_node is not None else ""
        return Shared(
            name, written, advertised, renamed_by, replicas, replicas_node, devices, node.line
        )

    def devices(self, node: Node | None, path: str) -> Devices | None:
        """replicas.go ``ReplicatedDevices.UnmarshalJSON``: ``all``, a count above 0, or a
        list of GPU indexes, MIG indexes (``0:1``) and GPU or MIG UUIDs (a null item reads
        as index 0: json.Unmarshal leaves the uint at zero). Null is the text "", refused."""
        if node is None:
            return Devices()
        written = shown(node)
        if _text(node) == "all":
            return Devices(written=written)
        if (
            isinstance(node, Scalar)
            and isinstance(node.value, int | float)
            and not isinstance(node.value, bool)
        ):
            text = json_number(node.value)
            if re.fullmatch(r"[0-9]+", text) and 0 < int(text) < _INT64:
                return Devices(all=False, count=int(text), written=written)
        elif isinstance(node, Sequence):
            refs = [_device_ref(item) for item in node.items]
            if None not in refs:
                return Devices(
                    all=False, refs=tuple(r for r in refs if r is not None), written=written
                )
        self.refuse(T("dpr_devices", value=written), node, path)
        return None


_GO_DURATION = re.compile(r"[-+]?(0|(([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)")


def _go_uint(text: str) -> bool:
    """strconv ``ParseUint(text, 10, 0)``: decimal digits only, no sign, below 2**64."""
    return text.isascii() and text.isdigit() and int(text) < _UINT64


def _go_uuid(text: str) -> bool:
    """google/uuid v1.6 uuid.go ``Parse``, on bytes as Go measures them: 32 hex digits; or 36
    characters with dashes at 8, 13, 18 and 23, hex between, bare, after ``urn:uuid:``, or
    after any one byte of 38 (the braces are not checked, and the last byte is not read)."""
    raw = text.encode()
    if len(raw) == 32:
        return all(chr(c) in string.hexdigits for c in raw)
    if len(raw) == 45:
        if raw[:9].lower() != b"urn:uuid:":
            return False
        raw = raw[9:]
    elif len(raw) == 38:
        raw = raw[1:]
    elif len(raw) != 36:
        return False
    dashes = (8, 13, 18, 23)
    return all(
        raw[i] == ord("-") if i in dashes else chr(raw[i]) in string.hexdigits for i in range(36)
    )


def _is_device_ref(ref: str) -> bool:
    """replicas.go ``IsGPUIndex``, ``IsMigIndex`` (``0:1``) or ``IsUUID`` (``GPU-`` and a
    UUID; ``MIG-`` and a UUID, or a GPU UUID then ``/`` and two indexes)."""
    if _go_uint(ref):
        return True
    index = ref.split(":", 1)
    if len(index) == 2 and all(_go_uint(part) for part in index):
        return True
    if ref.startswith("GPU-"):
        return _go_uuid(ref[4:])
    if not ref.startswith("MIG-"):
        return False
    parts = ref[4:].split("/", 2)
    return _go_uuid(ref[4:]) or (
        len(parts) == 3
        and parts[0].startswith("GPU-")
        and _go_uuid(parts[0][4:])
        and all(_go_uint(part) for part in parts[1:])
    )


def _device_ref(node: Node) -> str | None:
    """One item of a ``devices`` list (replicas.go ``ReplicatedDevices.UnmarshalJSON``): a
    whole number from 0 (a uint64, made decimal text), or text that is a device reference."""
    if _null(node):
        return "0"
    number = _number(node)
    if number is not None:
        text = json_number(number)
        return text if _go_uint(text) else None
    got = _text(node)
    return got if got is not None and _is_device_ref(got) else None


def read_config(text: str, first_line: int = 1) -> Reading:
    """``text`` read as the device plugin reads its config file (config.go
    ``parseConfigFrom`` and ``NewConfig``) and checked as main.go ``validateFlags`` checks
    it. ``first_line``: the line of the text's first line, for the lines of the reading."""
    reading = Reading()
    try:
        root, reading.more_documents = parse_yaml(text, first_line)
    except Unreadable as exc:
        reading.readable = False
        reading.refusals.append(Refusal(exc.reason, exc.line, "", YAML))
        return reading
    decoder = _Decoder(reading)
    decoder.config(root)
    if not reading.readable:
        return reading
    # main.go validateFlags: a known MIG strategy (an empty one is written, so refused), and
    # MPS never with mixed
    mig = reading.mig_strategy
    if mig is not None and mig not in MIG_STRATEGIES:
        reason = T("dpr_mig_strategy", value=shown(decoder.mig_node), values=MIG_STRATEGIES)
        reading.refusals.append(
            Refusal(reason, reading.mig_strategy_line, "flags.migStrategy", MIG)
        )
    if reading.mps is not None and mig == "mixed":
        reason = T("dpr_mps_mixed")
        reading.refusals.append(
            Refusal(reason, reading.mig_strategy_line, "flags.migStrategy", MPS_MIXED)
        )
    return reading


# --------------------------------------------------------------------------- on a node


def node_refusal(reading: Reading, gpus: int) -> Refusal | None:
    """Why the plugin fails on a node of ``gpus`` whole GPUs (no MIG) with this config: a
    ``devices`` count above its GPUs, an index it does not have, an empty list (internal/rm
    device_map.go ``getIDsOfDevicesToReplicate``). A UUID is taken to be one of its GPUs."""
    method = reading.active
    if method is None:
        return None
    indexes = {str(i) for i in range(gpus)}
    for res in method.resources:
        devices = res.devices
        if devices is None or devices.all or res.name is None:
            continue
        missing = [r for r in devices.refs if r[:1].isdigit() and r not in indexes]
        if devices.count > gpus or missing or not (devices.count or devices.refs):
            reason = T("dpr_devices_node", value=devices.written, gpus=gpus)
            path = f"sharing.{method.key}.resources"
            return Refusal(reason, res.line, path, ON_NODE)
    return None


def replicas_of(method: Method | None, resource: str) -> tuple[int | None, list[Shared]]:
    """The replicas the plugin gives ``resource`` and the entries naming it. Several entries
    of one resource make a set of replicas each, merged by device, so the largest count is
    what a node advertises (internal/rm device_map.go ``updateDeviceMapWithReplicas``)."""
    entries = [r for r in method.resources if r.name == resource] if method is not None else []
    counts = [r.replicas for r in entries if r.replicas is not None]
    return (max(counts) if counts else None), entries
