"""The Python a learner's script finds as ``python3``: the grader's interpreter, its standard
library and the packages the lab names, copied once into a directory any uid may read, and
nothing else.

A lab names the packages its learners' scripts may import (``lab.toml`` ``[sandbox]
runtime_packages``; the GPU lab: ``yaml`` and ``_yaml``, for ``yaml.safe_load_all`` in
``python3``). The grader's own interpreter may live where the run's uid cannot go (pyenv under
``/root``, 0700), and its prefix holds every package pip put there (the grader's dependencies,
tokens in a ``.pth``...). So the interpreter (and a shared ``libpython``), the standard library
without ``site-packages`` (nor ``test``, ``idlelib``, ``tkinter``...) and the lab's packages
(beside the standard library, on every interpreter's path) are copied, once per machine and
interpreter, into ``/var/cache/gpushare/sandbox-runtime/<key>`` (root) or the user's cache,
files 0644/0755; bubblewrap and the ``uid`` level bind it read-only, its ``bin`` first on PATH.
Some 94 MB (Python 3.11 here), copied in about a second by the first grade on a machine.

The key names what the copy holds, not where it came from: every virtualenv of one interpreter
has its own PyYAML folder, and a key made of that folder's path gave each of them (each CI
clone, each worktree) a copy of its own. :func:`prune` (``gpushare setup``) removes the copies
whose interpreter is gone, and those of the older key.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from gpushare.lab import definition
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
    """The folders of the packages the lab names that this interpreter has."""
    lab = definition.found()
    found = []
    for name in lab.runtime_packages if lab else ():
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.append(os.path.realpath(next(iter(spec.submodule_search_locations))))
    return found


def _yaml_version(packages: list[str]) -> str | None:
    """PyYAML's version when the lab has it copied (the results record it), else None."""
    try:
        folder = next(p for p in packages if os.path.basename(p) == "yaml")
        for line in Path(folder, "__init__.py").read_text(encoding="utf-8").splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("'\"")
    except (OSError, StopIteration):
        return None
    return None


# Bumped when what a copy holds, or how its key is made, changes (1: PyYAML in a
# site-packages; 2: the key held PyYAML's path).
_LAYOUT = "3"
# What a copy records of its source, for prune(): the interpreter it was copied from.
_SOURCE = "source"
# A copy of an older layout (no source file) is pruned once made this long ago (an older
# gpushare still in use makes it again at its next grade).
_OLD_LAYOUT_AGE_S = 24 * 3600


def _base(base: str | None) -> str:
    if base is not None:
        return base
    return ROOT_CACHE if os.geteuid() == 0 else str(cache_dir() / "sandbox-runtime")


def key(exe: str, stdlib: str, version: str, packages: list[str]) -> str:
    """The copy's folder name: the interpreter (its path and mtime), its standard library and
    version, and each package by its name and its files' names and sizes, so that the same
    PyYAML installed in two virtualenvs is one copy, and another PyYAML another."""
    parts = [_LAYOUT, exe, stdlib, version, str(os.stat(exe).st_mtime_ns)]
    for package in packages:
        parts.append(os.path.basename(package))
        with os.scandir(package) as entries:
            parts += sorted(f"{e.name}:{e.stat().st_size}" for e in entries if e.is_file())
    return f"{version}-{zlib.crc32(chr(0).join(parts).encode()):08x}"


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
    base = _base(base)
    home = os.path.join(base, key(exe, stdlib, version, packages))
    env = (("LD_LIBRARY_PATH", f"{home}/lib"),) if shared else ()
    runtime = Runtime(home, env, version, _yaml_version(packages))
    if os.path.isfile(os.path.join(home, "bin", "python3")):
        return runtime
    os.makedirs(base, mode=0o755, exist_ok=True)
    os.chmod(base, 0o755)
    tmp = f"{home}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(f"{tmp}/bin", mode=0o755)
    with open(f"{tmp}/{_SOURCE}", "w", encoding="utf-8") as fh:
        fh.write(exe + "\n")
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


def prune(base: str | None = None) -> list[str]:
    """Remove the copies no grade will use again; return their folders.

    A copy goes when the interpreter it recorded is gone (a deleted virtualenv's own
    ``python``, an uninstalled pyenv version), when it is of an older layout (no record) and
    was made over a day ago, and when it is a copy left half-made by a grader that died (its
    pid in the name, no longer running). A copy a grade may be using is kept: its interpreter
    is there.
    """
    base = _base(base)
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    removed = []
    now = time.time()
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        if entry.name.endswith(".tmp"):
            pid = entry.name.rsplit(".", 2)[-2]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
            continue
        try:
            with open(os.path.join(entry.path, _SOURCE), encoding="utf-8") as fh:
                stale = not os.path.exists(fh.readline().strip())
        except FileNotFoundError:
            stale = now - entry.stat(follow_symlinks=False).st_mtime > _OLD_LAYOUT_AGE_S
        except OSError:
            stale = False
        if stale:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed
