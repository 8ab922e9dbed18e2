"""The fake nodes `gpushare up` makes: which, from the lab's ``lab.toml``; how, here.

A lab names its nodes and their ordinary capacity in ``lab.toml`` beside its step files
(``[nodes] names``, ``capacity``); the engine gives each the labels every kwok node has.
Apart from :mod:`gpushare.lab.cluster` (which creates and resets them) so that a lab's rules
can name its nodes without importing the lifecycle (processes, kwokctl, binaries).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gpushare.data import JsonObject
from gpushare.locations import graders_dir

DEFAULT_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"}


class LabDefinitionError(RuntimeError):
    """The lab's ``lab.toml`` is missing or does not say what the engine needs: one line."""


@dataclass(frozen=True)
class LabNodes:
    """The nodes a lab asks for, in order, and the capacity each one starts with."""

    names: tuple[str, ...]
    capacity: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CAPACITY))


def load(path: Path | None = None) -> LabNodes:
    """The ``[nodes]`` of ``lab.toml`` (default: the one beside the graders)."""
    path = path or graders_dir() / "lab.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LabDefinitionError(f"cannot read the lab's definition {path}: {exc}") from None
    section = data.get("nodes")
    if not isinstance(section, dict):
        section = {}
    names = section.get("names")
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise LabDefinitionError(f"{path}: [nodes] names must list the nodes `up` creates")
    capacity = section.get("capacity", DEFAULT_CAPACITY)
    if not (isinstance(capacity, dict) and all(isinstance(v, str) for v in capacity.values())):
        raise LabDefinitionError(f"{path}: [nodes] capacity maps resources to quantities")
    return LabNodes(tuple(names), {str(k): v for k, v in capacity.items()})


def node_manifest(name: str, capacity: dict[str, str]) -> JsonObject:
    """A fresh lab node: ordinary capacity, no label but kwok's."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": fresh_node_labels(name),
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {},
        "status": {"capacity": dict(capacity), "allocatable": dict(capacity)},
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
