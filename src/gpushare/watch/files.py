"""The work-dir side of ``gpushare watch``: file events, through Linux inotify.

inotify (``inotify(7)``) tells of a write as it is closed, a rename, a delete and a chmod, on
every folder of the work dir, with no polling; it is had through ctypes, so nothing new is
installed. Where it cannot be had (another kernel, the watch limit reached) the files are
stat()ed every :data:`POLL` seconds instead: a few hundred small files cost well under a
millisecond a round. A work dir that does not exist yet is looked for every :data:`POLL`
seconds until it does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import queue
import select
import struct
import threading
from pathlib import Path

from gpushare.watch.cluster import Event

POLL = 1.0
MAX_DIRS = 256  # folders watched at most (a work dir is k8s/, bin/, out/)
MAX_FILES = 2048  # files stat()ed at most by the fallback

# <sys/inotify.h>
IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO = 0x4, 0x8, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_IGNORED, IN_ISDIR, IN_NONBLOCK, IN_CLOEXEC = 0x8000, 0x40000000, 0o4000, 0o2000000
MASK = (
    IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len


class FileWatch:
    """Tell ``events`` of every change under ``root`` (an Event ``change`` whose key is the
    path relative to the work dir, e.g. ``k8s/gpu-quota.yaml``)."""

    def __init__(self, root: Path, events: queue.Queue[Event]) -> None:
        self.root = root
        self.events = events
        self.mode = "inotify"
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="watch files", daemon=True)

    def start(self) -> FileWatch:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=2)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _run(self) -> None:
        libc = _libc()
        while not self._stop.is_set():
            while not self.root.is_dir():  # not made yet: the loop says so on the screen
                if self._stop.wait(POLL):
                    return
            self.events.put(Event("change", "."))  # it appeared (or was there): look at it all
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC) if libc is not None else -1
            if libc is None or fd < 0:
                self.mode = "poll"
                self._poll()
                return
            try:
                self._inotify(libc, fd)  # returns when the work dir itself goes
            finally:
                os.close(fd)

    def _inotify(self, libc: ctypes.CDLL, fd: int) -> None:
        dirs: dict[int, str] = {}  # watch descriptor -> folder relative to the root

        def add(rel: str) -> None:
            if len(dirs) >= MAX_DIRS:
                return
            wd = libc.inotify_add_watch(fd, os.fsencode(self.root / rel), MASK)
            if wd < 0:
                return
            dirs[wd] = rel
            try:
                children = sorted((self.root / rel).iterdir())
            except OSError:
                return
            for child in children:
                if child.is_dir() and not child.is_symlink():
                    add(os.path.relpath(child, self.root))

        add(".")
        while not self._stop.is_set():
            ready, _, _ = select.select([fd, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                data = os.read(fd, 64 * 1024)
            except BlockingIOError:
                continue
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
                name = data[offset + _HEADER.size : offset + _HEADER.size + size]
                offset += _HEADER.size + size
                folder = dirs.get(wd)
                if folder is None:
                    continue
                if mask & IN_IGNORED:
                    dirs.pop(wd, None)
                    continue
                leaf = os.fsdecode(name.rstrip(b"\0"))
                rel = os.path.normpath(os.path.join(folder, leaf)) if leaf else folder
                if folder == "." and not leaf and mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                    self.events.put(Event("change", "."))
                    return
                if mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                    add(rel)
                self.events.put(Event("change", rel))

    def _poll(self) -> None:
        seen = self._stats()
        while not self._stop.wait(POLL):
            now = self._stats()
            for rel in sorted(set(seen) | set(now)):
                if seen.get(rel) != now.get(rel):
                    self.events.put(Event("change", rel))
            seen = now

    def _stats(self) -> dict[str, tuple[int, int, int]]:
        out: dict[str, tuple[int, int, int]] = {}
        for folder, subdirs, names in os.walk(self.root):
            subdirs.sort()
            for name in sorted(names):
                if len(out) >= MAX_FILES:
                    return out
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                out[os.path.relpath(path, self.root)] = (st.st_mtime_ns, st.st_size, st.st_mode)
        return out


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1  # noqa: B018 (absent outside Linux)
    except (OSError, AttributeError):
        return None
    return libc
