"""One read of the learner's cluster, fetched in the background, shared by every check.

Checks never call the API themselves: what the steps declare they read (``READS``,
``HINT_READS``) and the server-side dry-runs they declare (``dry_runs``) are fetched once, at
the start of the session, so every check judges the same moment of the cluster. Grading is
read-only: GETs, and dry-runs (``?dryRun=All``: nothing is created). What cannot be read is
:class:`ClusterUnreadable`: the grade is void, not failed.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import ClassVar

from gpushare.data import Json, JsonObject
from gpushare.feedback import T
from gpushare.kube.errors import ApiError, Unreachable
from gpushare.kube.verbs import Verbs
from gpushare.lab import definition
from gpushare.lab.definition import LabDefinitionError

# Kubernetes' quantity suffixes: milli, the decimal SI prefixes, the binary ones
_SUFFIX = {"m": Decimal("0.001")}
_SUFFIX |= {p: Decimal(10) ** (3 * i) for i, p in enumerate("kMGTPE", 1)}
_SUFFIX |= {p + "i": Decimal(2) ** (10 * i) for i, p in enumerate("KMGTPE", 1)}


def quantity(value: Json) -> Decimal | None:
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


def show_quantity(value: Decimal | None) -> str | T:
    """A quantity as feedback shows it; when absent, a value that says it is not set, in the
    learner's language (never kubectl's ``<none>``, which reads as something the learner wrote).
    """
    if value is None:
        return T("quantity_not_set")
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def requested(pod: JsonObject, resource: str) -> Decimal | None:
    """What the pod asks of ``resource`` over all containers; None when no container asks.

    Of each container the larger of requests and limits: for extended resources Kubernetes
    requires requests == limits when both are set, and defaults requests to limits, so the
    larger one is what the scheduler and quota count.
    """
    values = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        if not isinstance(c, dict):
            continue
        res = c.get("resources") or {}
        asked = []
        for part in ("requests", "limits"):
            section = res.get(part) if isinstance(res, dict) else None
            if isinstance(section, dict) and resource in section:
                asked.append(quantity(section[resource]))
        known = [v for v in asked if v is not None]
        if known:
            values.append(max(known))
    return sum(values, Decimal(0)) if values else None


def pod_resources(pod: JsonObject) -> set[str]:
    """Every resource name a pod's containers ask for."""
    names: set[str] = set()
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = (c or {}).get("resources") or {}
        for part in ("requests", "limits"):
            if isinstance(res.get(part), dict):
                names.update(str(k) for k in res[part])
    return names


def node_conditions(pod: JsonObject) -> list[str]:
    """Which node conditions a pod sets: nodeName, nodeSelector, nodeAffinity."""
    spec = pod.get("spec") or {}
    conditions = {
        "nodeName": spec.get("nodeName"),
        "nodeSelector": spec.get("nodeSelector"),
        "affinity.nodeAffinity": (spec.get("affinity") or {}).get("nodeAffinity"),
    }
    return [name for name, value in conditions.items() if value]


def pending_reason(pod: JsonObject, limit: int = 300) -> str | None:
    """Why the scheduler has not placed the pod: its PodScheduled condition's message.

    The scheduler writes it on the pod (``0/3 nodes are available: 1 node(s) were
    unschedulable...``). It reads as the scheduler wrote it, on one line, without control
    characters, capped: it comes from the cluster, or from a snapshot anyone could write.
    """
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
            if cond.get("status") == "True" or not isinstance(cond.get("message"), str):
                return None
            printable = "".join(ch if ch.isprintable() else " " for ch in cond["message"])
            text = " ".join(printable.split())
            # "0/3 nodes are available: <why, per node>." and then what preemption would do,
            # which says nothing about this pod: the first sentence is the reason
            head, dot, _rest = text.partition(". ")
            text = head + dot.strip() if head else text
            return (text if len(text) <= limit else text[: limit - 1] + "…") or None
    return None


