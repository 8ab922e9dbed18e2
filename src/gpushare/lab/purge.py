"""Emptying and removing namespaces at once, for ``reset``.

kube-controller-manager's namespace controller waits a fixed 5 s before it starts on a deleted
namespace (``namespaceDeletionGracePeriod``, there for HA apiservers and lagging etcd
members), which alone would break reset's 3 s budget. A lab has one apiserver and one etcd, so
we do the controller's work ourselves: discover every namespaced resource type, delete each
collection, check that nothing is left, then remove the namespace's ``kubernetes`` finalizer.
If anything is left (an object with a finalizer of its own), we do not force it: the caller
falls back to waiting for the controller.

Stepping around the hold has a price, and it caused a lost ConfigMap (issue 8). The controller
still syncs every deleted namespace, keyed by NAME only: after its hold it GETs the namespace by
name and, if that one is terminating, deletes every collection in it by name, pods first, with
no check that the namespace is still the same object (UID). Its queue keeps the earliest due
time of a key, so a namespace of the same name deleted less than 5 s before (the previous
reset) makes that sync fall inside this reset's window: it reads the old namespace while it is
still terminating, we finalize it, reset returns, the learner's new namespace of that name
fills, and the controller's remaining collection deletes (ConfigMaps among them; pods were
already done) remove the learner's objects. :func:`wait_namespace_controller` closes that
window: reset returns only when no namespace sync that began before it is still running.
"""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from gpushare.kube.errors import ApiError
from gpushare.kube.transport import Client

WORKERS = 16
# workqueue metrics of kube-controller-manager (k8s.io/client-go/util/workqueue): a Get
# observes queue_duration, a Done observes work_duration, both at once and under the queue's
# lock, so their difference is the number of syncs running right now
_STARTED = "workqueue_queue_duration_seconds_count{"
_FINISHED = "workqueue_work_duration_seconds_count{"
_LEADING = 'leader_election_master_status{name="kube-controller-manager"}'
BLIND_WAIT = 7.0  # the controller's metrics cannot be read: its hold plus a sync's usual length
# Right after ``up`` the controller manager's metrics server may not answer yet, or it leads
# and is still starting its controllers: the namespace queue's counters appear 0.2-1.2 s later.
POLL = 0.05
APPEAR_WAIT = 5.0


def namespaced_collections(client: Client) -> list[str]:
    """URL prefixes (``/api/v1``, ``/apis/apps/v1``, ...) + resource of every deletable type."""
    versions = ["/api/v1"]
    for group in client.get("/apis").get("groups", []):
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        if preferred:
            versions.append(f"/apis/{preferred}")

    def resources(prefix: str) -> list[str]:
        try:
            listing = client.get(prefix)
        except ApiError:
            return []
        return [
            f"{prefix}/namespaces/{{ns}}/{r['name']}"
            for r in listing.get("resources", [])
            if r.get("namespaced")
            and "/" not in r["name"]
            and {"deletecollection", "list"} <= set(r.get("verbs", []))
        ]

    with ThreadPoolExecutor(WORKERS) as pool:
        return [p for group in pool.map(resources, versions) for p in group]


def delete_collection(client: Client, path: str) -> None:
    """DELETE a whole collection with no grace period (a missing or undeletable type is fine)."""
    try:
        client.request("DELETE", path, params={"gracePeriodSeconds": "0"})
    except ApiError as exc:
        if exc.status not in (404, 405):
            raise


def _remaining(client: Client, path: str) -> list[str]:
    try:
        items = client.get(path, limit="5").get("items", [])
    except ApiError:
        return []
    return [f"{path.rsplit('/', 1)[-1]}/{i['metadata']['name']}" for i in items]


def purge(client: Client, namespaces: list[str]) -> list[str]:
    """Delete every object in ``namespaces`` and the namespaces; what could not be removed.

    An empty result means the namespaces are gone when this returns.
    """
    if not namespaces:
        return []
    # Terminating first: from then on the apiserver admits nothing new there, so controllers
    # cannot put back the default ServiceAccount or kube-root-ca.crt behind our back.
    for ns in namespaces:
        client.delete(f"/api/v1/namespaces/{ns}")
    collections = namespaced_collections(client)
    paths = [c.format(ns=ns) for ns in namespaces for c in collections]
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda p: delete_collection(client, p), paths))
        left = [x for found in pool.map(lambda p: _remaining(client, p), paths) for x in found]
    if left:
        return left
    for ns in namespaces:
        _finalize(client, ns)
    return []


