"""The GPU-sharing lab's own code, beside its step files: the names it defines, what every step
reads from the cluster, its rules (:mod:`gpulab.rules`), the unseen cases of step 6
(:mod:`gpulab.requestcases`) and the learner's script runs (:mod:`gpulab.requestruns`).

The engine (``src/gpushare``) knows none of it: it reads what the step modules declare
(``READS``, ``HINT_READS``, ``dry_runs``, ``BACKGROUND``) and ``lab.toml`` (the nodes, the kinds
dry-run, the sandbox's PyYAML, the default language); the lab uses ``gpushare.lab_api`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # step 6 imports this package before anything heavy: see BACKGROUND
    from gpushare.lab_api import LabState

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
CONFIGMAP_NS, CONFIGMAP_NAME = "gpu-share", "device-plugin-configs"
QUOTA_NS, QUOTA_NAME = "team-a", "gpu-quota"

# What the steps judge of the cluster, read once for all of them (each step module declares
# these as its READS, so a grade of every step reads them once, as a snapshot records them).
QUERIES: dict[str, str] = {
    "namespaces": "/api/v1/namespaces",
    "nodes": "/api/v1/nodes",
    "configmap": f"/api/v1/namespaces/{CONFIGMAP_NS}/configmaps/{CONFIGMAP_NAME}",
    "pods:gpu-share": "/api/v1/namespaces/gpu-share/pods",
    "pods:team-a": "/api/v1/namespaces/team-a/pods",
    "quotas:team-a": "/api/v1/namespaces/team-a/resourcequotas",
}
# Reads that only explain a failure (a pod of gpu-share found in another namespace): one that
# cannot be read, or that a snapshot of an older gpushare lacks, leaves the explanation out and
# never voids the grade.
HINT_QUERIES: dict[str, str] = {
    "pods:elsewhere": "/api/v1/pods?fieldSelector="
    "metadata.namespace%21%3Dgpu-share%2Cmetadata.namespace%21%3Dteam-a",
}


def namespaces_of_pod(lab: LabState, name: str) -> list[str]:
    """The namespaces other than gpu-share and team-a holding a pod ``name``: where a pod of a
    file that sets no namespace went. Empty when unknown (see HINT_QUERIES)."""
    f = lab.get("pods:elsewhere")
    items = (f.value or {}).get("items") if isinstance(f.value, dict) else None
    if f.unreadable or not isinstance(items, list):
        return []
    found = set()
    for pod in items:
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        if isinstance(meta, dict) and meta.get("name") == name:
            ns = meta.get("namespace")
            if isinstance(ns, str) and ns not in (CONFIGMAP_NS, QUOTA_NS):
                found.add(ns)
    return sorted(found)
