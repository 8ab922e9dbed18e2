"""The fake nodes `gpushare up` makes: which, from the lab's ``lab.toml`` (``[nodes]``, see
:mod:`gpushare.lab.definition`); how, here. Apart from :mod:`gpushare.lab.cluster` (which
creates and resets them) so that a lab's rules can name its nodes without importing the
lifecycle (processes, kwokctl, binaries).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpushare.data import JsonObject
from gpushare.lab import definition
from gpushare.lab.definition import KWOK_LABELS, NodeSpec
from gpushare.lab.definition import LabDefinitionError as LabDefinitionError


@dataclass(frozen=True)
class LabNodes:
    """The nodes a lab asks for, in order, and the capacity the first one starts with."""

    names: tuple[str, ...]
    capacity: dict[str, str]


def load(path: Path | None = None) -> LabNodes:
    """The ``[nodes]`` of ``lab.toml`` (default: the one beside the graders)."""
    specs = definition.load(path).nodes
    return LabNodes(tuple(n.name for n in specs), dict(specs[0].capacity))


def node_manifest(spec: NodeSpec) -> JsonObject:
    """A fresh lab node: as the lab declares it, and kwok's annotation that it is fake."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": dict(spec.labels),
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [dict(t) for t in spec.taints]} if spec.taints else {},
        "status": {"capacity": dict(spec.capacity), "allocatable": dict(spec.capacity)},
    }


def fresh_node_labels(name: str) -> dict[str, str]:
    """The labels node ``name`` starts with: the lab's declaration (kwok's own by default)."""
    spec = definition.load().node(name)
    labels = spec.labels if spec else {k: v.format(name=name) for k, v in KWOK_LABELS.items()}
    return dict(labels)
