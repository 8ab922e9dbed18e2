"""The lab's rules as code: names, expected values, and how they are derived.

Where LAB.md says a value is derived (lab-node-1's GPUs are 2 x the ``replicas`` of the
ConfigMap's ``shared`` config), the derivation lives here, once, for every grader. Every reader
returns a value or fails the check with a problem (``fail``); none crashes on learner input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import yaml

from gpulab import CONFIG_LABEL, CONFIGMAP_NAME, CONFIGMAP_NS, GPU
from gpushare.data import Json, JsonObject
from gpushare.grading.checks import T, Value, fail
from gpushare.grading.labstate import LabState, quantity, requested, show_quantity
from gpushare.lab import nodes
from gpushare.submissions.workdir import FileProblem, LineDict, load_yaml_text, yaml_kind

R = TypeVar("R")

LAB_NODES = nodes.load(Path(__file__).resolve().parents[1] / "lab.toml").names
MIG_PROFILE = "nvidia.com/mig-1g.10gb"
MIG_COUNT = 7
PHYSICAL_GPUS = 2
LAB_REPLICAS = 4  # the lab's own number, used only when the ConfigMap cannot be read
CONFIG_FOR_NODE = {"lab-node-0": "default", "lab-node-1": "shared"}
MIG_NODE = "lab-node-2"
# where step 8 puts each workload, by the lab's own definition of the nodes
PLACEMENT = {"prod-inference": MIG_NODE, "notebook": "lab-node-1", "batch-train": "lab-node-0"}
STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_LABELS = {STRATEGY_LABEL: "mixed"}
PRODUCT_LABEL = "nvidia.com/gpu.product"
ISOLATION = {
    "TIMESLICING_MEMORY_ISOLATION": "no",
    "MPS_MEMORY_ISOLATION": "partial",
    "MIG_MEMORY_ISOLATION": "yes",
    "TIMESLICING_FAULT_ISOLATION": "no",
    "MIG_FAULT_ISOLATION": "yes",
}
ISOLATION_VALUES = ("yes", "no", "partial")


def where_cm(key: str | None = None, line: int | None = None) -> T:
    """The ConfigMap, one of its keys, or a line of the config stored under that key.

    A catalog value, so "line 5" reads as the learner's language writes it.
    """
    ref = f"{CONFIGMAP_NS}/{CONFIGMAP_NAME}"
    if key is None:
        return T("where_configmap", configmap=ref)
    if not line:
        return T("where_configmap_key", configmap=ref, key=key)
    return T("where_configmap_line", configmap=ref, key=key, line=line)


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)  # a date or timestamp, as YAML wrote it


def show_yaml(value: object, limit: int = 120) -> str:
    """A value as YAML writes it on one line (``false``, ``'4'``, ``{name: x}``), never a repr.

    What the learner wrote, in the language they wrote it in: a Python repr would show
    ``False`` for YAML's ``false`` and ``LineDict`` for a mapping.
    """
    text: str = yaml.safe_dump(
        _plain(value), default_flow_style=True, allow_unicode=True, width=10_000
    ).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show_field(name: str, value: object) -> str | T:
    """``name: value`` as the learner wrote it; a value the plugin needs as a number or a
    boolean but that was quoted into a string says so (``replicas: '4'``)."""
    text = f"{name}: {show_yaml(value)}"
    return T("quoted_value", text=text) if isinstance(value, str) else text


def device_plugin_config(lab: LabState, key: str) -> LineDict:
    """The parsed device-plugin config stored under ``key``; fails the check otherwise."""
    cm = lab.read("configmap")
    if cm is None:
        fail(expected=T("configmap_present"), found=T("absent"), where=where_cm())
    data = (cm or {}).get("data") or {}
    if key not in data:
        fail(
            expected=T("key_present", key=key),
            found=T("keys_are", keys=tuple(sorted(map(str, data))) or T("none")),
            where=where_cm(),
        )
    docs = load_yaml_text(data[key], key)
    if isinstance(docs, FileProblem):
        fail(problem=docs.problem, where=where_cm(key, docs.line))
    docs = [d for d in docs if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], LineDict):
        found = (
            yaml_kind(docs[0])
            if len(docs) == 1
            else T("yaml_type_null")
            if not docs
            else T("yaml_documents", count=len(docs))
        )
        fail(expected=T("yaml_mapping"), found=found, where=where_cm(key))
    return docs[0]


CONFIG_TOP_KEYS = ("version", "flags", "resources", "sharing", "imex")
SHARING_KEYS = ("timeSlicing", "mps")
SHARED_RESOURCE_KEYS = ("name", "rename", "devices", "replicas")
MIG_STRATEGIES = ("none", "single", "mixed")


# Where a field the plugin knows belongs, when it turns up at another level (where the plugin
# drops it as unknown): the learner is told where to move it, not only that it is unknown.
FIELD_HOME = {
    "failRequestsGreaterThanOne": "sharing.timeSlicing",
    "timeSlicing": "sharing",
    "mps": "sharing",
    "migStrategy": "flags",
}


def field_paths(obj: object, field: str, prefix: str = "") -> list[tuple[str, int | None]]:
    """Every ``(path, line)`` at which a mapping of ``obj`` has the key ``field``."""
    out: list[tuple[str, int | None]] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if key == field:
                out.append((path, obj.line_of(key) if isinstance(obj, LineDict) else None))
            out.extend(field_paths(value, field, path))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out.extend(field_paths(value, field, f"{prefix}[{i}]"))
    return out


def config_format_problem(cfg: LineDict, key: str | None = None) -> tuple[Value, Value, int] | None:
    """Why the config ``key`` of the ConfigMap is not one that works as written, or None.

    ``default`` is judged as the lab defines it: a problem in its ``sharing`` is reported as
    what the lab asks there, no sharing at all (check 1.6 says it too), not as how to repair
    a sharing section that should not be there.
    """
    problem = _format_problem(cfg)
    if problem is not None and key == "default" and _within_sharing(cfg, problem[2]):
        return T("default_no_sharing"), problem[1], problem[2]
    return problem


def _within_sharing(cfg: LineDict, line: int | None) -> bool:
    """Whether ``line`` is in the config's ``sharing`` section (its key and what it holds)."""
    if "sharing" not in cfg or not line:
        return False
    start = cfg.line_of("sharing")
    later = [n for k in cfg if k != "sharing" and (n := cfg.line_of(k)) and n > start]
    return bool(start) and line >= start and (not later or line < min(later))


