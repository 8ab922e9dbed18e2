"""Work a step needs started before its checks run, declared by the step, never named here.

A step module may declare ``BACKGROUND = {"name": start}``: a check that takes a parameter
``name`` gets what ``start(context)`` returned, under ``gpushare grade`` and ``pytest`` alike.
The engine starts each declared piece once per grade, before the cluster read, with the
learner's work dir, the fixtures, the seed and the sandbox it chose for learners' code; what
``start`` returns must have ``close()``, called when the grade ends whatever happened. (A lab
runs a learner's script on sample and unseen cases this way, in the sandbox it is given.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol


class Closable(Protocol):
    def close(self) -> None: ...


@dataclass(frozen=True)
class Context:
    """What a step's background work is given."""

    workdir: Path  # the learner's work dir (a snapshot's unpacked copy when grading one)
    shown_workdir: str | None  # that work dir as the learner knows it (a snapshot's), else None
    fixtures: Path  # the lab's fixtures/ folder
    seed: int  # the grade's seed (recorded in the results, for a regrade)
    sandbox: Any  # the isolation chosen for learners' code (gpushare.sandbox), None: none


Starter = Callable[[Context], Closable]


def declared(module: ModuleType | Any) -> dict[str, Starter]:
    """A grader module's ``BACKGROUND`` declaration ({} when it declares none)."""
    found = getattr(module, "BACKGROUND", None)
    return dict(found) if isinstance(found, dict) else {}


def wanted(pairs: Iterable[tuple[Any, Iterable[str]]]) -> dict[str, Starter]:
    """The background work that checks ask for: (module, the check's parameter names) pairs."""
    out: dict[str, Starter] = {}
    for module, names in pairs:
        offered = declared(module)
        for name in names:
            if name in offered:
                out[name] = offered[name]
    return out


def new_seed() -> int:
    """A fresh seed for a grade (recorded in the results for a regrade)."""
    return int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF
