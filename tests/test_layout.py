"""The rooms of the package (issue 12): each subpackage says what it is, and imports point down.

Rooms, lowest first: the base modules (``locations``, ``versions``, ``precompile``, ``data``),
``kube`` (talking to a Kubernetes API), ``lab`` (the lab cluster's lifecycle), ``sandbox``,
``reports``, ``submissions``, ``grading``, ``lab_api`` (what a lab may use), ``labkit`` (the
gates a lab's tests call), ``watch``, then ``classroom`` and ``lms``, then ``cli``. A module
may import its own room and the rooms below it, never one above (imports made only for type
checkers, under ``if TYPE_CHECKING:``, do not count: they never run). A lab's graders import
``gpushare.lab_api`` and nothing else of the engine.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import gpushare
from gpushare import lab_api
from tests.helpers import ROOT

PACKAGE = Path(gpushare.__file__).parent
ORDER = ["", "kube", "lab", "sandbox", "reports", "submissions", "grading", "lab_api", "labkit"]
ORDER += ["watch", "classroom", "lms", "cli"]


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
    assert subpackages == set(ORDER) - {"", "lab_api", "labkit", "cli"}
    flat = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert flat == {
        "cli",
        "data",
        "feedback",
        "lab_api",
        "labkit",
        "locations",
        "precompile",
        "versions",
    }, "a module outside the rooms"


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


def _every_import(tree: ast.Module) -> list[str]:
    """Every ``gpushare...`` module a file imports, at run time or for the type checker."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gpushare":
                found.extend(f"gpushare.{alias.name}" for alias in node.names)
            elif node.module.startswith("gpushare."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(
                a.name for a in node.names if a.name == "gpushare" or a.name.startswith("gpushare.")
            )
    return found


def lab_imports(graders: Path) -> list[str]:
    """``file imports module`` for each import of the engine by a lab's graders other than
    ``gpushare.lab_api`` (a conftest's ``pytest_plugins`` string is not an import)."""
    out = []
    for path in sorted(graders.rglob("*.py")):
        for imported in _every_import(ast.parse(path.read_text(encoding="utf-8"))):
            if imported != "gpushare.lab_api":
                out.append(f"{path.relative_to(graders.parent)} imports {imported}")
    return out


def test_graders_import_only_the_lab_api():
    assert lab_imports(ROOT / "graders") == []
    assert lab_imports(ROOT / "examples" / "labs" / "rbac" / "graders") == []


def test_the_engine_names_no_example_lab():
    """The example lab is a folder of data and checks the engine never heard of."""
    lab = ROOT / "examples" / "labs" / "rbac"
    words = ("rbaclab", "examples/labs", "pod-reader", "shop-node", "auditor-reads-pods")
    found = [
        f"{path.relative_to(ROOT)}: {word}"
        for path in sorted(PACKAGE.rglob("*"))
        if path.is_file() and path.suffix in (".py", ".toml", ".sh", "")
        for word in words
        if word in path.read_text(encoding="utf-8", errors="replace")
        and not (path.name == "labkit.py" and word == "examples/labs")  # its docstring's pointer
    ]
    assert found == []
    assert (lab / "graders" / "lab.toml").is_file()


def test_the_lab_api_guard_sees_an_inside_import(tmp_path):
    graders = tmp_path / "graders"
    (graders / "mylab").mkdir(parents=True)
    (graders / "test_step1.py").write_text("from gpushare.lab_api import check\n")
    (graders / "mylab" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpushare.data import Json\n"
    )
    assert lab_imports(graders) == ["graders/mylab/__init__.py imports gpushare.data"]


def test_the_lab_api_declares_what_it_serves():
    """``__all__`` is the table of names, each resolves to the engine's object, and the type
    checker's imports name the same objects."""
    tree = ast.parse(Path(lab_api.__file__).read_text(encoding="utf-8"))
    checked = {
        (alias.asname or alias.name): (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpushare.")
        for alias in node.names
    }
    assert sorted(lab_api.__all__) == sorted(lab_api._WHERE) == sorted(checked)
    for name in lab_api.__all__:
        module, attr = checked[name]
        assert lab_api._WHERE[name] == (module, attr), name
        assert getattr(lab_api, name) is getattr(importlib.import_module(module), attr), name
        assert name in dir(lab_api)