def _format_problem(cfg: LineDict) -> tuple[Value, Value, int] | None:
    """Why ``cfg`` is not a device-plugin config that works as written, or None.

    Returns (what was expected, what was found, line). The plugin itself refuses a version
    other than v1, an unknown MIG strategy, a sharing resource without name or replicas, and
    replicas below 2 (api/config/v1/config.go, replicas.go; cmd/nvidia-device-plugin/main.go).
    Unknown fields it does not refuse: it reads its config leniently (sigs.k8s.io/yaml's
    ``Unmarshal``) and drops them without a word, so a misspelt ``timeSlcing`` quietly turns
    sharing off. That is why this check rejects them: the learner hears it here, not from a
    GPU node that silently does not share.
    """
    for key in cfg:
        if key not in CONFIG_TOP_KEYS:
            return (*_unknown_field(key, CONFIG_TOP_KEYS), cfg.line_of(key))
    if "version" in cfg and cfg["version"] != "v1":
        return "version: v1", f"version: {show_yaml(cfg['version'])}", cfg.line_of("version")
    flags = cfg.get("flags")
    if flags is not None and not isinstance(flags, LineDict):
        found: Value = f"flags: {show_yaml(flags)}"
        return T("field_mapping", field="flags"), found, cfg.line_of("flags")
    if isinstance(flags, LineDict) and flags.get("migStrategy", "none") not in MIG_STRATEGIES:
        return (
            T("field_one_of", field="migStrategy", values=MIG_STRATEGIES),
            f"migStrategy: {show_yaml(flags['migStrategy'])}",
            flags.line_of("migStrategy"),
        )
    sharing = cfg.get("sharing")
    if sharing is None:
        return None
    if not isinstance(sharing, LineDict):
        found = f"sharing: {show_yaml(sharing)}"
        return T("field_mapping", field="sharing"), found, cfg.line_of("sharing")
    for method, body in sharing.items():
        if method not in SHARING_KEYS:
            return (*_unknown_field(method, SHARING_KEYS), sharing.line_of(method))
        resources = body.get("resources") if isinstance(body, dict) else None
        if not isinstance(resources, list) or not resources:
            return (
                T("field_list", field=f"sharing.{method}.resources"),
                f"{method}: {show_yaml(body)}",
                sharing.line_of(method),
            )
        for res in resources:
            if not isinstance(res, LineDict):
                return T("resource_entry"), show_yaml(res), sharing.line_of(method)
            for key in res:
                if key not in SHARED_RESOURCE_KEYS:
                    return (*_unknown_field(key, SHARED_RESOURCE_KEYS), res.line_of(key))
            if "name" not in res:
                return T("key_present", key="name"), T("absent"), res.line
            replicas = res.get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 2:
                found = (
                    T("no_key", key="replicas")
                    if replicas is None
                    else show_field("replicas", replicas)
                )
                return T("replicas_at_least_two"), found, res.line_of("replicas")
    return None


