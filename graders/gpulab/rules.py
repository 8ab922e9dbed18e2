"""The lab's rules as code: names, expected values, and how they are derived.

Where LAB.md says a value is derived (lab-node-1's GPUs are 2 x the ``replicas`` of the
ConfigMap's ``shared`` config), the derivation lives here, once, for every grader. Every reader
returns a value or fails the check with a problem (``fail``); none crashes on learner input.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from gpulab import CONFIG_LABEL, CONFIGMAP_NAME, CONFIGMAP_NS
from gpushare import lab_api
from gpushare.lab_api import (
    CheckFailed,
    FileProblem,
    JsonObject,
    LabState,
    LineDict,
    T,
    Value,
    fail,
    load_nodes,
    pending_reason,
    quantity,
    show_quantity,
)

# the engine's generic readers, named here too for the steps that import them from the rules
from gpushare.lab_api import asks_one as asks_one
from gpushare.lab_api import dig as dig
from gpushare.lab_api import line_of as line_of
from gpushare.lab_api import show_yaml as show_yaml

R = TypeVar("R")

LAB_NODES = load_nodes(Path(__file__).resolve().parents[1] / "lab.toml").names
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


# A file problem whose check's own hint (about the file's content) would mislead: the hint
# for what was found instead. A YAML syntax error is found by kubectl's client-side check,
# which names the line; a line of the isolation table that is not KEY=value gets the form.
_PROBLEM_HINTS = {
    "yaml_invalid": "hint_yaml_syntax",
    "yaml_invalid_nowhere": "hint_yaml_syntax",
    "line_not_key_value": "hint_key_value_form",
}


def usable(read: R | FileProblem) -> R:
    """The engine's :func:`gpushare.lab_api.usable`, with the hint for the file's problem where
    the check's own would mislead (``usable(work.objects(FILE))``)."""
    key = _PROBLEM_HINTS.get(read.problem.key) if isinstance(read, FileProblem) else None
    if isinstance(read, FileProblem) and key:
        fail(problem=read.problem, where=read.where, hint=T(key, file=read.path), cause=read.cause)
    return lab_api.usable(read)


def in_pod(where: str, pod: object) -> T | str:
    """A ``file:line`` into a file of several pods, with the pod it falls in
    ("k8s/placement.yaml:37 (pod batch-train)"): a line number alone makes the learner count
    documents."""
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return T("where_in_pod", where=where, pod=name) if isinstance(name, str) and name else where


def pod_line(pod: object, rel: str, *path: str) -> T | str:
    """:func:`line_of` into a pod of a multi-pod file, naming the pod (:func:`in_pod`)."""
    return in_pod(line_of(pod, rel, *path), pod)


def find_object(objs: list[LineDict], kind: str, name: str, namespace: str, rel: str) -> LineDict:
    """The engine's :func:`gpushare.lab_api.find_object`; a pod in the wrong namespace is
    located with its name as well (:func:`in_pod`)."""
    try:
        return lab_api.find_object(objs, kind, name, namespace, rel)
    except CheckFailed as exc:
        if kind == "Pod" and isinstance(exc.where, str) and ":" in exc.where:
            exc.where = in_pod(exc.where, {"metadata": {"name": name}})
        raise


def blocked_node_hint(lab: LabState, pod: JsonObject) -> T | None:
    """For a pod the scheduler left Pending because of a cordoned or tainted node: the hint
    that names those nodes and how such a node is freed; None for any other reason.

    ``kubectl cordon`` sets ``spec.unschedulable`` (and the taint
    ``node.kubernetes.io/unschedulable``), which the scheduler reports as "node(s) were
    unschedulable"; another NoSchedule/NoExecute taint the pod does not tolerate it reports as
    "untolerated taint". The scheduler's own sentence is in the failure's Found.
    """
    reason = pending_reason(pod) or ""
    try:
        nodes = lab.nodes()
    except Exception:  # an explanation only: never a reason to fail
        return None
    cordoned = sorted(n for n, o in nodes.items() if dig(o, "spec", "unschedulable") is True)
    tainted = sorted(
        n
        for n, o in nodes.items()
        if n not in cordoned
        and any(
            isinstance(t, dict) and t.get("effect") in ("NoSchedule", "NoExecute")
            for t in (dig(o, "spec", "taints") or [])
        )
    )
    if "unschedulable" in reason and cordoned:
        return T("hint_node_cordoned", nodes=tuple(cordoned))
    if "taint" in reason and tainted:
        return T("hint_node_tainted", nodes=tuple(tainted))
    return None
