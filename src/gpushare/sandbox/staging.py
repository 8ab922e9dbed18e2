"""The copies a run with a uid of its own reads: the work dir and the files it is given.

A root grader's runs (``bubblewrap`` as the run's uid, ``uid``) cannot read the grader's own
files (a home of 0700, a checkout), and must not: each grade copies what its runs may read
into a folder of its own under ``/tmp``, readable by its gid only, once per grade for the work
dir, bounded in files and bytes; each run sees the copies at the original paths
(:mod:`gpushare.sandbox.view`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from gpushare.sandbox import ids, levels
from gpushare.sandbox.errors import SandboxError
from gpushare.sandbox.levels import Level, Sandbox


class Stage:
    """A grade's copies: ``<stage>/work-N`` (a folder the script runs in) and ``<stage>/in-N``
    (a file it is given), in a folder of mode 0750 owned by the grader and the grade's gid,
    modes 0640/0750 so that the gid reads (and executes) what the grader could. Each run sees
    them at the original paths (bubblewrap's binds; at ``uid``, those of its own mount
    namespace, whose root is built on ``<stage>/root``)."""

    def __init__(self, sandbox: Sandbox) -> None:
        if sandbox.level is Level.UID:
            levels.protect_once()
        try:
            self.slot = ids.allocate()
        except OSError as exc:
            raise SandboxError(f"no uid for the runs: {exc}") from None
        prefix = f"{_STAGE_PREFIX}{self.slot.first}-"
        _sweep(prefix)
        try:
            self.root = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
            os.chown(self.root, -1, self.slot.gid)
            os.chmod(self.root, 0o750)
        except OSError:
            self.slot.close()
            raise
        self.view_root = os.path.join(self.root, "root")  # where each run's tree is built
        os.mkdir(self.view_root, 0o700)
        self._copies: dict[tuple[str, tuple[tuple[str, int, int, int], ...]], str] = {}
        self._count = 0
        self._mutex = threading.Lock()

    def place(self, cwd: Path, readable: Sequence[Path]) -> list[tuple[str, str]]:
        """(staged copy, grader's path) of ``cwd`` (copied once a grade) and of ``readable``."""
        pairs = []
        for path in [cwd, *readable]:
            original = os.path.abspath(os.fspath(path))
            with self._mutex:
                key = (original, _signature(original)) if path is cwd else None
                copy = self._copies.get(key) if key else None
                if copy is None:
                    self._count += 1
                    top = os.path.join(
                        self.root, f"{'work' if path is cwd else 'in'}-{self._count}"
                    )
                    copy = _copy_bounded(original, top, self.root, self.slot.gid)
                    if key:
                        self._copies[key] = copy
            pairs.append((copy, original))
        return pairs

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.slot.close()


_STAGE_PREFIX = "gpushare-stage-"


def _sweep(prefix: str) -> None:
    """Remove the staging folders dead grades left with this slot (``prefix`` names it): a
    grade killed mid-run (a class worker SIGKILLed past its deadline) cannot remove its own
    copies of a learner's work, readable by that grade's gid. We hold the slot's lock, so no
    grade alive has a folder of its prefix."""
    try:
        entries = list(os.scandir("/tmp"))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            shutil.rmtree(entry.path, ignore_errors=True)


def _signature(folder: str) -> tuple[tuple[str, int, int, int], ...]:
    """Every entry's path, size, mode and mtime: the runs of one grade share one copy of
    ``folder`` while this stays the same (a folder changed is copied again)."""
    found = []
    for count, (directory, dirs, files) in enumerate(os.walk(folder)):
        if count > _STAGE_FILES:
            break
        for name in files + dirs:
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                found.append((path, st.st_size, st.st_mode, st.st_mtime_ns))
    return tuple(found)


_STAGE_FILES = 10_000
_STAGE_BYTES = 64 * 1024 * 1024


def _copy_bounded(source: str, top: str, stage: str, gid: int) -> str:
    """Copy ``source`` (a folder, or a file: into ``top``) for the run; its path in the copy.
    Regular files, folders and symlinks (as links) only, at most :data:`_STAGE_FILES` entries
    and :data:`_STAGE_BYTES`, never the stage itself (a folder holding it); for ``gid`` only."""
    if not os.path.isdir(source):
        os.mkdir(top)
        _give(top, gid, True)
        dest = os.path.join(top, os.path.basename(source))
        shutil.copyfile(source, dest)
        _give(dest, gid, bool(os.stat(source).st_mode & 0o111))
        return dest
    if (stage + "/").startswith(source.rstrip("/") + "/"):
        raise OSError(errno.EINVAL, "the folder holds the sandbox's own staging folder", source)
    count = size = 0
    for directory, dirs, files in os.walk(source):
        rel = os.path.relpath(directory, source)
        folder = os.path.normpath(os.path.join(top, rel))
        os.mkdir(folder)
        _give(folder, gid, True)
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            src = os.path.join(directory, name)
            dest = os.path.normpath(os.path.join(top, rel, name))
            count += 1
            st = os.lstat(src)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(src), dest)
            elif stat.S_ISREG(st.st_mode):
                size += st.st_size
                if size > _STAGE_BYTES:
                    raise OSError(errno.EFBIG, "more than 64 MiB to stage", source)
                shutil.copyfile(src, dest)
                _give(dest, gid, bool(st.st_mode & 0o111))
            if count > _STAGE_FILES:
                raise OSError(errno.EFBIG, "more than 10,000 files to stage", source)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(directory, d))]
    return top


def _give(path: str, gid: int, executable: bool) -> None:
    """A folder or file of the copy to ``gid``, nothing to others: 0750, or 0640 for a file
    nobody could execute."""
    os.chown(path, -1, gid)
    os.chmod(path, 0o750 if executable else 0o640)