def _unknown_field(key: object, known: tuple[str, ...]) -> tuple[T, T]:
    if key in FIELD_HOME:  # a field the plugin knows, one level off
        return T("known_fields", fields=known), T(
            "field_misplaced", field=str(key), home=FIELD_HOME[key]
        )
    return T("known_fields", fields=known), T("unknown_field", field=str(key))


def dig(obj: Json, *path: str | int) -> Json:
    """``obj[p0][p1]...`` or None where any step is missing or of the wrong type."""
    for p in path:
        if isinstance(p, int):
            if not isinstance(obj, list) or len(obj) <= p:
                return None
            obj = obj[p]
        else:
            if not isinstance(obj, dict) or p not in obj:
                return None
            obj = obj[p]
    return obj


@dataclass
class Derived:
    """A value the lab says to derive, and whether it really came from the ConfigMap."""

    value: int
    from_configmap: bool
    refused: int | None = None  # the ConfigMap's replicas, which the device plugin refuses


def shared_replicas(lab: LabState) -> Derived:
    """``replicas`` of the shared config's nvidia.com/gpu time-slicing resource.

    Falls back to the lab's 4 where that config cannot be read, as LAB.md says, and where
    its replicas is one the device plugin refuses (below 2, api/config/v1/replicas.go): such
    a config advertises nothing, so counting from it would ask the learner for a number no
    node could have (2 x 1), while the lab's answer stays 8.
    """
    try:
        cm = lab.read("configmap")
    except Exception:
        return Derived(LAB_REPLICAS, False)
    raw = ((cm or {}).get("data") or {}).get("shared")
    if not isinstance(raw, str):
        return Derived(LAB_REPLICAS, False)
    docs = load_yaml_text(raw, "shared")
    if isinstance(docs, FileProblem) or not docs or not isinstance(docs[0], dict):
        return Derived(LAB_REPLICAS, False)
    for res in dig(docs[0], "sharing", "timeSlicing", "resources") or []:
        if isinstance(res, dict) and res.get("name") == GPU:
            n = res.get("replicas")
            if isinstance(n, int) and not isinstance(n, bool):
                return Derived(n, True) if n >= 2 else Derived(LAB_REPLICAS, False, refused=n)
    return Derived(LAB_REPLICAS, False)


