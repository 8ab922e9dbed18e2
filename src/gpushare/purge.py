"""Emptying and removing namespaces at once, for ``reset``.

kube-controller-manager's namespace controller waits a fixed 5 s before it starts on a deleted
namespace (``namespaceDeletionGracePeriod``, there for HA apiservers and lagging etcd
members), which alone would break reset's 3 s budget. A lab has one apiserver and one etcd, so
we do the controller's work ourselves: discover every namespaced resource type, delete each
collection, check that nothing is left, then remove the namespace's ``kubernetes`` finalizer.
If anything is left (an object with a finalizer of its own), we do not force it: the caller
falls back to waiting for the controller.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpushare.kubeapi import ApiError, Client

WORKERS = 16


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
            f"{prefix}/{{ns}}/{r['name']}"
            for r in listing.get("resources", [])
            if r.get("namespaced")
            and "/" not in r["name"]
            and {"deletecollection", "list"} <= set(r.get("verbs", []))
        ]

    with ThreadPoolExecutor(WORKERS) as pool:
        found = [p for group in pool.map(resources, versions) for p in group]
    # ".../{ns}/pods" -> "/api/v1/namespaces/{ns}/pods"
    return [p.replace("/{ns}/", "/namespaces/{ns}/", 1) for p in found]


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
    obj: Any = client.get_or_none(f"/api/v1/namespaces/{ns}")
    if obj is None:
        return
    obj.setdefault("spec", {})["finalizers"] = []
    try:
        client.replace(f"/api/v1/namespaces/{ns}/finalize", obj)
    except ApiError as exc:
        if exc.status not in (404, 409):
            raise
