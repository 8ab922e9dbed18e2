"""The lab's fake nodes as `gpushare up` makes them: names, ordinary resources, labels.

Apart from :mod:`gpushare.lab.cluster` (which creates and resets them) so that the graders' rules
can name the nodes without importing the lab's lifecycle (processes, kwokctl, binaries).
"""

from __future__ import annotations

from typing import Any

LAB_NODES = ("lab-node-0", "lab-node-1", "lab-node-2")  # the nodes `gpushare up` creates
NODE_RESOURCES = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"}


def node_manifest(name: str) -> dict[str, Any]:
    """A fresh lab node: ordinary capacity, no GPU label or resource."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": fresh_node_labels(name),
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {},
        "status": {
            "capacity": dict(NODE_RESOURCES),
            "allocatable": dict(NODE_RESOURCES),
        },
    }


def fresh_node_labels(name: str) -> dict[str, str]:
    return {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
