"""Step 5: a ResourceQuota pins team-a's GPU share; the apiserver denies the third GPU."""

import json
import re
from decimal import Decimal

from gpulab import GPU, HINT_QUERIES, QUERIES, QUOTA_NAME, QUOTA_NS
from gpulab.rules import asks_one, find_object, line_of, usable
from gpushare.lab_api import (
    CheckFailed,
    JsonObject,
    LabState,
    LineDict,
    T,
    Value,
    Workdir,
    check,
    fail,
    quantity,
    requested,
    show_quantity,
)

READS, HINT_READS = QUERIES, HINT_QUERIES

QUOTA_FILE = "k8s/gpu-quota.yaml"
OVER_FILE = "k8s/team-over.yaml"
DENIED_FILE = "out/quota-denied.txt"
KEY = f"requests.{GPU}"
LIMIT = 2
IN_CLUSTER = T("cluster_quota", quota=f"{QUOTA_NS}/{QUOTA_NAME}")


def _hard(obj: JsonObject, field: str = "spec") -> Decimal | None:
    return quantity(((obj.get(field) or {}).get("hard") or {}).get(KEY))


def _limits_to_two(quota: JsonObject, where: Value) -> None:
    if _hard(quota) != LIMIT:
        fail(expected=f"spec.hard[{KEY}]: {LIMIT}", found=show_quantity(_hard(quota)), where=where)


def _cluster_quota(lab: LabState) -> JsonObject:
    quota = lab.quotas(QUOTA_NS).get(QUOTA_NAME)
    if quota is None:
        fail(
            expected=T("quota_present", quota=f"{QUOTA_NS}/{QUOTA_NAME}"),
            found=T("absent"),
            where=T("cluster_quotas", namespace=QUOTA_NS),
        )
    return quota


def _over_pod(work: Workdir) -> LineDict:
    """The one Pod of team-over.yaml (its namespace must be team-a or unset)."""
    objs = usable(work.objects(OVER_FILE))
    pods = [o for o in objs if o.get("kind") == "Pod"]
    if len(pods) != 1:
        fail(expected=T("one_pod"), found=T("pod_count", count=len(pods)), where=OVER_FILE)
    pod = pods[0]
    meta = pod.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        fail(expected="metadata.name", found=T("absent"), where=f"{OVER_FILE}:{pod.line}")
    return find_object(objs, "Pod", name, QUOTA_NS, OVER_FILE)


@check("5.1", 3)
def test_5_1_quota_file(lab: LabState, work: Workdir) -> None:
    objs = usable(work.objects(QUOTA_FILE))
    quota = find_object(objs, "ResourceQuota", QUOTA_NAME, QUOTA_NS, QUOTA_FILE)
    _limits_to_two(quota, where=line_of(quota, QUOTA_FILE, "spec", "hard"))
    live = _cluster_quota(lab)
    if _hard(live) != _hard(quota):
        fail(
            expected=T("file_matches_cluster", key=QUOTA_NAME),
            found=T("file_differs_from_cluster", key=QUOTA_NAME),
            where=QUOTA_FILE,
        )


@check("5.2", 3)
def test_5_2_quota_enforced(lab: LabState) -> None:
    quota = _cluster_quota(lab)
    _limits_to_two(quota, where=IN_CLUSTER)
    if _hard(quota, "status") != LIMIT:
        fail(expected=T("quota_status_filled"), found=T("quota_status_empty"), where=IN_CLUSTER)


