"""Step 2: nodes pick a device-plugin config by label; their GPU count follows replicas."""

from gpulab import CONFIG_LABEL, GPU, HINT_QUERIES, QUERIES
from gpulab.rules import (
    CONFIG_FOR_NODE,
    LAB_REPLICAS,
    PHYSICAL_GPUS,
    node_resource,
    shared_replicas,
)
from gpushare.grading.checks import T, check, fail
from gpushare.grading.labstate import show_quantity

# every step that judges the cluster reads the lab's queries (one read for all)
READS, HINT_READS = QUERIES, HINT_QUERIES


def _node(lab, name):
    node = lab.nodes().get(name)
    if node is None:  # the lab made it; a learner cannot make it again, a reset does
        fail(problem=T("lab_node_missing", node=name), where=T("cluster_nodes"))
    return node


def _label_check(lab, name):
    labels = _node(lab, name)["metadata"].get("labels") or {}
    want = CONFIG_FOR_NODE[name]
    if labels.get(CONFIG_LABEL) != want:
        fail(
            expected=f"{CONFIG_LABEL}={want}",
            found=f"{CONFIG_LABEL}={labels[CONFIG_LABEL]}"
            if CONFIG_LABEL in labels
            else T("absent"),
            where=T("node_labels", node=name),
        )


def _gpu_count_check(lab, name, want, derivation, note=None):
    node = _node(lab, name)
    found = {f: node_resource(node, f, GPU) for f in ("capacity", "allocatable")}
    wrong = {f: v for f, v in found.items() if v != want}
    if wrong:
        expected = T("gpu_count", value=want, derivation=derivation)
        fail(
            expected=[expected, note] if note is not None else expected,
            found=", ".join(f"{f}={show_quantity(v)}" for f, v in found.items()),
            where=T(
                "node_status", node=name, fields=tuple(f"status.{f}" for f in wrong), resource=GPU
            ),
        )


@check("2.1", 2)
def test_2_1_lab_node_0_uses_default_config(lab):
    _label_check(lab, "lab-node-0")


@check("2.2", 2)
def test_2_2_lab_node_1_uses_shared_config(lab):
    _label_check(lab, "lab-node-1")


@check("2.3", 4)
def test_2_3_lab_node_0_advertises_its_two_gpus(lab):
    _gpu_count_check(lab, "lab-node-0", PHYSICAL_GPUS, T("derive_physical", gpus=PHYSICAL_GPUS))


@check("2.4", 4)
def test_2_4_lab_node_1_advertises_gpus_times_replicas(lab):
    """The count follows the ConfigMap's replicas, so a wrong replicas costs 1.5 and not this
    check too; but the lab's own number (2 x 4 = 8) is always said: a learner must not be
    left to think that a count from a wrong replicas is the lab's answer."""
    replicas = shared_replicas(lab)
    note = None
    if replicas.refused is not None:
        derivation = T("derive_replicas_lab", gpus=PHYSICAL_GPUS, replicas=replicas.value)
        note = T("replicas_refused_note", refused=replicas.refused)
    else:
        derivation = T(
            "derive_replicas" if replicas.from_configmap else "derive_replicas_fallback",
            gpus=PHYSICAL_GPUS,
            replicas=replicas.value,
        )
        if replicas.value != LAB_REPLICAS:
            note = T("lab_replicas_note", replicas=LAB_REPLICAS, value=PHYSICAL_GPUS * LAB_REPLICAS)
    _gpu_count_check(lab, "lab-node-1", PHYSICAL_GPUS * replicas.value, derivation, note)