def lab_node_labels(lab: LabState) -> dict[str, dict[str, str]]:
    """Each lab node's GPU labels as the lab defines them after steps 2 and 3, and no other.

    Step 8 is judged against these, not against the cluster's current labels, so a mistake in
    step 2 or 3 costs its own check and not step 8's as well; and only these, because the lab
    asks to place by the labels of steps 2 and 3 (a hostname label is a node name in disguise).
    The GPU product label may have any value: the cluster's is used where it exists.
    """
    try:
        product = dig(lab.nodes().get(MIG_NODE), "metadata", "labels", PRODUCT_LABEL)
    except Exception:
        product = None
    out: dict[str, dict[str, str]] = {name: {} for name in LAB_NODES}
    for name, config in CONFIG_FOR_NODE.items():
        out[name][CONFIG_LABEL] = config
    out[MIG_NODE].update(MIG_LABELS)
    out[MIG_NODE][PRODUCT_LABEL] = product or "NVIDIA-A100-SXM4-80GB"
    return out


def lab_node(lab: LabState, name: str) -> JsonObject:
    """The lab's node ``name``; fails the check when it is gone."""
    node = lab.nodes().get(name)
    if node is None:  # the lab made it; a learner cannot make it again, a reset does
        fail(problem=T("lab_node_missing", node=name), where=T("cluster_nodes"))
    return node


def node_advertises(lab: LabState, name: str, resource: str, want: int, expected: Value) -> None:
    """Fail unless node ``name`` advertises ``want`` of ``resource``, in both its capacity and
    its allocatable (the scheduler reads allocatable)."""
    status = lab_node(lab, name).get("status") or {}
    found = {f: quantity((status.get(f) or {}).get(resource)) for f in ("capacity", "allocatable")}
    wrong = [f for f, v in found.items() if v != want]
    if wrong:
        fail(
            expected=expected,
            found=", ".join(f"{f}={show_quantity(v)}" for f, v in found.items()),
            where=T(
                "node_status",
                node=name,
                fields=tuple(f"status.{f}" for f in wrong),
                resource=resource,
            ),
        )


def asks_one(pod: JsonObject, resource: str, where: Value) -> None:
    """Fail unless ``pod`` asks for exactly one ``resource`` (over all its containers)."""
    asked = requested(pod, resource)
    if asked != 1:
        fail(expected=f"{resource}: 1", found=f"{resource}: {show_quantity(asked)}", where=where)


def usable(read: R | FileProblem) -> R:
    """What was read of a learner's file; a missing or broken file fails the check with its
    problem (``usable(work.objects(FILE))``)."""
    if isinstance(read, FileProblem):
        fail(problem=read.problem, where=read.where)
    return read


def find_object(objs: list[LineDict], kind: str, name: str, namespace: str, rel: str) -> LineDict:
    """The object ``kind/name`` of a file; its namespace must be ``namespace`` or unset."""
    for obj in objs:
        meta = obj.get("metadata")
        if isinstance(meta, LineDict) and obj.get("kind") == kind and meta.get("name") == name:
            ns = meta.get("namespace")
            if ns not in (None, namespace):
                fail(
                    expected=T("in_namespace", namespace=namespace),
                    found=str(ns),
                    where=f"{rel}:{meta.line_of('namespace')}",
                )
            return obj
    present = [
        f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"
        for o in objs
        if isinstance(o.get("metadata"), dict)
    ]
    fail(
        expected=f"{kind}/{name}",
        found=T("objects_are", objects=tuple(present) or T("none")),
        where=rel,
    )


def line_of(obj: object, rel: str, *path: str) -> str:
    """``file:line`` of the deepest key of ``path`` that exists in ``obj``."""
    line = getattr(obj, "line", None)
    cur = obj
    for p in path:
        if isinstance(cur, LineDict) and p in cur:
            line = cur.line_of(p)
            cur = cur[p]
        else:
            break
    return f"{rel}:{line}" if line else rel
