"""Readers every lab's checks use, knowing no lab: a path into an API object, a learner's file
as read, one object of a file, the line a key sits on, a pod's ask.

Each returns a value or fails the check (``fail``); none crashes on learner input. Their texts
are the engine's catalog's, so a lab does not write them again.
"""

from __future__ import annotations

from typing import TypeVar

import yaml

from gpushare.data import Json, JsonObject
from gpushare.grading.checks import T, Value, fail
from gpushare.grading.labstate import requested, show_quantity
from gpushare.submissions.workdir import FileProblem, LineDict

R = TypeVar("R")


def dig(obj: Json, *path: str | int) -> Json:
    """``obj[p0][p1]...`` or None where any step is missing or of the wrong type."""
    for p in path:
        if isinstance(p, int):
            if not isinstance(obj, list) or len(obj) <= p:
                return None
        elif not isinstance(obj, dict) or p not in obj:
            return None
        obj = obj[p]
    return obj


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)  # a date or timestamp, as YAML wrote it


def show_yaml(value: object, limit: int = 120) -> str:
    """A value as YAML writes it on one line (``false``, ``'4'``, ``{name: x}``), never a repr.

    What the learner wrote, in the language they wrote it in: a Python repr would show
    ``False`` for YAML's ``false`` and ``LineDict`` for a mapping.
    """
    text: str = yaml.safe_dump(
        _plain(value), default_flow_style=True, allow_unicode=True, width=10_000
    ).strip()
    text = " ".join(text.removesuffix("\n...").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def asks_one(pod: JsonObject, resource: str, where: Value) -> None:
    """Fail unless ``pod`` asks for exactly one ``resource`` (over all its containers)."""
    asked = requested(pod, resource)
    if asked != 1:
        found = T("key_value", key=resource, value=show_quantity(asked))
        fail(expected=f"{resource}: 1", found=found, where=where)


def usable(read: R | FileProblem) -> R:
    """What was read of a learner's file; a missing or broken file fails the check with its
    problem (``usable(work.objects(FILE))``)."""
    if isinstance(read, FileProblem):
        fail(problem=read.problem, where=read.where, cause=read.cause)
    return read


def find_object(objs: list[LineDict], kind: str, name: str, namespace: str, rel: str) -> LineDict:
    """The object ``kind/name`` of a file; its namespace must be ``namespace`` or unset."""
    for obj in objs:
        meta = obj.get("metadata")
        if isinstance(meta, LineDict) and obj.get("kind") == kind and meta.get("name") == name:
            ns = meta.get("namespace")
            if ns not in (None, namespace):
                fail(
                    expected=T("in_namespace", namespace=namespace),
                    found=str(ns),
                    where=f"{rel}:{meta.line_of('namespace')}",
                )
            return obj
    present = [
        f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"
        for o in objs
        if isinstance(o.get("metadata"), dict)
    ]
    fail(
        expected=f"{kind}/{name}",
        found=T("objects_are", objects=tuple(present) or T("none")),
        where=rel,
    )


def line_of(obj: object, rel: str, *path: str) -> str:
    """``file:line`` of the deepest key of ``path`` that exists in ``obj``."""
    line = getattr(obj, "line", None)
    cur = obj
    for p in path:
        if isinstance(cur, LineDict) and p in cur:
            line = cur.line_of(p)
            cur = cur[p]
        else:
            break
    return f"{rel}:{line}" if line else rel
