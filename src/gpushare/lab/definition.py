"""A lab's edges as its ``lab.toml`` declares them; the engine reads these and assumes no other.

A lab (the folder of ``GPUSHARE_LAB``, its ``graders/lab.toml``) says:

- ``default_lang``: the language of its texts when the learner names none;
- ``[nodes]``: the fake nodes ``up`` makes and ``reset`` restores, by name, with the
  ``capacity``, ``labels`` (``{name}`` stands for the node's name) and ``taints`` each starts
  with; ``[nodes.node.<name>]`` gives one node its own, over the shared ones;
- ``[resources]``: the plural under which the apiserver serves each kind the engine posts for
  the lab (``Pod = "pods"``, ``RoleBinding = "rolebindings"``);
- ``[dry_run] kinds``: the kinds a step's ``dry_runs`` may ask the apiserver to admit;
- ``[seed] files``: YAML files (beside ``lab.toml``) of the objects ``up`` creates and
  ``reset`` puts back;
- ``[sandbox] runtime_packages``: the packages (import names) copied beside the standard
  library for the learner's script, e.g. ``["yaml", "_yaml"]`` for PyYAML.

What a lab leaves out it does not get: no dry-run, no seed, no package, the reference
language (``en``, the catalog every other is checked against), and kwok's own node labels.
Read by every room that meets a lab edge (the lifecycle, the sandbox, the catalogs, the
cluster read), so it imports nothing of theirs.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from gpushare.data import Json, JsonObject
from gpushare.locations import graders_dir

DEFAULT_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"}
# The labels kwok's own nodes carry; a lab that declares none gets these.
KWOK_LABELS = {
    "kubernetes.io/hostname": "{name}",
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/os": "linux",
    "beta.kubernetes.io/arch": "amd64",
    "type": "kwok",
}
REFERENCE_LANG = "en"


class LabDefinitionError(RuntimeError):
    """The lab's ``lab.toml`` is missing or does not say what the engine needs: one line."""


@dataclass(frozen=True)
class NodeSpec:
    """One node as the lab makes it: its name, capacity (= allocatable), labels and taints."""

    name: str
    capacity: dict[str, str]
    labels: dict[str, str]
    taints: tuple[JsonObject, ...] = ()


@dataclass(frozen=True)
class LabDefinition:
    """Everything ``lab.toml`` declares (see the module's docstring)."""

    path: Path
    nodes: tuple[NodeSpec, ...]
    default_lang: str = REFERENCE_LANG
    resources: dict[str, str] = field(default_factory=dict)
    dry_run_kinds: frozenset[str] = frozenset()
    seeds: tuple[JsonObject, ...] = ()
    runtime_packages: tuple[str, ...] = ()

    def node(self, name: str) -> NodeSpec | None:
        return next((n for n in self.nodes if n.name == name), None)

    def collection(self, body: JsonObject, namespace: str | None) -> str:
        """The API collection an object of ``body``'s apiVersion and kind is posted to, in
        ``namespace`` (None or empty: cluster-scoped); LabDefinitionError for a kind the lab
        declares no plural of."""
        kind, version = body.get("kind"), body.get("apiVersion")
        plural = self.resources.get(kind) if isinstance(kind, str) else None
        if plural is None or not isinstance(version, str) or not version:
            raise LabDefinitionError(
                f"{self.path}: [resources] names no plural for kind {kind!r} ({version!r})"
            )
        root = "/api/v1" if version == "v1" else f"/apis/{version}"
        return f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"


def _strings(value: object, what: str, path: Path) -> dict[str, str]:
    if not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
        raise LabDefinitionError(f"{path}: {what} maps names to strings")
    return {str(k): v for k, v in value.items()}


def _taints(value: object, path: Path) -> tuple[JsonObject, ...]:
    if not (isinstance(value, list) and all(isinstance(t, dict) and "key" in t for t in value)):
        raise LabDefinitionError(f"{path}: taints is a list of {{key, value, effect}} tables")
    return tuple(dict(t) for t in value)


