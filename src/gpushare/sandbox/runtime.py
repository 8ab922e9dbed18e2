"""The Python a learner's script finds as ``python3``: the grader's interpreter, its standard
library and PyYAML, copied once into a directory any uid may read, and nothing else.

The lab tells learners to parse manifests with ``python3`` and ``yaml.safe_load_all``. The
grader's own interpreter may live where the run's uid cannot go (pyenv under ``/root``, 0700),
and its prefix holds every package pip put there (the grader's dependencies, tokens in a
``.pth``...). So the interpreter (and ``libpython`` when it is shared), the standard library
without ``site-packages`` (nor ``test``, ``idlelib``, ``tkinter``...), and the ``yaml`` and
``_yaml`` packages (beside the standard library, on every interpreter's path) are copied,
once per machine and interpreter, into
``/var/cache/gpushare/sandbox-runtime/<key>`` (root) or the user's cache, files 0644/0755.
bubblewrap binds that directory read-only; the ``uid`` level puts its ``bin`` first on PATH.
Some 94 MB (Python 3.11 here), copied in about a second by the first grade on a machine.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
import zlib
from dataclasses import dataclass
from pathlib import Path

from gpushare.locations import cache_dir

ROOT_CACHE = "/var/cache/gpushare/sandbox-runtime"
_SKIPPED = {
    "site-packages",
    "dist-packages",
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
}


@dataclass(frozen=True)
class Runtime:
    """A copied runtime: ``home`` (``bin/python3`` in it), the environment a script needs to
    start it (``LD_LIBRARY_PATH`` for a shared ``libpython``), and versions."""

    home: str
    env: tuple[tuple[str, str], ...]
    python_version: str
    pyyaml_version: str | None

    @property
    def bin(self) -> str:
        return f"{self.home}/bin"


def _packages() -> list[str]:
    found = []
    for name in ("yaml", "_yaml"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.append(os.path.realpath(next(iter(spec.submodule_search_locations))))
    return found


def _yaml_version(packages: list[str]) -> str | None:
    try:
        for line in Path(packages[0], "__init__.py").read_text(encoding="utf-8").splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("'\"")
    except (OSError, IndexError):
        return None
    return None


def find(base: str | None = None) -> Runtime:
    """The runtime for this interpreter, copied now if it is not there yet (atomically: a
    concurrent grader copies its own and one rename wins)."""
    exe = os.path.realpath(sys.executable)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    packages = _packages()
    version = ".".join(str(p) for p in sys.version_info[:3])
    short = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    shared = bool(sysconfig.get_config_var("Py_ENABLE_SHARED"))
    libname = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    layout = "2"  # PyYAML beside the standard library (1: in a site-packages)
    stamp = "\0".join([layout, exe, stdlib, version, *packages, str(os.stat(exe).st_mtime_ns)])
    if base is None:
        base = ROOT_CACHE if os.geteuid() == 0 else str(cache_dir() / "sandbox-runtime")
    home = os.path.join(base, f"{version}-{zlib.crc32(stamp.encode()):08x}")
    env = (("LD_LIBRARY_PATH", f"{home}/lib"),) if shared else ()
    runtime = Runtime(home, env, version, _yaml_version(packages))
    if os.path.isfile(os.path.join(home, "bin", "python3")):
        return runtime
    os.makedirs(base, mode=0o755, exist_ok=True)
    os.chmod(base, 0o755)
    tmp = f"{home}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(f"{tmp}/bin", mode=0o755)
    shutil.copy2(exe, f"{tmp}/bin/{short}")
    os.symlink(short, f"{tmp}/bin/python3")
    os.symlink(short, f"{tmp}/bin/python")
    os.makedirs(f"{tmp}/lib", mode=0o755)
    if shared and libname and os.path.isfile(os.path.join(libdir, libname)):
        shutil.copy2(os.path.join(libdir, libname), f"{tmp}/lib/{libname}")

    def skip(directory: str, names: list[str]) -> set[str]:
        top = os.path.realpath(directory) == stdlib
        return {n for n in names if (top and n in _SKIPPED) or n.startswith("config-")}

    shutil.copytree(stdlib, f"{tmp}/lib/{short}", ignore=skip, symlinks=True)
    # PyYAML beside the standard library, which every python3 puts on sys.path: a copied
    # site-packages is not, where the interpreter is Debian's (its site.py looks in
    # dist-packages), and the script's `import yaml` would fail there alone
    for package in packages:
        shutil.copytree(package, f"{tmp}/lib/{short}/{os.path.basename(package)}", symlinks=True)
    for directory, _dirs, files in os.walk(tmp):  # readable by any uid, writable by none
        os.chmod(directory, 0o755)
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755 if os.stat(path).st_mode & 0o111 else 0o644)
    try:
        os.rename(tmp, home)
    except OSError:  # another grader's copy won
        shutil.rmtree(tmp, ignore_errors=True)
    return runtime
