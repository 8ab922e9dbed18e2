"""Write the bytecode of the package and of the graders once, at setup, as ``pip install`` does.

Run from a checkout (``pip install -e``) with ``PYTHONDONTWRITEBYTECODE=1`` (common in
containers, set on our machines), Python compiles every module of ours at every start and keeps
nothing: a grade takes 0.40 s instead of 0.25 s (docs/performance.md, "Where a grade's time
goes"). ``gpushare setup`` (run by ``make grade`` and ``make test``) compiles the checkout as an
install would; a module edited afterwards is still correct (Python sees the stale bytecode and
compiles from source, only slower, until the next setup).
"""

from __future__ import annotations

import compileall
import importlib.util
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


# Installed packages a grade imports whose bytecode we make sure of: PyYAML is also what the
# learner's ``python3`` imports in the sandbox, read-only, five times a grade (about 30 ms more a
# run without bytecode). pip writes it at install; a venv made otherwise may lack it.
IMPORTED = ("yaml",)


def imported_packages() -> list[Path]:
    """Where the packages of :data:`IMPORTED` are, found without importing them."""
    found: list[Path] = []
    for name in IMPORTED:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.extend(Path(p) for p in spec.submodule_search_locations)
    return found


def precompile(*extra: Path) -> bool:
    """Compile the package with all its rooms, the ``extra`` directories (the graders, with
    their lab's support modules) and :data:`IMPORTED`; True when every file compiled (a
    read-only install is left as it is)."""
    ok = bool(compileall.compile_dir(PACKAGE, quiet=1))
    for directory in extra:
        if directory.is_dir():
            ok = bool(compileall.compile_dir(directory, quiet=1)) and ok
    for directory in imported_packages():  # not ours: a read-only install says nothing
        ok = bool(compileall.compile_dir(directory, quiet=2)) and ok
    return ok