def _finalize(client: Client, ns: str) -> None:
    """Drop the ``kubernetes`` finalizer of a terminating, empty namespace."""
    obj = client.get_or_none(f"/api/v1/namespaces/{ns}")
    if obj is None:
        return
    obj.setdefault("spec", {})["finalizers"] = []
    try:
        client.replace(f"/api/v1/namespaces/{ns}/finalize", obj)
    except ApiError as exc:
        if exc.status not in (404, 409):
            raise


class ControllerUnknown(RuntimeError):
    """The namespace controller's metrics could not be read."""


class NotLeading(ControllerUnknown):
    """The controller manager runs but does not hold its lease, so no controller of it runs.

    kube-controller-manager starts its controllers only once it leads (cmd/kube-controller-
    manager/app/controllermanager.go, Run: leader election's OnStartedLeading). A restarted
    one (``stop``, then ``up``) waits out its predecessor's lease first, about 15 s; its
    ``leader_election_master_status`` gauge (k8s.io/component-base/metrics/prometheus/clientgo/
    leaderelection/metrics.go, switchAdapter.Off) reads 0 meanwhile, and the namespace queue's
    counters do not exist yet.
    """


def queue_counts(metrics_url: str, timeout: float = 3.0) -> tuple[int, int]:
    """(syncs started, syncs finished) so far by the namespace controller, from its metrics.

    kube-controller-manager serves ``/metrics`` without authentication on its secure port
    (kwokctl's ``--authorization-always-allow-paths``), with a self-signed certificate made at
    start: on loopback, reading counters, the certificate is not verified.
    """
    url = urlsplit(metrics_url)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(url.hostname or "", url.port, timeout=timeout, context=ctx)
    try:
        conn.request("GET", url.path)
        resp = conn.getresponse()
        body = resp.read().decode(errors="replace")
        if resp.status != 200:
            raise ControllerUnknown(f"{metrics_url}: HTTP {resp.status}")
    except (OSError, http.client.HTTPException) as exc:
        raise ControllerUnknown(f"{metrics_url}: {exc}") from exc
    finally:
        conn.close()
    counts: dict[str, int] = {}
    leading: float | None = None
    for line in body.splitlines():
        for prefix in (_STARTED, _FINISHED):
            if line.startswith(prefix) and 'name="namespace"' in line:
                counts[prefix] = round(float(line.rsplit(" ", 1)[1]))
        if line.startswith(_LEADING):
            leading = float(line.rsplit(" ", 1)[1])
    if len(counts) != 2:  # renamed metrics must not read as "nothing running"
        if leading == 0:  # not leading yet: no controller runs
            raise NotLeading(f"{metrics_url}: the controller manager does not lead yet")
        raise ControllerUnknown(f"{metrics_url}: no workqueue counters for the namespace queue")
    return counts[_STARTED], counts[_FINISHED]


def wait_namespace_controller(
    metrics_url: str | None,
    timeout: float = 30.0,
    log: Callable[[str], None] | None = None,
) -> float:
    """Wait until no namespace sync begun before this call still runs; return the time waited.

    Called after the deleted namespaces are gone. A sync that starts from now on GETs the
    namespace by name and finds it absent, or finds the learner's new one, not terminating,
    and does nothing; only a sync already running can still delete by name. So one moment
    with no sync running is enough (usually the first look: ~20 ms), and so is a controller
    manager that does not lead yet (:class:`NotLeading`). Counters not there yet (its metrics
    server is starting) are looked for every :data:`POLL` s for :data:`APPEAR_WAIT` s; only
    then comes the blind wait, and ``log`` says so.
    """
    start = time.monotonic()
    deadline = start + timeout
    unknown_since: float | None = None
    reason = "no metrics address for the controller manager"
    while metrics_url is not None:
        try:
            started, finished = queue_counts(metrics_url)
        except NotLeading:
            # no controller runs, so no sync is running: the deleted namespaces are gone,
            # and a namespace controller that starts later never sees them
            return time.monotonic() - start
        except ControllerUnknown as exc:
            # a controller manager that is starting or restarting: its old syncs died with
            # it, and its counters come with its namespace controller
            now = time.monotonic()
            unknown_since = now if unknown_since is None else unknown_since
            if now - unknown_since >= APPEAR_WAIT:
                reason = str(exc)
                break
            time.sleep(POLL)
            continue
        unknown_since = None
        if started <= finished:  # no sync running at this moment
            return time.monotonic() - start
        if time.monotonic() > deadline:
            raise TimeoutError(f"the namespace controller was still busy after {timeout:.0f}s")
        time.sleep(POLL)
    if log is not None:
        log(f"namespace controller not readable ({reason}): waiting {BLIND_WAIT:.0f}s blind")
    time.sleep(BLIND_WAIT)
    return time.monotonic() - start