@check("5.3", 4)
def test_5_3_two_gpu_pods_fill_the_quota(lab: LabState) -> None:
    pods = lab.pods(QUOTA_NS)
    gpu_pods = {n: p for n, p in pods.items() if requested(p, GPU)}
    singles = {n: p for n, p in gpu_pods.items() if requested(p, GPU) == 1}
    scheduled = sorted(n for n, p in singles.items() if (p.get("spec") or {}).get("nodeName"))
    if len(gpu_pods) != 2 or len(singles) != 2 or len(scheduled) != 2:
        fail(
            expected=T("two_scheduled_gpu_pods"),
            found=tuple(
                T(
                    "pod_gpus_node",
                    pod=n,
                    resource=GPU,
                    count=show_quantity(requested(p, GPU)),
                    node=(p.get("spec") or {}).get("nodeName") or "Pending",
                )
                for n, p in sorted(gpu_pods.items())
            )
            or T("none"),
            where=T("cluster_pods", namespace=QUOTA_NS),
        )
    used = quantity((((_cluster_quota(lab).get("status") or {}).get("used")) or {}).get(KEY))
    if used != LIMIT:
        fail(
            expected=f"status.used[{KEY}]: {LIMIT}",
            found=show_quantity(used),
            where=IN_CLUSTER,
        )


@check("5.4", 3)
def test_5_4_team_over_is_denied(lab: LabState, work: Workdir) -> None:
    pod = _over_pod(work)
    name = pod["metadata"]["name"]
    asks_one(pod, GPU, where=line_of(pod, OVER_FILE, "spec", "containers"))
    if name in lab.pods(QUOTA_NS):
        fail(
            expected=T("pod_not_created", pod=f"{QUOTA_NS}/{name}"),
            found=T("pod_exists", pod=f"{QUOTA_NS}/{name}"),
            where=T("cluster_pods", namespace=QUOTA_NS),
        )
    denial = _dry_run(lab, pod)
    if denial is None or f"exceeded quota: {QUOTA_NAME}" not in denial:
        fail(
            expected=T("denied_by_quota", quota=QUOTA_NAME),
            found=T("admitted") if denial is None else denial[:300],
            where=T("dry_run", file=OVER_FILE),
        )


def _dry_run_body(pod: JsonObject) -> JsonObject:
    """What is sent to the apiserver for the file's pod: only what a Pod may carry."""
    body = {k: v for k, v in pod.items() if k in ("apiVersion", "kind", "metadata", "spec")}
    body["apiVersion"], body["kind"] = "v1", "Pod"
    body["metadata"] = {**dict(body.get("metadata") or {}), "namespace": QUOTA_NS}
    # plain JSON: YAML may give dates and such, which the apiserver gets as their text
    plain: JsonObject = json.loads(json.dumps(body, default=str))
    return plain


def _dry_run(lab: LabState, pod: JsonObject) -> str | None:
    """The apiserver's answer to creating the pod (server-side dry-run: nothing is made)."""
    err = lab.dry_run_create(QUOTA_NS, _dry_run_body(pod))
    return None if err is None else err.message


def dry_runs(work: Workdir) -> list[tuple[str, JsonObject]]:
    """The dry-runs this step judges, taken with the cluster read (so a snapshot holds them)."""
    try:
        return [(QUOTA_NS, _dry_run_body(_over_pod(work)))]
    except CheckFailed:  # no usable team-over.yaml: 5.4 and 5.5 fail on the file itself
        return []


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@check("5.5", 3)
def test_5_5_denial_captured(lab: LabState, work: Workdir) -> None:
    text = usable(work.read_text(DENIED_FILE))
    pod = _over_pod(work)
    name = pod["metadata"]["name"]
    # The apiserver's answer for the file's pod right now, and its answer for the lab's own
    # request (one GPU over a full quota): either is a real denial. The second keeps a mistake
    # in team-over.yaml (check 5.4) from costing this check as well.
    lab_form = (
        f'pods "{name}" is forbidden: exceeded quota: {QUOTA_NAME}, requested: {KEY}=1, '
        f"used: {KEY}={LIMIT}, limited: {KEY}={LIMIT}"
    )
    real = _dry_run(lab, pod)
    accepted = [d for d in (real, lab_form) if d and "exceeded quota" in d]
    if not any(_squash(d) in _squash(text) for d in accepted):
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        fail(
            expected=T("denial_captured", quota=QUOTA_NAME, pod=name),
            found=first[:300] or T("file_empty"),
            where=DENIED_FILE,
        )
