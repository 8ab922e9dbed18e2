"""``gpushare setup`` leaves bytecode for every module a grade imports, rooms included.

Under ``PYTHONDONTWRITEBYTECODE=1`` a module without bytecode is compiled from source at every
start: when only the package's top level was compiled, a grade took 0.40 s instead of 0.25 s.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from gpushare.locations import graders_dir
from gpushare.precompile import PACKAGE, imported_packages, precompile


def _fresh(source: Path) -> bool:
    """Whether ``source`` has bytecode that Python would load as it is (mtime and size match)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    try:
        header = cached.read_bytes()[:16]
    except OSError:
        return False
    stat = source.stat()
    return (
        header[:4] == importlib.util.MAGIC_NUMBER
        and int.from_bytes(header[4:8], "little") == 0  # timestamp-based, as compileall writes
        and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    )


def test_every_room_every_grader_its_lab_modules_and_pyyaml_have_fresh_bytecode() -> None:
    assert precompile(graders_dir())
    installed = [p for d in imported_packages() for p in d.rglob("*.py")]
    assert installed, "PyYAML not found: this test would not look at it"
    modules = [*PACKAGE.rglob("*.py"), *graders_dir().rglob("*.py"), *installed]
    rooms = {p.parent for p in PACKAGE.rglob("__init__.py")} - {PACKAGE}
    assert rooms, "the package has no subpackages: this test would prove nothing"
    stale = [str(p) for p in modules if not _fresh(p)]
    assert stale == []
