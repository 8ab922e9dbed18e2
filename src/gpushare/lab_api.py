"""What a lab may use of the engine: the one module a lab's graders import (as ``pytest`` is to
``_pytest``). The rest of ``gpushare`` is the engine's inside and may change under a lab; a name
here keeps its meaning (``tests/test_layout.py`` holds ``graders/`` to this module).

The names, by what a check does with them: declare and fail a check (:func:`check`,
:func:`fail`, :class:`CheckFailed`, :class:`T`: a catalog text said in the learner's language,
:data:`WORKDIR_ABSENT`: the root cause when the work dir itself is missing); read the cluster
(:class:`LabState`: ``lab.read(name)`` of what a step's ``READS`` name, and the pod and quantity
readers); read the learner's files (:class:`Workdir`, :class:`LineDict`: a mapping that knows
its lines, the bounded YAML readers); judge what was read (:func:`dig`, :func:`find_object`
...); run the learner's script in the sandbox the engine chose, for a step's ``BACKGROUND``
(:class:`Context`, :class:`Supervisor` ...); the lab's ``lab.toml`` (:func:`load_nodes`); the
shapes of parsed data (:data:`Json`, :data:`JsonObject`).

Each name is imported when first used, not with this module: a step that starts background
work imports this module before anything heavy (:mod:`gpushare.grading.background`), and a
name costs only its own room's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the same names, for the type checker; at run time see __getattr__
    from gpushare.data import Json, JsonObject
    from gpushare.grading.background import BackgroundError, Context
    from gpushare.grading.checks import WORKDIR_ABSENT, CheckFailed, T, Value, check, fail
    from gpushare.grading.labstate import (
        LabState,
        explain_scheduler,
        node_conditions,
        pending_reason,
        pod_resources,
        quantity,
        requested,
        selects_by_label,
        show_quantity,
    )
    from gpushare.grading.objects import asks_one, dig, find_object, line_of, show_yaml, usable
    from gpushare.lab.nodes import LabNodes
    from gpushare.lab.nodes import load as load_nodes
    from gpushare.sandbox.levels import Sandbox
    from gpushare.sandbox.supervisor import (
        Pending,
        RunResult,
        SandboxError,
        Supervisor,
        check_runnable,
    )
    from gpushare.submissions.bounded import yaml_first_node
    from gpushare.submissions.workdir import (
        FileProblem,
        LineDict,
        Workdir,
        load_yaml_text,
        yaml_kind,
    )

# where each name lives inside the engine today: module -> its names here
_ROOMS = {
    "gpushare.data": "Json JsonObject",
    "gpushare.grading.background": "BackgroundError Context",
    "gpushare.grading.checks": "WORKDIR_ABSENT CheckFailed T Value check fail",
    "gpushare.grading.labstate": "LabState explain_scheduler node_conditions pending_reason "
    "pod_resources quantity requested selects_by_label show_quantity",
    "gpushare.grading.objects": "asks_one dig find_object line_of show_yaml usable",
    "gpushare.lab.nodes": "LabNodes",
    "gpushare.sandbox.levels": "Sandbox",
    "gpushare.sandbox.supervisor": "Pending RunResult SandboxError Supervisor check_runnable",
    "gpushare.submissions.bounded": "yaml_first_node",
    "gpushare.submissions.workdir": "FileProblem LineDict Workdir load_yaml_text yaml_kind",
}
# name -> (module, attribute)
_WHERE = {name: (module, name) for module, names in _ROOMS.items() for name in names.split()}
_WHERE["load_nodes"] = ("gpushare.lab.nodes", "load")

__all__ = [
    "WORKDIR_ABSENT",
    "BackgroundError",
    "CheckFailed",
    "Context",
    "FileProblem",
    "Json",
    "JsonObject",
    "LabNodes",
    "LabState",
    "LineDict",
    "Pending",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "Supervisor",
    "T",
    "Value",
    "Workdir",
    "asks_one",
    "check",
    "check_runnable",
    "dig",
    "explain_scheduler",
    "fail",
    "find_object",
    "line_of",
    "load_nodes",
    "load_yaml_text",
    "node_conditions",
    "pending_reason",
    "pod_resources",
    "quantity",
    "requested",
    "selects_by_label",
    "show_quantity",
    "show_yaml",
    "usable",
    "yaml_first_node",
    "yaml_kind",
]


def __getattr__(name: str) -> object:
    """A declared name, imported from its room on first use (and kept here after)."""
    try:
        module, attr = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module 'gpushare.lab_api' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