# The scheduler's message for a pod it cannot place, as kube-scheduler writes it (Kubernetes
# v1.31 pkg/scheduler/framework/types.go, FitError.Error: "0/%v nodes are available: %v.",
# the reasons counted per node), each reason a filter plugin's own words: nodeunschedulable
# ErrReasonUnschedulable "node(s) were unschedulable", noderesources/fit.go "Insufficient %v",
# nodeaffinity ErrReasonPod "node(s) didn't match Pod's node affinity/selector",
# tainttoleration "node(s) had untolerated taint {%s: %s}".
_FIT_ERROR = re.compile(r"0/(\d+) nodes are available: (.+?)\.?$")
_FIT_REASONS = (
    (re.compile(r"(\d+) node\(s\) were unschedulable"), "sched_cordoned"),
    (re.compile(r"(\d+) Insufficient (\S+)"), "sched_insufficient"),
    (re.compile(r"(\d+) node\(s\) didn't match Pod's node affinity/selector"), "sched_selector"),
    (re.compile(r"(\d+) node\(s\) had untolerated taint (\{.*\})"), "sched_taint"),
)


def explain_scheduler(message: str) -> T:
    """The scheduler's reason (:func:`pending_reason`) said in the learner's language, node by
    node, with its own words kept as a quote; a reason of another form is quoted as it is."""
    total = _FIT_ERROR.fullmatch(message)
    parts: list[T] = []
    for part in total.group(2).split(", ") if total else ():
        for pattern, key in _FIT_REASONS:
            m = pattern.fullmatch(part)
            if m:
                named = "taint" if key == "sched_taint" else "resource"
                extra = {named: m.group(2)} if m.lastindex == 2 else {}
                parts.append(T(key, n=int(m.group(1)), **extra))
                break
        else:
            return T("scheduler_quoted", quote=message)
    if total is None or not parts:
        return T("scheduler_quoted", quote=message)
    return T("scheduler_explained", total=int(total.group(1)), reasons=tuple(parts), quote=message)


def _match_expression(expr: JsonObject, labels: dict[str, str]) -> bool:
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
        if not isinstance(key, str) or key not in labels:
            return False
        try:
            a, b = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return a > b if op == "Gt" else a < b
    return False


def selects_by_label(pod: JsonObject, labels: dict[str, str]) -> bool | None:
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


class ClusterUnreadable(Exception):
    """The grader could not read something it needs from the cluster: "could not grade".

    Never the learner's failure: a refused, failed or lost read says nothing about their work.
    Every check that judges the cluster is then an error, and the grade exits 2 with no score.
    """

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"could not read {what}: {reason}")
        self.what = what
        self.reason = reason


@dataclass
class Fetched:
    """One answer of the apiserver: a GET's object (None for 404), or a dry-run's verdict.

    ``unreadable`` holds why the grader could not get the answer at all (refused as 401/403,
    5xx, timeout, lost connection); ``value`` is then None.
    """

    value: Json = None
    unreadable: str | None = None


def _rbac_denial(exc: ApiError) -> bool:
    """A 403 from authorization (who we are may not do this), not from admission (quota...)."""
    return exc.status == 403 and (" cannot " in exc.message or "system:anonymous" in exc.message)


