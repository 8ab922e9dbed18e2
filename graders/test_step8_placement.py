"""Step 8: each workload on the node that suits it, chosen by labels, recorded truthfully."""

from gpulab import GPU, HINT_QUERIES, MIG_PREFIX, QUERIES, configs, namespaces_of_pod
from gpulab.rules import (
    MIG_NODE,
    PLACEMENT,
    blocked_node_hint,
    dig,
    find_object,
    lab_node_labels,
    pod_line,
    show_yaml,
    usable,
)
from gpushare.lab_api import (
    JsonObject,
    LabState,
    T,
    Value,
    Workdir,
    check,
    explain_scheduler,
    fail,
    pending_reason,
    pod_resources,
    requested,
    selects_by_label,
    show_quantity,
)

READS, HINT_READS = QUERIES, HINT_QUERIES

FILE = "k8s/placement.yaml"
OUT = "out/placement.txt"
NS = "gpu-share"
PODS = tuple(PLACEMENT)
# what makes each workload's node its node: the role comes before the name, since choosing
# the node from its role is what this step teaches (review 3, N33)
ROLE = {
    PLACEMENT["batch-train"]: "role_unshared",
    PLACEMENT["notebook"]: "role_shared",
    MIG_NODE: "role_mig",
}


def _node(node: str) -> T:
    """A workload's node as its role and its name: "the unshared node (lab-node-0)"."""
    return T("role_node", role=T(ROLE[node]), node=node)


def _resource_problem(pod: JsonObject) -> tuple[Value, Value] | None:
    """None when the pod asks what its workload needs, else (expected, found)."""
    name = pod["metadata"]["name"]
    if name == "prod-inference":
        mig = sorted(r for r in pod_resources(pod) if str(r).startswith(MIG_PREFIX))
        if not mig or GPU in pod_resources(pod):
            asked = tuple(sorted(map(str, pod_resources(pod))))
            return T("mig_resource"), asked or T("no_resource_request")
        return None
    total = requested(pod, GPU)
    if total != 1:
        return f"{GPU}: 1", T("key_value", key=GPU, value=show_quantity(total))
    return None


def _renamed_cause(lab: LabState, pod: JsonObject) -> str | None:
    """The root of a pod asking for the name the shared config's renaming advertises
    (nvidia.com/gpu.shared) instead of nvidia.com/gpu: that config's check (1.5)."""
    name = configs.renamed_gpu(lab)
    return configs.renamed("shared") if name and requested(pod, name) else None


@check("8.1", 3)
def test_8_1_placement_file(lab: LabState, work: Workdir) -> None:
    objs = usable(work.objects(FILE))
    nodes = lab_node_labels(lab)
    for name in PODS:
        pod = find_object(objs, "Pod", name, NS, FILE)
        problem = _resource_problem(pod)
        if problem:
            fail(
                expected=problem[0],
                found=problem[1],
                where=pod_line(pod, FILE, "spec", "containers"),
                cause=_renamed_cause(lab, pod),
            )
        spec = pod.get("spec")
        if isinstance(spec, dict) and spec.get("nodeName"):
            fail(
                expected=T("by_label"),
                found=f"nodeName: {spec['nodeName']}",
                where=pod_line(pod, FILE, "spec", "nodeName"),
            )
        chosen = sorted(n for n, labels in nodes.items() if selects_by_label(pod, labels))
        if selects_by_label(pod, {}) is None or chosen != [PLACEMENT[name]]:
            fail(
                expected=T("selects_only", node=_node(PLACEMENT[name])),
                found=_selection(pod, chosen),
                where=pod_line(pod, FILE, "spec"),
            )


HOSTNAME = "kubernetes.io/hostname"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _selection(pod: JsonObject, chosen: list[str]) -> T:
    """What the pod's label condition selects among the lab's labels of steps 2 and 3.

    A hostname selector selects none of them: ``kubernetes.io/hostname`` is the node's name
    written as a label (the kubelet sets it), which is the pinning this step rules out.
    """
    if selects_by_label(pod, {}) is None:
        return T("no_label_condition")
    if chosen:
        return T("selects_nodes", nodes=tuple(chosen))
    selector = dig(pod, "spec", "nodeSelector")
    selector = selector if isinstance(selector, dict) else {}
    keys = {str(k) for k in selector}
    shown = [f"{k}={show_yaml(v)}" for k, v in selector.items()]  # what the learner wrote
    affinity = dig(pod, "spec", "affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms")
    for term in affinity if isinstance(affinity, list) else []:
        exprs = term.get("matchExpressions") if isinstance(term, dict) else None
        for e in exprs if isinstance(exprs, list) else []:
            if isinstance(e, dict):
                keys.add(str(e.get("key")))
                shown.append(f"{e.get('key')} {e.get('operator')} {show_yaml(e.get('values'))}")
    if HOSTNAME in keys:
        return T("selects_by_hostname", label=HOSTNAME)
    return T("selects_no_lab_node", labels=tuple(str(s) for s in shown[:4]))


@check("8.2", 4)
def test_8_2_pods_on_the_right_nodes(lab: LabState) -> None:
    pods = lab.pods(NS)
    for name in PODS:
        pod = pods.get(name)
        if pod is None:
            elsewhere = namespaces_of_pod(lab, name)
            fail(
                expected=T("pod_in_namespace", pod=name, namespace=NS),
                found=T("pod_in_namespaces", pod=name, namespaces=tuple(elsewhere))
                if elsewhere
                else T("absent"),
                where=T("cluster_pods", namespace=NS),
            )
        problem = _resource_problem(pod)
        if problem:
            # the check's hint ("training is fastest on a whole GPU") would feed the very
            # mistake of a pod asking for two: this one says what a slice or a GPU count means
            fail(
                expected=problem[0],
                found=problem[1],
                where=T("cluster_pod", pod=f"{NS}/{name}"),
                hint=T("hint_one_device_each"),
                cause=_renamed_cause(lab, pod),
            )
        node = (pod.get("spec") or {}).get("nodeName")
        if node != PLACEMENT[name]:
            reason = pending_reason(pod) if not node else None
            found = T("on_node", node=node) if node else T("pending")
            fail(
                expected=T("on_workload_node", node=_node(PLACEMENT[name])),
                found=[found, T("scheduler_says", message=explain_scheduler(reason))]
                if reason
                else found,
                where=T("cluster_pod", pod=f"{NS}/{name}"),
                hint=blocked_node_hint(lab, pod) if not node else None,
            )


@check("8.3", 3)
def test_8_3_placement_record_matches_reality(lab: LabState, work: Workdir) -> None:
    table = usable(work.key_values(OUT))
    pods = lab.pods(NS)
    for name in PODS:
        real = ((pods.get(name) or {}).get("spec") or {}).get("nodeName")
        if name not in table:
            fail(expected=T("placement_line", pod=name), found=T("absent"), where=OUT)
        written, line = table[name]
        if not real:
            fail(
                expected=T("pod_scheduled_first", pod=name),
                found=f"{name}={written}",
                where=f"{OUT}:{line}",
            )
        if written != real:
            fail(
                expected=T("matches_cluster_placement", pod=name),
                found=f"{name}={written}",
                where=f"{OUT}:{line}",
            )
    extra = [k for k in table if k not in PODS]
    if extra:
        fail(
            expected=T("keys_exactly", keys=PODS),
            found=T("keys_extra", extra=tuple(extra)),
            where=f"{OUT}:{table[extra[0]][1]}",
        )
