"""Step 4: two pods that differ only in the resource name land on different nodes."""

from gpushare.grading.checks import T, check, fail
from gpushare.grading.lab_rules import MIG_NODE, MIG_PROFILE, find_object, line_of, objects_of
from gpushare.grading.labstate import GPU, node_conditions, requested, show_quantity

FILE = "k8s/mig-job.yaml"
NS = "gpu-share"
PODS = {"mig-job": MIG_PROFILE, "plain-gpu": GPU}


def _cluster_pod(lab, name):
    pod = lab.pods(NS).get(name)
    if pod is None:
        fail(
            expected=T("pod_present", pod=f"{NS}/{name}"),
            found=T("absent"),
            where=T("cluster_pods", namespace=NS),
        )
    return pod


@check("4.1", 3)
def test_4_1_file_holds_the_two_pods(lab, work):
    objs = objects_of(work, FILE)
    for name, resource in PODS.items():
        pod = find_object(objs, "Pod", name, NS, FILE)
        asked = requested(pod, resource)
        if asked != 1:
            fail(
                expected=f"{resource}: 1",
                found=f"{resource}: {show_quantity(asked)}",
                where=line_of(pod, FILE, "spec", "containers"),
            )
    for name, resource in PODS.items():
        pod = find_object(objs, "Pod", name, NS, FILE)
        live = lab.pods(NS).get(name)
        if live is None:
            fail(
                expected=T("applied_to_cluster"),
                found=T("absent"),
                where=T("cluster_pods", namespace=NS),
            )
        if requested(live, resource) != requested(pod, resource) or sorted(
            str(c.get("name")) for c in live["spec"].get("containers", [])
        ) != sorted(str(c.get("name")) for c in pod["spec"].get("containers", [])):
            fail(
                expected=T("file_matches_cluster", key=name),
                found=T("file_differs_from_cluster", key=name),
                where=f"{FILE}:{pod.line}",
            )


@check("4.2", 3)
def test_4_2_no_node_conditions(lab, work):
    objs = objects_of(work, FILE)
    for name in PODS:
        pod = find_object(objs, "Pod", name, NS, FILE)
        conds = node_conditions(pod)
        if conds:
            fail(
                expected=T("no_node_condition"),
                found=", ".join(conds),
                where=line_of(pod, FILE, "spec", conds[0].split(".")[0]),
            )
    for name in PODS:
        live = _cluster_pod(lab, name)
        conds = [c for c in node_conditions(live) if c != "nodeName"]
        if conds:
            fail(
                expected=T("no_node_condition"),
                found=", ".join(conds),
                where=T("cluster_pod", pod=f"{NS}/{name}"),
            )


def _placed(lab, name, resource):
    pod = _cluster_pod(lab, name)
    asked = requested(pod, resource)
    if asked != 1:
        fail(
            expected=f"{resource}: 1",
            found=f"{resource}: {show_quantity(asked)}",
            where=T("cluster_pod", pod=f"{NS}/{name}"),
        )
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        fail(
            expected=T("scheduled"), found=T("pending"), where=T("cluster_pod", pod=f"{NS}/{name}")
        )
    return node


@check("4.3", 4)
def test_4_3_mig_job_lands_on_the_mig_node(lab):
    node = _placed(lab, "mig-job", MIG_PROFILE)
    if node != MIG_NODE:
        fail(
            expected=T("on_node", node=MIG_NODE),
            found=T("on_node", node=node),
            where=T("cluster_pod", pod=f"{NS}/mig-job"),
        )


@check("4.4", 4)
def test_4_4_plain_gpu_avoids_the_mig_node(lab):
    node = _placed(lab, "plain-gpu", GPU)
    if node == MIG_NODE:
        fail(
            expected=T("not_on_node", node=MIG_NODE),
            found=T("on_node", node=node),
            where=T("cluster_pod", pod=f"{NS}/plain-gpu"),
        )
