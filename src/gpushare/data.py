"""Names for the values whose shape the type checker cannot know.

`make lint` runs mypy strict with explicit ``Any`` disallowed: the only ``Any`` in the engine and
the lab are these aliases, each with the reason it is one. Everything else is typed, or is
``object`` and narrowed where it is used.
"""

from collections.abc import Callable
from typing import Any

# What JSON or YAML parsing returns: objects of the cluster (read live or from a snapshot),
# results.json, a learner's files. Their shape is the API's or a stranger's, not ours: each reader
# checks the fields it uses where it uses them (`.get` with defaults, isinstance), and parsing is
# bounded before (submissions/bounded.py). Typing them as a recursive union would put a cast on
# every `obj["metadata"]["name"]` without checking anything more.
Json = Any  # type: ignore[explicit-any]  # see the comment above: parsed data, checked by its reader

# One parsed object: a Kubernetes object, a results.json, a learner's YAML document.
JsonObject = dict[str, Json]

# An object of the official `kubernetes` package, which ships no type information.
Untyped = Any  # type: ignore[explicit-any]  # the kubernetes package has no stubs or py.typed

# A grader's check function: called by name with the inputs its parameters ask for (``lab``,
# ``work``, a step's background work), each typed as its step knows it; no one signature covers
# them all, and pytest calls the same functions the same way.
CheckFunction = Callable[..., object]  # type: ignore[explicit-any]  # see the comment above
