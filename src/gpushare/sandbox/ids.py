"""The uids and gids learners' scripts run as: never the grader's, one uid per run at once.

Root can always switch uid, so a root grader runs every script as an unprivileged uid of its
own: at the ``uid`` level directly, at ``bubblewrap`` as the uid bwrap starts as (so the
sandbox's uid maps to it on the host, never to root). A uid per concurrent run makes the
kernel's per-uid counts the run's own: ``RLIMIT_NPROC`` caps that run's processes, and the
cleanup ends every process of that uid (``kill(-1)`` as it) without touching anyone else's.

The uids come from a range (``$GPUSHARE_SANDBOX_UIDS``, default 60800-60927: Debian's range for
static system accounts below systemd's dynamic users at 61184), in slots of :data:`SLOT`: a
grade (one supervisor) takes a slot, locked with ``flock`` so that concurrent graders on the
machine never share one, and its runs take uids of it. A slot any uid of which is an account
of ``/etc/passwd`` is skipped. The range's last uid is for bwrap's trial run.

Each grade also gets a gid of its own, never given to a later grade (:func:`_next_gid`): the
gid of every run of that grade and the group that may read its staged files. A slot's uids
serve grade after grade; a gid shared by two grades would let a file one of them left (a
setgid copy, a staged folder) open the other's staged work.
"""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
import threading
import time
from collections.abc import Callable

RANGE_ENV = "GPUSHARE_SANDBOX_UIDS"
DEFAULT_RANGE = (60800, 60927)
SLOT = 8
# The grades' gids: above every range useradd, systemd's dynamic users and nspawn's containers
# give out (up to 0x6FFFFFFF), below 2**31 - 1; some 268 million of them.
GIDS = (0x70000000, 0x7FFFFF00)
# A counter lost with /tmp (a reboot) starts again from the clock, 8 gids a second: above
# every gid given before unless the machine graded faster than that since the last wrap.
_GIDS_PER_SECOND = 8


class NoUid(OSError):
    """No uid of the range is free (or the range is malformed)."""


def uid_range() -> tuple[int, int]:
    raw = os.environ.get(RANGE_ENV, "")
    if not raw:
        return DEFAULT_RANGE
    first, sep, last = raw.partition("-")
    try:
        lo, hi = int(first), int(last)
    except ValueError:
        raise NoUid(f"${RANGE_ENV}={raw!r}: expected FIRST-LAST, e.g. 60800-60927") from None
    if not (sep and lo >= 1000 and lo + SLOT <= hi < 2**31):
        raise NoUid(f"${RANGE_ENV}={raw!r}: expected FIRST-LAST, FIRST >= 1000, {SLOT + 1}+ uids")
    return lo, hi


# CAP_CHOWN (staged files for the run's gid), CAP_SETGID, CAP_SETUID: capability(7) numbers.
_NEEDED_CAPS = (1 << 0) | (1 << 6) | (1 << 7)


def can_switch() -> bool:
    """Whether we may run scripts as another uid: root with CAP_SETUID, CAP_SETGID and
    CAP_CHOWN (a container that drops them keeps uid 0 but cannot switch)."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16) & _NEEDED_CAPS == _NEEDED_CAPS
    except (OSError, ValueError):
        return True
    return True


def _taken(lookup: Callable[[int], object], number: int) -> bool:
    """Whether ``number`` is an account (``pwd.getpwuid``) or group (``grp.getgrgid``) here."""
    try:
        lookup(number)
    except KeyError:
        return False
    return True


class Slot:
    """A grade's uids (:meth:`take`, :meth:`give`) and its gid, its own: ``first``, the slot's
    first uid, names the slot (its runs take the others)."""

    def __init__(self, first: int, lock_fd: int, gid: int) -> None:
        self.first, self.gid = first, gid
        self._free = list(range(first + 1, first + SLOT))
        self._lock_fd = lock_fd
        self._mutex = threading.Lock()

    def take(self) -> int:
        with self._mutex:
            if not self._free:
                raise NoUid(f"more than {SLOT - 1} runs at once in one grade")
            return self._free.pop(0)

    def give(self, uid: int) -> None:
        with self._mutex:
            self._free.append(uid)

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1


def _lock_dir() -> str:
    # the same for every grader of the machine, whatever its TMPDIR
    path = f"/tmp/gpushare-uids-{os.geteuid()}"
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        st = os.lstat(path)
        if st.st_uid != os.geteuid() or not os.path.isdir(path) or os.path.islink(path):
            raise NoUid(f"{path} is not ours") from None
    return path


def allocate() -> Slot:
    """A free slot of the range, locked until :meth:`Slot.close` (or our exit)."""
    lo, hi = uid_range()
    directory = _lock_dir()
    for first in range(lo, hi - SLOT + 1, SLOT):
        fd = os.open(os.path.join(directory, str(first)), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if any(_taken(pwd.getpwuid, uid) for uid in range(first, first + SLOT)):
            os.close(fd)
            continue
        try:
            return Slot(first, fd, _next_gid(directory))
        except BaseException:
            os.close(fd)
            raise
    raise NoUid(f"no free slot of {SLOT} uids in {lo}-{hi} (${RANGE_ENV})")


def _next_gid(directory: str) -> int:
    """The next gid of :data:`GIDS`, counted in ``directory/gids`` under ``flock`` (every grader
    of the machine with our euid shares it): never one a grade had before, never a group of
    ``/etc/group``."""
    lo, hi = GIDS
    fd = os.open(os.path.join(directory, "gids"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, 32, 0).strip()
        last = int(raw) if raw.isdigit() and lo <= int(raw) < hi else None
        if last is None:
            last = lo + int(time.time() * _GIDS_PER_SECOND) % (hi - lo)
        gid = last
        for _ in range(1000):
            gid = lo + (gid + 1 - lo) % (hi - lo)
            if not _taken(grp.getgrgid, gid):
                break
        else:
            raise NoUid(f"no free gid after {last} in {lo}-{hi}")
        data = b"%d\n" % gid
        os.pwrite(fd, data.ljust(16), 0)
        return gid
    finally:
        os.close(fd)  # releases the flock