def _nodes(section: Json, path: Path) -> tuple[NodeSpec, ...]:
    if not isinstance(section, dict):
        section = {}
    names = section.get("names")
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise LabDefinitionError(f"{path}: [nodes] names must list the nodes `up` creates")
    capacity = _strings(section.get("capacity", DEFAULT_CAPACITY), "[nodes] capacity", path)
    labels = _strings(section.get("labels", KWOK_LABELS), "[nodes] labels", path)
    taints = _taints(section.get("taints", []), path)
    own = section.get("node", {})
    if not isinstance(own, dict) or set(own) - set(names):
        raise LabDefinitionError(f"{path}: [nodes.node.<name>] is for a node of [nodes] names")
    out = []
    for name in names:
        mine = own.get(name, {})
        own_capacity = _strings(mine.get("capacity", {}), f"{name} capacity", path)
        own_labels = _strings(mine.get("labels", {}), f"{name} labels", path)
        named = {k: v.format(name=name) for k, v in {**labels, **own_labels}.items()}
        own_taints = _taints(mine["taints"], path) if "taints" in mine else taints
        out.append(NodeSpec(name, {**capacity, **own_capacity}, named, own_taints))
    return tuple(out)


def _seeds(files: object, folder: Path, path: Path) -> tuple[JsonObject, ...]:
    if not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
        raise LabDefinitionError(f"{path}: [seed] files lists YAML files beside lab.toml")
    if not files:
        return ()
    import yaml  # only for a lab that seeds: the sandbox's runtime reads this module early

    out: list[JsonObject] = []
    for name in files:
        try:
            docs = list(yaml.safe_load_all((folder / name).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise LabDefinitionError(f"{path}: seed file {name}: {exc}") from None
        for doc in docs:
            if doc is None:
                continue
            if not (isinstance(doc, dict) and "kind" in doc and "metadata" in doc):
                raise LabDefinitionError(f"{path}: seed file {name} holds a non-object")
            out.append(doc)
    return tuple(out)


def load(path: Path | None = None) -> LabDefinition:
    """The definition in ``path`` (default: the ``lab.toml`` beside the graders in use)."""
    return _load((path or graders_dir() / "lab.toml").resolve())


def found(path: Path | None = None) -> LabDefinition | None:
    """As :func:`load`, but None where there is no ``lab.toml`` at all (the engine used with
    no lab: the sandbox's own probe, a stranger's results); a broken one still raises."""
    path = path or graders_dir() / "lab.toml"
    return load(path) if path.is_file() else None


@cache
def _load(path: Path) -> LabDefinition:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LabDefinitionError(f"cannot read the lab's definition {path}: {exc}") from None
    lang = data.get("default_lang", REFERENCE_LANG)
    if not (isinstance(lang, str) and len(lang) == 2 and lang.isalpha() and lang.islower()):
        raise LabDefinitionError(f"{path}: default_lang is a two-letter code such as en")
    kinds = (data.get("dry_run") or {}).get("kinds", [])
    packages = (data.get("sandbox") or {}).get("runtime_packages", [])
    for what, value in (("[dry_run] kinds", kinds), ("[sandbox] runtime_packages", packages)):
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise LabDefinitionError(f"{path}: {what} is a list of names")
    resources = _strings(data.get("resources", {}), "[resources]", path)
    undeclared = sorted(set(kinds) - set(resources))
    if undeclared:
        raise LabDefinitionError(f"{path}: [resources] names no plural for {undeclared}")
    seeds = _seeds((data.get("seed") or {}).get("files", []), path.parent, path)
    unposted = sorted({str(s["kind"]) for s in seeds} - set(resources))
    if unposted:
        raise LabDefinitionError(f"{path}: [resources] names no plural for seeded {unposted}")
    return LabDefinition(
        path=path,
        nodes=_nodes(data.get("nodes"), path),
        default_lang=lang,
        resources=resources,
        dry_run_kinds=frozenset(kinds),
        seeds=seeds,
        runtime_packages=tuple(packages),
    )
