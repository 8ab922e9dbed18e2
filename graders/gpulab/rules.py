"""The lab's rules as code: names, expected values, and how they are derived.

Where LAB.md says a value is derived (lab-node-1's GPUs are 2 x the ``replicas`` of the
ConfigMap's ``shared`` config), the derivation lives here, once, for every grader. Every reader
returns a value or fails the check with a problem (``fail``); none crashes on learner input.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml

from gpulab import CONFIG_LABEL, CONFIGMAP_NAME, CONFIGMAP_NS
from gpushare.data import Json, JsonObject
from gpushare.grading.checks import T, Value, fail
from gpushare.grading.labstate import LabState, quantity, requested, show_quantity
from gpushare.lab import nodes
from gpushare.submissions.workdir import FileProblem, LineDict

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


def node_advertises(
    lab: LabState, name: str, resource: str, want: int, expected: Value, cause: str | None = None
) -> None:
    """Fail unless node ``name`` advertises ``want`` of ``resource``, in both its capacity and
    its allocatable (the scheduler reads allocatable); ``cause``: the root a failure follows
    from."""
    status = lab_node(lab, name).get("status") or {}
    found = {f: quantity((status.get(f) or {}).get(resource)) for f in ("capacity", "allocatable")}
    wrong = [f for f, v in found.items() if v != want]
    if wrong:
        fail(
            expected=expected,
            found=tuple(T("key_value", key=f, value=show_quantity(v)) for f, v in found.items()),
            where=T(
                "node_status",
                node=name,
                fields=tuple(f"status.{f}" for f in wrong),
                resource=resource,
            ),
            cause=cause,
        )


def asks_one(pod: JsonObject, resource: str, where: Value) -> None:
    """Fail unless ``pod`` asks for exactly one ``resource`` (over all its containers)."""
    asked = requested(pod, resource)
    if asked != 1:
        found = T("key_value", key=resource, value=show_quantity(asked))
        fail(expected=f"{resource}: 1", found=found, where=where)


def usable(read: R | FileProblem) -> R:
    """What was read of a learner's file; a missing or broken file fails the check with its
    problem (``usable(work.objects(FILE))``)."""
    if isinstance(read, FileProblem):
        fail(problem=read.problem, where=read.where, cause=read.cause)
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
