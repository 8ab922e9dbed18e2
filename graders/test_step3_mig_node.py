"""Step 3: lab-node-2 is a MIG "mixed" node that advertises profile names, not nvidia.com/gpu."""

from gpulab import GPU, HINT_QUERIES, MIG_PREFIX, QUERIES
from gpulab.rules import MIG_COUNT, MIG_NODE, MIG_PROFILE, node_resource
from gpushare.grading.checks import T, check, fail
from gpushare.grading.labstate import show_quantity

# every step that judges the cluster reads the lab's queries (one read for all)
READS, HINT_READS = QUERIES, HINT_QUERIES

STRATEGY = "nvidia.com/mig.strategy"
PRODUCT = "nvidia.com/gpu.product"


def _node(lab):
    node = lab.nodes().get(MIG_NODE)
    if node is None:  # the lab made it; a learner cannot make it again, a reset does
        fail(problem=T("lab_node_missing", node=MIG_NODE), where=T("cluster_nodes"))
    return node


@check("3.1", 4)
def test_3_1_mig_labels(lab):
    labels = _node(lab)["metadata"].get("labels") or {}
    if labels.get(STRATEGY) != "mixed" or not str(labels.get(PRODUCT, "")).strip():
        fail(
            expected=T("mig_labels", strategy=STRATEGY, product=PRODUCT),
            found=", ".join(f"{k}={v}" for k, v in labels.items() if k in (STRATEGY, PRODUCT))
            or T("absent"),
            where=T("node_labels", node=MIG_NODE),
        )


@check("3.2", 4)
def test_3_2_mig_profile_advertised(lab):
    node = _node(lab)
    found = {f: node_resource(node, f, MIG_PROFILE) for f in ("capacity", "allocatable")}
    wrong = [f for f, v in found.items() if v != MIG_COUNT]
    if wrong:
        fail(
            expected=f"capacity={MIG_COUNT}, allocatable={MIG_COUNT}",
            found=", ".join(f"{f}={show_quantity(v)}" for f, v in found.items()),
            where=T(
                "node_status",
                node=MIG_NODE,
                fields=tuple(f"status.{f}" for f in wrong),
                resource=MIG_PROFILE,
            ),
        )


@check("3.3", 4)
def test_3_3_mig_node_has_no_plain_gpu(lab):
    status = _node(lab).get("status") or {}
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
