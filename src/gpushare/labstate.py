"""One read of the learner's cluster, fetched concurrently, shared by every check.

Checks never call the API themselves (except the one dry-run of step 5): the objects they need
are fetched once, in parallel, at the start of the session. That is what keeps a full grade
under a second, and it means every check judges the same moment of the cluster. Grading is
read-only: only GETs here, and the dry-run in :meth:`LabState.dry_run_create`.
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal, InvalidOperation

from gpushare.kubeapi import ApiError, Client, Unreachable
from gpushare.records import Record

TYPE_CHECKING = False  # not ``typing`` at run time: see gpushare.records
if TYPE_CHECKING:
    from typing import Any, ClassVar

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
CONFIGMAP_NS, CONFIGMAP_NAME = "gpu-share", "device-plugin-configs"
LAB_NODES = ("lab-node-0", "lab-node-1", "lab-node-2")  # the nodes `gpushare up` creates
QUOTA_NS, QUOTA_NAME = "team-a", "gpu-quota"

_SUFFIX = {
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity as a number (``"2"``, ``2``, ``"2k"``); None when unreadable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    m = re.fullmatch(r"\s*([+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([a-zA-Z]{0,2})\s*", str(value))
    if not m:
        return None
    try:
        number = Decimal(m.group(1))
    except InvalidOperation:
        return None
    suffix = m.group(2)
    if suffix and suffix not in _SUFFIX:
        return None
    return number * _SUFFIX[suffix] if suffix else number


def show_quantity(value: Decimal | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def container_requests(pod: dict[str, Any], resource: str) -> list[tuple[str, Decimal | None]]:
    """Per container, the larger of requests and limits of ``resource`` (None when absent).

    For extended resources Kubernetes requires requests == limits when both are set, and
    defaults requests to limits, so the larger one is what the scheduler and quota count.
    """
    out = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        if not isinstance(c, dict):
            continue
        res = c.get("resources") or {}
        vals = []
        for part in ("requests", "limits"):
            section = res.get(part) if isinstance(res, dict) else None
            if isinstance(section, dict) and resource in section:
                vals.append(quantity(section[resource]))
        known = [v for v in vals if v is not None]
        out.append((str(c.get("name")), max(known) if known else None))
    return out


def requested(pod: dict[str, Any], resource: str) -> Decimal | None:
    """What the pod asks of ``resource`` over all containers; None when no container asks."""
    values = [v for _, v in container_requests(pod, resource) if v is not None]
    return sum(values, Decimal(0)) if values else None


def pod_resources(pod: dict[str, Any]) -> set[str]:
    """Every resource name a pod's containers ask for."""
    names: set[str] = set()
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = (c or {}).get("resources") or {}
        for part in ("requests", "limits"):
            if isinstance(res.get(part), dict):
                names.update(str(k) for k in res[part])
    return names


def node_conditions(pod: dict[str, Any]) -> list[str]:
    """Which node conditions a pod sets: nodeName, nodeSelector, nodeAffinity."""
    spec = pod.get("spec") or {}
    found = []
    if spec.get("nodeName"):
        found.append("nodeName")
    if spec.get("nodeSelector"):
        found.append("nodeSelector")
    if (spec.get("affinity") or {}).get("nodeAffinity"):
        found.append("affinity.nodeAffinity")
    return found


