"""Step 2: nodes pick a device-plugin config by label; their GPU count follows replicas."""

from gpulab import CONFIG_LABEL, GPU, HINT_QUERIES, QUERIES
from gpulab.configs import shared_replicas
from gpulab.rules import (
    CONFIG_FOR_NODE,
    LAB_REPLICAS,
    PHYSICAL_GPUS,
    lab_node,
    node_advertises,
)
from gpushare.lab_api import LabState, T, check, fail, quantity

READS, HINT_READS = QUERIES, HINT_QUERIES


def _label_check(lab: LabState, name: str) -> None:
    labels = lab_node(lab, name)["metadata"].get("labels") or {}
    want = CONFIG_FOR_NODE[name]
    if labels.get(CONFIG_LABEL) != want:
        fail(
            expected=f"{CONFIG_LABEL}={want}",
            found=f"{CONFIG_LABEL}={labels[CONFIG_LABEL]}"
            if CONFIG_LABEL in labels
            else T("absent"),
            where=T("node_labels", node=name),
        )


def _gpu_count_check(
    lab: LabState, name: str, want: int, derivation: T, note: T | None = None
) -> None:
    expected = T("gpu_count", value=want, derivation=derivation)
    node_advertises(lab, name, GPU, want, [expected, note] if note is not None else expected)


@check("2.1", 2)
def test_2_1_lab_node_0_uses_default_config(lab: LabState) -> None:
    _label_check(lab, "lab-node-0")


@check("2.2", 2)
def test_2_2_lab_node_1_uses_shared_config(lab: LabState) -> None:
    _label_check(lab, "lab-node-1")


@check("2.3", 4)
def test_2_3_lab_node_0_advertises_its_two_gpus(lab: LabState) -> None:
    _gpu_count_check(lab, "lab-node-0", PHYSICAL_GPUS, T("derive_physical", gpus=PHYSICAL_GPUS))


@check("2.4", 4)
def test_2_4_lab_node_1_advertises_gpus_times_replicas(lab: LabState) -> None:
    """The count follows the ConfigMap's replicas, so a wrong replicas costs 1.5 and not this
    check too; but the lab's own number (2 x 4 = 8) is always said: a learner must not be
    left to think that a count from a wrong replicas is the lab's answer. Where the shared
    config gives nvidia.com/gpu no count (the plugin refuses it, renames the resource, or
    shares only some GPUs), the lab's number is the one judged, and the reason is said: never
    that it was read from the ConfigMap. A node that shows what such a config would make it
    show fails pointing to that config's check."""
    derived = shared_replicas(lab)
    note: T | None = None
    if derived.why is not None:
        derivation = T(
            "derive_lab_because", gpus=PHYSICAL_GPUS, replicas=derived.replicas, why=derived.why
        )
    else:
        derivation = T(
            "derive_replicas" if derived.from_configmap else "derive_replicas_fallback",
            gpus=PHYSICAL_GPUS,
            replicas=derived.replicas,
        )
        if derived.replicas != LAB_REPLICAS:
            note = T("lab_replicas_note", replicas=LAB_REPLICAS, value=PHYSICAL_GPUS * LAB_REPLICAS)
    cause = None
    if derived.follows is not None:
        resource, count = derived.follows
        status = lab_node(lab, "lab-node-1").get("status") or {}
        if quantity((status.get("allocatable") or {}).get(resource)) == count:
            cause = derived.cause
    want = PHYSICAL_GPUS * derived.replicas
    expected = T("gpu_count", value=want, derivation=derivation)
    node_advertises(
        lab, "lab-node-1", GPU, want, [expected, note] if note is not None else expected, cause
    )
