"""Step 5: a ResourceQuota pins team-a's GPU share; the apiserver denies the third GPU."""

import json
import re
from decimal import Decimal

from gpulab import GPU, HINT_QUERIES, QUERIES, QUOTA_NAME, QUOTA_NS, namespaces_of_pod
from gpulab.rules import asks_one, find_object, line_of, show_yaml, usable
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
ELSEWHERE = "team-over:elsewhere"  # the cause: the file's pod was created outside team-a
ADMITTED = "team-over:admitted"  # the cause: the file's pod was admitted into team-a


def _hard(obj: JsonObject, field: str = "spec") -> Decimal | None:
    return quantity(((obj.get(field) or {}).get("hard") or {}).get(KEY))


def _near_keys(obj: JsonObject) -> dict[str, object]:
    """Keys of ``spec.hard`` that name the GPU but not as ``requests.<resource name>``: the
    bare ``nvidia.com/gpu`` (what a pod's limits say) or ``limits.nvidia.com/gpu``, which a
    quota does not take for an extended resource."""
    hard = (obj.get("spec") or {}).get("hard") or {}
    return {k: v for k, v in hard.items() if isinstance(k, str) and k != KEY and k.endswith(GPU)}


def _limits_to_two(quota: JsonObject, where: Value) -> None:
    if _hard(quota) != LIMIT:
        near = _near_keys(quota)
        if _hard(quota) is None and near:  # what they wrote, not "none"
            key, value = next(iter(near.items()))
            fail(
                expected=f"spec.hard[{KEY}]: {LIMIT}",
                found=T("quota_key_written", written=f"{key}: {show_yaml(value)}", key=KEY),
                where=where,
                hint=T("hint_quota_key_prefix", written=key),
            )
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


def _went_elsewhere(lab: LabState, pod: LineDict) -> list[str]:
    """The namespaces where the file's pod was created instead of being denied in team-a.

    A file that sets no ``metadata.namespace`` goes where it is applied: with ``-n team-a``
    it meets the quota and is denied (right); without, it lands in the current namespace
    (``default``), where no quota stops it. The file is judged as it was applied, so a pod of
    its name outside team-a is that application. A file naming team-a itself cannot have
    made a pod elsewhere. Empty when the cluster's other pods are unknown (HINT_QUERIES).
    """
    meta = pod["metadata"]
    if meta.get("namespace"):
        return []
    return namespaces_of_pod(lab, meta["name"])


def _elsewhere_hint(pod: LineDict, namespaces: list[str]) -> T:
    return T(
        "hint_over_elsewhere",
        file=OVER_FILE,
        pod=pod["metadata"]["name"],
        namespaces=tuple(namespaces),
        namespace=QUOTA_NS,
    )


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
    elsewhere = _went_elsewhere(lab, pod)
    if elsewhere:
        fail(
            expected=T("over_denied_in", pod=name, namespace=QUOTA_NS),
            found=T("pod_in_namespaces", pod=name, namespaces=tuple(elsewhere)),
            where=T("cluster_pod", pod=f"{elsewhere[0]}/{name}"),
            hint=_elsewhere_hint(pod, elsewhere),
            cause=ELSEWHERE,
        )
    if name in lab.pods(QUOTA_NS):
        # admitted into team-a: the quota had room when the file was applied (before the two
        # team pods filled it, or while it was not yet enforced)
        fail(
            expected=T("pod_not_created", pod=f"{QUOTA_NS}/{name}"),
            found=T("pod_exists", pod=f"{QUOTA_NS}/{name}"),
            where=T("cluster_pods", namespace=QUOTA_NS),
            hint=T("hint_applied_before_full", file=OVER_FILE, quota=QUOTA_NAME),
            cause=ADMITTED,
        )
    denial = _dry_run(lab, pod)
    if denial is None or f"exceeded quota: {QUOTA_NAME}" not in denial:
        fail(
            expected=T("denied_by_quota", quota=QUOTA_NAME),
            found=T("admitted") if denial is None else _denial_said(denial),
            where=T("dry_run", file=OVER_FILE),
        )


_NO_NAMESPACE = re.compile(r'namespaces "([^"]+)" not found')
_OTHER_QUOTA = re.compile(r"exceeded quota: ([\w.-]+)")


def _denial_said(message: str) -> T:
    """The apiserver's refusal in the learner's language, its own words kept as a quote: a
    missing namespace, another quota's denial, or a refusal of another kind."""
    quote = message[:300]
    if m := _NO_NAMESPACE.search(message):
        return T("apiserver_no_namespace", namespace=m.group(1), quote=quote)
    if m := _OTHER_QUOTA.search(message):
        return T("apiserver_other_quota", quota=m.group(1), quote=quote)
    return T("apiserver_refused", quote=quote)


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
        # when the pod was created, 2>&1 may well have been used: it captured the creation
        hint, cause = None, None
        if _went_elsewhere(lab, pod):
            hint, cause = T("hint_denial_after_elsewhere", file=OVER_FILE), ELSEWHERE
        elif name in lab.pods(QUOTA_NS):
            hint, cause = T("hint_denial_after_admitted", file=OVER_FILE), ADMITTED
        fail(
            expected=T("denial_captured", quota=QUOTA_NAME, pod=name),
            found=first[:300] or T("file_empty"),
            where=DENIED_FILE,
            hint=hint,
            cause=cause,
        )