class LabState:
    """The cluster read: its queries and dry-runs one after another in one background thread.

    One thread, one keep-alive connection; a check waits only for the query it reads. Measured
    on the lab's two cores, parallel threads were no faster (each pays a TLS handshake, and the
    apiserver shares the cores) and cost twice the CPU.
    """

    # The engine's own read: the kube-system namespace's uid names the cluster graded.
    BASE: ClassVar[dict[str, str]] = {"kube-system": "/api/v1/namespaces/kube-system"}

    def __init__(
        self,
        client: Verbs | None,
        dry_runs: Iterable[tuple[str, JsonObject]] = (),
        reads: dict[str, str] | None = None,
        hint_reads: dict[str, str] | None = None,
    ) -> None:
        """``reads``, ``hint_reads`` and ``dry_runs``: what the collected graders declare (a
        grader module's ``READS``, ``HINT_READS`` and ``dry_runs(work)``). A hint read only
        explains a failure: one that cannot be read never voids the grade."""
        self.client = client
        self._dry_runs = {dry_run_key(ns, body): (ns, body) for ns, body in dry_runs}
        self._hints = set(hint_reads or {})
        self._paths = {
            **(reads or {}),
            **self.BASE,
            **(hint_reads or {}),
            **{k: "" for k in self._dry_runs},
        }
        self._fetched: dict[str, Fetched] = {}
        self._ready = {key: threading.Event() for key in self._paths}
        self._thread: threading.Thread | None = None
        self._offline = False  # answers recorded in a snapshot: nothing is ever asked
        # the keys the checks read: `gpushare watch` grades a step again when one changes
        self.touched: set[str] = set()

    def start(self) -> LabState:
        """Start reading every query in the background."""
        self._thread = threading.Thread(target=self._read_all, name="kube", daemon=True)
        self._thread.start()
        return self

    def _read_all(self) -> None:
        lost: Fetched | None = None
        try:
            for key in self._paths:
                # Once the apiserver is unreachable, the rest fail the same way at once: one
                # after another, each would wait for its own timeout.
                fetched = lost or self._answer(key)
                if fetched.unreadable and fetched.unreadable.startswith("cannot reach"):
                    lost = fetched
                self._fetched[key] = fetched
                self._ready[key].set()
        finally:
            self._live().close()  # this thread's connection
            for event in self._ready.values():  # never leave a check waiting
                event.set()

    def _live(self) -> Verbs:
        """The client of a live read; a snapshot's recorded read has none and asks nothing."""
        if self.client is None:
            raise RuntimeError("a recorded cluster read cannot ask the apiserver")
        return self.client

    def _answer(self, key: str) -> Fetched:
        """A dry-run's verdict, or a GET: 404 is an answer (absence), any other error means we
        could not read."""
        if key in self._dry_runs:
            return self._dry_run(*self._dry_runs[key])
        try:
            return Fetched(self._live().get_or_none(self._paths[key]))
        except (ApiError, Unreachable) as exc:
            return Fetched(None, str(exc))
        except Exception as exc:  # a grader bug must fail the checks, not hang them
            return Fetched(None, f"{type(exc).__name__}: {exc}")

    def _dry_run(self, namespace: str, body: JsonObject) -> Fetched:
        """The apiserver's verdict on creating ``body`` now; nothing is created. Posted to the
        collection of its kind that the lab declares (``lab.toml`` ``[resources]``, for a kind
        of ``[dry_run] kinds``).

        A denial by admission (quota), validation or a missing namespace is the answer the
        graders judge; a denial of *us* (authentication, RBAC), a 5xx or no answer is not.
        """
        lab = definition.load()
        try:
            if body.get("kind") not in lab.dry_run_kinds:
                raise LabDefinitionError(f"{lab.path}: [dry_run] kinds has no {body.get('kind')!r}")
            self._live().create(lab.collection(body, namespace), body, dry_run=True)
        except (LabDefinitionError, Unreachable) as exc:  # the lab's slip is void, not a verdict
            return Fetched(None, str(exc))
        except ApiError as exc:
            if exc.status in (401, 429) or exc.status >= 500 or _rbac_denial(exc):
                return Fetched(None, str(exc))
            return Fetched(exc)
        return Fetched(None)

    # -- as a snapshot holds it ---------------------------------------------------

    def export(self) -> JsonObject:
        """Every answer, as JSON data (a snapshot's ``cluster.json``); waits for the read."""
        out: JsonObject = {}
        for key in self._paths:
            f = self.get(key)
            if key in self._dry_runs:
                ns, body = self._dry_runs[key]
                err = f.value
                answer = None if err is None else [err.status, err.reason, err.message]
                out[key] = {"namespace": ns, "body": body, "answer": answer}
            else:
                out[key] = {"path": self._paths[key], "value": f.value}
            if f.unreadable:
                out[key]["unreadable"] = f.unreadable
        return out

    @classmethod
    def recorded(
        cls,
        answers: JsonObject,
        reads: dict[str, str] | None = None,
        hint_reads: dict[str, str] | None = None,
    ) -> LabState:
        """The cluster as a snapshot recorded it: the same views, no apiserver at all.

        ``reads`` and ``hint_reads``: what the graders declare; one the snapshot lacks is
        unreadable (a void grade, unless a hint), as a refused read would be live.
        """
        dry_runs = [
            (a["namespace"], a["body"]) for k, a in answers.items() if k.startswith("dry-run:")
        ]
        declared = {**(reads or {}), **cls.BASE, **(hint_reads or {})}
        extra = {
            k: a["path"]
            for k, a in answers.items()
            if not k.startswith("dry-run:") and k not in declared and a.get("path")
        }
        # in the order a live read takes, the snapshot's own extra reads after the declared
        state = cls(None, dry_runs, {**declared, **extra}, hint_reads)
        for key, answer in answers.items():
            if key not in state._ready:  # a read this gpushare does not know: ignored
                continue
            if key.startswith("dry-run:"):
                raw = answer.get("answer")
                value = None if raw is None else ApiError(*raw)
            else:
                value = answer.get("value")
            state._fetched[key] = Fetched(value, answer.get("unreadable"))
        for key, ready in state._ready.items():
            state._fetched.setdefault(key, Fetched(None, "not in the snapshot (an older format?)"))
            ready.set()
        state._offline = True
        return state

    def get(self, key: str) -> Fetched:
        self.touched.add(key)
        return self._wait(key)

    def _wait(self, key: str) -> Fetched:
        if key not in self._ready:
            raise KeyError(f"{key} is not part of the cluster read")
        if self._thread is None and not self._offline:  # not started: read on demand
            if key not in self._fetched:
                self._fetched[key] = self._answer(key)
            return self._fetched[key]
        self._ready[key].wait()
        return self._fetched.get(key) or Fetched(None, "the cluster read ended early")

    def wait_all(self) -> ClusterUnreadable | None:
        """Wait for the whole read; the first thing that could not be read, if any."""
        for key in self._paths:
            f = self._wait(key)  # waited for, not read by a check (touched stays as it is)
            if f.unreadable and key not in self._hints:
                return ClusterUnreadable(self.describe(key), f.unreadable)
        return None

    def describe(self, key: str) -> str:
        if key in self._dry_runs:
            return _dry_run_named(*self._dry_runs[key]) + " (POST ?dryRun=All)"
        return f"{key} (GET {self._paths[key]})"

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join()

    # -- typed views ---------------------------------------------------------------

    def read(self, key: str) -> Json:
        """A read a grader declared in its module's ``READS`` (key -> API path): the object,
        or None when it does not exist."""
        f = self.get(key)
        if f.unreadable:
            raise ClusterUnreadable(self.describe(key), f.unreadable)
        return f.value

    def _items(self, key: str) -> list[JsonObject]:
        return list((self.read(key) or {}).get("items") or [])

    def namespace_names(self) -> set[str]:
        return {n["metadata"]["name"] for n in self._items("namespaces")}

    def nodes(self) -> dict[str, JsonObject]:
        return {n["metadata"]["name"]: n for n in self._items("nodes")}

    def pods(self, namespace: str) -> dict[str, JsonObject]:
        return {p["metadata"]["name"]: p for p in self._items(f"pods:{namespace}")}

    def quotas(self, namespace: str) -> dict[str, JsonObject]:
        return {q["metadata"]["name"]: q for q in self._items(f"quotas:{namespace}")}

    def dry_run_create(self, namespace: str, body: JsonObject) -> ApiError | None:
        """The apiserver's verdict on creating ``body`` now (None: admitted).

        Taken with the cluster read when a grader declared it (see ``dry_runs`` in a grader
        module), so every check judges the same moment; asked now otherwise.
        """
        key = dry_run_key(namespace, body)
        if key not in self._ready:
            if self._offline:
                raise ClusterUnreadable(
                    _dry_run_named(namespace, body), "the snapshot holds no answer for this request"
                )
            self._dry_runs[key] = (namespace, body)
            self._paths[key] = ""
            self._ready[key] = threading.Event()
            self._fetched[key] = self._dry_run(namespace, body)
            self._ready[key].set()
        verdict = self.read(key)  # a dry-run's answer: its ApiError, or None when admitted
        return verdict if isinstance(verdict, ApiError) else None


def _dry_run_named(namespace: str, body: JsonObject) -> str:
    """``the dry-run of pod ns/name``: how a dry-run is named in a message."""
    kind = str(body.get("kind") or "object").lower()
    return f"the dry-run of {kind} {namespace}/{(body.get('metadata') or {}).get('name')}"


def dry_run_key(namespace: str, body: JsonObject) -> str:
    """One dry-run's key: the same request, byte for byte, is the same answer."""
    return "dry-run:" + json.dumps([namespace, body], sort_keys=True, separators=(",", ":"))