def _match_expression(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        try:
            a, b = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return a > b if op == "Gt" else a < b
    return False


def selects_by_label(pod: dict[str, Any], labels: dict[str, str]) -> bool | None:
    """Whether the pod's label-based node condition selects a node with ``labels``.

    None when the pod has no label-based condition at all (no nodeSelector and no required
    node affinity). Mirrors the scheduler: nodeSelector AND any of the required terms.
    """
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    if not selector and not required:
        return None
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    if required:
        return any(
            all(_match_expression(e, labels) for e in (term.get("matchExpressions") or []))
            and (term.get("matchExpressions") or term.get("matchFields"))
            for term in required
        )
    return True


class Fetched(Record):
    """One API read: the object (None for 404) or the error that prevented it."""

    __slots__ = ("error", "unreachable", "value")

    def __init__(
        self, value: Any = None, error: str | None = None, *, unreachable: bool = False
    ) -> None:
        self.value, self.error, self.unreachable = value, error, unreachable


class LabState:
    """One read of the lab, shared by every check; grading only reads (plus one dry-run).

    The queries run one after another in a single background thread, on one keep-alive
    connection, while the grader does everything else; a check waits only for the query it
    reads. Measured on the lab's two cores, firing them all at once in parallel threads was no
    faster (every thread pays a TLS handshake, and the apiserver shares the same cores) and
    cost twice the CPU.
    """

    QUERIES: ClassVar[dict[str, str]] = {
        "namespaces": "/api/v1/namespaces",
        "nodes": "/api/v1/nodes",
        "configmap": f"/api/v1/namespaces/{CONFIGMAP_NS}/configmaps/{CONFIGMAP_NAME}",
        "pods:gpu-share": "/api/v1/namespaces/gpu-share/pods",
        "pods:team-a": "/api/v1/namespaces/team-a/pods",
        "quotas:team-a": "/api/v1/namespaces/team-a/resourcequotas",
    }

    def __init__(self, client: Client) -> None:
        self.client = client
        self._fetched: dict[str, Fetched] = {}
        self._ready = {key: threading.Event() for key in self.QUERIES}
        self._thread: threading.Thread | None = None

    def start(self) -> LabState:
        """Start reading every query in the background."""
        self._thread = threading.Thread(target=self._read_all, name="kube", daemon=True)
        self._thread.start()
        return self

    def _read_all(self) -> None:
        unreachable: Fetched | None = None
        try:
            for key, path in self.QUERIES.items():
                # Once the apiserver is unreachable, the rest fail the same way at once: one
                # after another, each would wait for its own timeout.
                fetched = unreachable or self._fetch(path)
                if fetched.unreachable:
                    unreachable = fetched
                self._fetched[key] = fetched
                self._ready[key].set()
        finally:
            self.client.close()  # this thread's connection
            for event in self._ready.values():  # never leave a check waiting
                event.set()

    def _fetch(self, path: str) -> Fetched:
        try:
            return Fetched(self.client.get_or_none(path))
        except ApiError as exc:
            return Fetched(None, str(exc))
        except Unreachable as exc:
            return Fetched(None, str(exc), unreachable=True)
        except Exception as exc:  # a grader bug must fail the checks, not hang them
            return Fetched(None, f"{type(exc).__name__}: {exc}")

    def get(self, key: str) -> Fetched:
        if self._thread is None:  # not started: read on demand
            if key not in self._fetched:
                self._fetched[key] = self._fetch(self.QUERIES[key])
            return self._fetched[key]
        self._ready[key].wait()
        return self._fetched.get(key) or Fetched(None, "the cluster read ended early")

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join()

    # -- typed views ---------------------------------------------------------------

    def _items(self, key: str) -> list[dict[str, Any]]:
        f = self.get(key)
        if f.error:
            raise ApiError(0, "error", f.error)
        return list((f.value or {}).get("items") or [])

    def namespace_names(self) -> set[str]:
        return {n["metadata"]["name"] for n in self._items("namespaces")}

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {n["metadata"]["name"]: n for n in self._items("nodes")}

    def configmap(self) -> dict[str, Any] | None:
        f = self.get("configmap")
        if f.error:
            raise ApiError(0, "error", f.error)
        return f.value

    def pods(self, namespace: str) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self._items(f"pods:{namespace}")}

    def quotas(self, namespace: str) -> dict[str, dict[str, Any]]:
        return {q["metadata"]["name"]: q for q in self._items(f"quotas:{namespace}")}

    def dry_run_create(self, namespace: str, body: dict[str, Any]) -> ApiError | None:
        """Ask the apiserver whether ``body`` would be admitted now, without creating it."""
        try:
            self.client.create(f"/api/v1/namespaces/{namespace}/pods", body, dry_run=True)
        except ApiError as exc:
            return exc
        return None
