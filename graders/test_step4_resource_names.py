"""Step 4: two pods that differ only in the resource name land on different nodes."""

from typing import NoReturn

from gpulab import GPU, HINT_QUERIES, QUERIES, namespaces_of_pod
from gpulab.rules import (
    MIG_NODE,
    MIG_PROFILE,
    asks_one,
    blocked_node_hint,
    find_object,
    in_pod,
    pod_line,
    usable,
)
from gpushare.lab_api import (
    Json,
    JsonObject,
    LabState,
    LineDict,
    T,
    Value,
    Workdir,
    check,
    explain_scheduler,
    fail,
    node_conditions,
    pending_reason,
    quantity,
    requested,
)

READS, HINT_READS = QUERIES, HINT_QUERIES

FILE = "k8s/mig-job.yaml"
NS = "gpu-share"
PODS = {"mig-job": MIG_PROFILE, "plain-gpu": GPU}
FIELDS = ("capacity", "allocatable")


def _file_pod(work: Workdir, name: str) -> LineDict | None:
    """The file's pod ``name``, or None (a broken file is 4.1's to report)."""
    objs = work.objects(FILE)
    for obj in objs if isinstance(objs, list) else []:
        meta = obj.get("metadata")
        if isinstance(meta, dict) and obj.get("kind") == "Pod" and meta.get("name") == name:
            return obj
    return None


def _absent(lab: LabState, work: Workdir, name: str, expected: Value) -> NoReturn:
    """Fail for a pod that gpu-share lacks, saying where it is when another namespace has it.

    A file that sets no namespace, applied without ``-n gpu-share``, puts its pods in the
    current namespace (``default``): the pods exist, just not where the lab looks.
    """
    elsewhere = namespaces_of_pod(lab, name)
    found: T | list[T] = T("absent")
    hint = None
    if elsewhere:
        found = [T("pod_in_namespaces", pod=name, namespaces=tuple(elsewhere))]
        pod = _file_pod(work, name)
        meta = pod.get("metadata") if pod is not None else None
        if isinstance(meta, dict) and not meta.get("namespace"):
            found.append(T("file_sets_no_namespace", file=FILE, namespace=NS))
            hint = T("hint_pods_elsewhere", namespaces=tuple(elsewhere), namespace=NS)
    fail(
        expected=expected,
        found=found,
        where=T("cluster_pods", namespace=NS),
        hint=hint,
        cause=f"pods:{FILE}:elsewhere" if hint else None,
    )


def _cluster_pod(lab: LabState, work: Workdir, name: str) -> JsonObject:
    pod = lab.pods(NS).get(name)
    if pod is None:
        _absent(lab, work, name, T("pod_in_namespace", pod=name, namespace=NS))
    return pod


def _preferred_only(pod: JsonObject, conds: list[str]) -> bool:
    """Whether the pod's only node constraint is a preferred node affinity: one that forbids
    no node but still steers the scheduler, so it counts here too (graders/RULES.md)."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return (
        conds == ["affinity.nodeAffinity"]
        and isinstance(affinity, dict)
        and set(affinity) == {"preferredDuringSchedulingIgnoredDuringExecution"}
    )


@check("4.1", 3)
def test_4_1_file_holds_the_two_pods(lab: LabState, work: Workdir) -> None:
    objs = usable(work.objects(FILE))
    for name, resource in PODS.items():
        pod = find_object(objs, "Pod", name, NS, FILE)
        asks_one(pod, resource, where=pod_line(pod, FILE, "spec", "containers"))
    for name, resource in PODS.items():
        pod = find_object(objs, "Pod", name, NS, FILE)
        live = lab.pods(NS).get(name)
        if live is None:
            _absent(lab, work, name, T("applied_to_cluster"))
        if requested(live, resource) != requested(pod, resource) or sorted(
            str(c.get("name")) for c in live["spec"].get("containers", [])
        ) != sorted(str(c.get("name")) for c in pod["spec"].get("containers", [])):
            fail(
                expected=T("file_matches_cluster", key=name),
                found=T("file_differs_from_cluster", key=name),
                where=in_pod(f"{FILE}:{pod.line}", pod),
            )


@check("4.2", 3)
def test_4_2_no_node_conditions(lab: LabState, work: Workdir) -> None:
    objs = usable(work.objects(FILE))
    for name in PODS:
        pod = find_object(objs, "Pod", name, NS, FILE)
        conds = node_conditions(pod)
        if conds:
            fail(
                expected=T("no_node_condition"),
                found=T("conditions_set", conditions=tuple(conds)),
                where=pod_line(pod, FILE, "spec", conds[0].split(".")[0]),
                hint=T("hint_preferred_affinity") if _preferred_only(pod, conds) else None,
            )
    for name in PODS:
        live = _cluster_pod(lab, work, name)
        conds = [c for c in node_conditions(live) if c != "nodeName"]
        if conds:
            fail(
                expected=T("no_node_condition"),
                found=T("conditions_set", conditions=tuple(conds)),
                where=T("cluster_pod", pod=f"{NS}/{name}"),
            )


def _placed(lab: LabState, work: Workdir, name: str, resource: str) -> Json:
    """The node the pod ``name`` is on (its ``spec.nodeName``); fails unless it is scheduled."""
    pod = _cluster_pod(lab, work, name)
    asks_one(pod, resource, where=T("cluster_pod", pod=f"{NS}/{name}"))
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        reason = pending_reason(pod)
        fail(
            expected=T("scheduled"),
            found=[T("pending"), T("scheduler_says", message=explain_scheduler(reason))]
            if reason
            else T("pending"),
            where=T("cluster_pod", pod=f"{NS}/{name}"),
            hint=blocked_node_hint(lab, pod),
        )
    return node


@check("4.3", 4)
def test_4_3_mig_job_lands_on_the_mig_node(lab: LabState, work: Workdir) -> None:
    node = _placed(lab, work, "mig-job", MIG_PROFILE)
    if node != MIG_NODE:
        found = [T("on_node", node=node)]
        status = (lab.nodes().get(node) or {}).get("status") or {}
        advertised = [quantity((status.get(f) or {}).get(MIG_PROFILE)) for f in FIELDS]
        if any(advertised):  # the scheduler was right: that node offers the profile too
            found.append(T("also_advertises", node=node, resource=MIG_PROFILE))
        fail(
            expected=T("on_node", node=MIG_NODE),
            found=found,
            where=T("cluster_pod", pod=f"{NS}/mig-job"),
        )


@check("4.4", 4)
def test_4_4_plain_gpu_avoids_the_mig_node(lab: LabState, work: Workdir) -> None:
    node = _placed(lab, work, "plain-gpu", GPU)
    if node == MIG_NODE:
        fail(
            expected=T("not_on_node", node=MIG_NODE),
            found=T("on_node", node=node),
            where=T("cluster_pod", pod=f"{NS}/plain-gpu"),
        )
