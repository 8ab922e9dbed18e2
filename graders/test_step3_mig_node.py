"""Step 3: lab-node-2 is a MIG "mixed" node that advertises profile names, not nvidia.com/gpu."""

from gpulab import GPU, HINT_QUERIES, MIG_PREFIX, QUERIES
from gpulab.rules import (
    MIG_COUNT,
    MIG_NODE,
    MIG_PROFILE,
    PRODUCT_LABEL,
    STRATEGY_LABEL,
    lab_node,
    node_advertises,
)
from gpushare.lab_api import LabState, T, check, fail

READS, HINT_READS = QUERIES, HINT_QUERIES


@check("3.1", 4)
def test_3_1_mig_labels(lab: LabState) -> None:
    meta = lab_node(lab, MIG_NODE)["metadata"]
    labels = meta.get("labels") or {}
    if labels.get(STRATEGY_LABEL) != "mixed" or not str(labels.get(PRODUCT_LABEL, "")).strip():
        wanted = (STRATEGY_LABEL, PRODUCT_LABEL)
        shown = ", ".join(f"{k}={v}" for k, v in labels.items() if k in wanted)
        found: list[str | T] = [shown] if shown else []
        # kubectl annotate takes the same KEY=value: the node then carries it, but not as a
        # label, and nothing that selects nodes by label (the device plugin, a nodeSelector)
        # sees it
        annotations = meta.get("annotations") or {}
        noted = [k for k in wanted if k in annotations and k not in labels]
        found += [T("annotation_not_label", key=k, value=str(annotations[k])) for k in noted]
        fail(
            expected=T("mig_labels", strategy=STRATEGY_LABEL, product=PRODUCT_LABEL),
            found=(found if len(found) > 1 else found[0]) if found else T("absent"),
            where=T("node_labels", node=MIG_NODE),
            hint=T("hint_annotation_not_label", node=MIG_NODE) if noted else None,
        )


@check("3.2", 4)
def test_3_2_mig_profile_advertised(lab: LabState) -> None:
    expected = f"capacity={MIG_COUNT}, allocatable={MIG_COUNT}"
    node_advertises(lab, MIG_NODE, MIG_PROFILE, MIG_COUNT, expected)


@check("3.3", 4)
def test_3_3_mig_node_has_no_plain_gpu(lab: LabState) -> None:
    status = lab_node(lab, MIG_NODE).get("status") or {}
    fields = ("capacity", "allocatable")
    has_gpu = [f for f in fields if GPU in (status.get(f) or {})]
    profiles = sorted(
        {r for f in fields for r in (status.get(f) or {}) if str(r).startswith(MIG_PREFIX)}
    )
    if has_gpu:
        fail(
            expected=T("no_resource", resource=GPU),
            found=", ".join(f"{f}[{GPU}]={status[f][GPU]}" for f in has_gpu),
            where=T(
                "node_status",
                node=MIG_NODE,
                fields=tuple(f"status.{f}" for f in has_gpu),
                resource=GPU,
            ),
        )
    if not profiles:
        fail(
            expected=T("mig_profiles_only"),
            found=T("no_mig_profiles"),
            where=T(
                "node_status",
                node=MIG_NODE,
                fields=("status.capacity", "status.allocatable"),
                resource=MIG_PREFIX + "*",
            ),
        )
