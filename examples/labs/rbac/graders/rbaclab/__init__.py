"""The RBAC lab's own names, what its steps read of the cluster, and the run of the learner's
script (:mod:`rbaclab.runs`). The engine knows none of it: it reads what the step modules
declare (``READS``, ``dry_runs``, ``BACKGROUND``) and ``lab.toml``.
"""

from __future__ import annotations

NAMESPACE = "shop"
TEAM_LABEL = ("team", "shop")
SERVICE_ACCOUNT = "auditor"
ROLE = "pod-reader"
BINDING = "auditor-reads-pods"
RBAC_GROUP = "rbac.authorization.k8s.io"
READ_VERBS = ("get", "list", "watch")
RBAC_FILE = "rbac.yaml"
SCRIPT = "bin/readonly.sh"

_RBAC = f"/apis/{RBAC_GROUP}/v1/namespaces/{NAMESPACE}"
QUERIES: dict[str, str] = {
    "namespace": f"/api/v1/namespaces/{NAMESPACE}",
    "role": f"{_RBAC}/roles/{ROLE}",
    "binding": f"{_RBAC}/rolebindings/{BINDING}",
}


def read_only(rules: str) -> list[str]:
    """What the script must print for a rules file: each ``resource: verb verb ...`` line with
    its read verbs only, in their order; a line left with none is left out."""
    out = []
    for line in rules.splitlines():
        resource, _, verbs = line.partition(":")
        kept = [v for v in verbs.split() if v in READ_VERBS]
        if resource.strip() and kept:
            out.append(f"{resource.strip()}: {' '.join(kept)}")
    return out
