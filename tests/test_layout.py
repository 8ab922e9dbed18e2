"""The rooms of the package (issue 12): each subpackage says what it is, and imports point down.

Rooms, lowest first: the base modules (``locations``, ``versions``, ``precompile``, ``data``),
``kube`` (talking to a Kubernetes API), ``lab`` (the lab cluster's lifecycle), ``sandbox``,
``reports``, ``submissions``, ``grading``, then ``classroom`` and ``lms``, then ``cli``. A module
may import its own room and the rooms below it, never one above (imports made only for type
checkers, under ``if TYPE_CHECKING:``, do not count: they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpushare

PACKAGE = Path(gpushare.__file__).parent
ORDER = ["", "kube", "lab", "sandbox", "reports", "submissions", "grading"]
ORDER += ["classroom", "lms", "cli"]


def _room(module: str) -> str:
    """``gpushare.lab.cluster`` -> ``lab``; ``gpushare.cli`` -> ``cli``; base modules -> ``""``."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if parts[0] == "__main__":  # ``python -m gpushare``: the command itself
        return "cli"
    if parts[0] in ORDER:
        return parts[0]
    return ""


def _runtime_imports(tree: ast.Module) -> list[str]:
    """``gpushare...`` modules imported when the code runs (not under ``if TYPE_CHECKING``)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gpushare":
                found.extend(f"gpushare.{alias.name}" for alias in node.names)
            elif node.module.startswith("gpushare."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.startswith("gpushare."))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out[name] = path
    return out


def test_every_room_says_what_it_is():
    for room in ORDER:
        if room and (PACKAGE / room).is_dir():
            doc = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text()))
            assert doc and doc.splitlines()[0].endswith("."), room  # a one-line summary first


def test_the_rooms_are_the_ones_listed():
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages == set(ORDER) - {"", "cli"}
    flat = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert flat == {"cli", "data", "feedback", "locations", "precompile", "versions"}, (
        "a module outside the rooms"
    )


def test_imports_point_down():
    upward = []
    for name, path in _modules().items():
        mine = ORDER.index(_room(name))
        for imported in _runtime_imports(ast.parse(path.read_text())):
            if imported in ("gpushare", "gpushare.__version__"):
                continue
            if ORDER.index(_room(imported)) > mine:
                upward.append(f"{name} imports {imported}")
    assert upward == []


def test_reports_know_nothing_of_grading():
    """The outputs render the feedback model (gpushare.feedback), never the grading room's
    classes: not at run time, nor for a type checker."""
    found = []
    for name, path in _modules().items():
        if _room(name) != "reports":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [module]
            found += [f"{name} imports {n}" for n in names if n and n.startswith("gpushare.grad")]
    assert found == []
