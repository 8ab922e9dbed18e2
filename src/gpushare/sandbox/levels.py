"""Isolation levels of learners' scripts, named, and which one a grade gets.

=============  ==============================================================================
``bubblewrap``  namespaces (:mod:`gpushare.sandbox.isolation`), as the run's own uid when the
                grader is root; cleanup: the pid namespace.
``uid``         where no user namespace can be made, root runs the script as a uid of its own
                (:mod:`gpushare.sandbox.ids`) in network, IPC, mount and pid namespaces of
                its own (:mod:`gpushare.sandbox.namespaces`: no network, its own ``/proc``),
                ``no_new_privs``, a new session keyring, the caps of
                :mod:`gpushare.sandbox.limits`; what it may read of the grader's is staged;
                cleanup: the pid namespace.
``none``        the grader's uid, caps only; only with ``--unsafe-no-sandbox``, or for a
                learner grading their own work where nothing better runs (said once).
=============  ==============================================================================

Strangers' work (a snapshot, a class, Gradescope) gets ``bubblewrap`` where it runs, else
``uid`` where root may make those namespaces (CAP_SYS_ADMIN, a seccomp profile that allows
``unshare`` and ``mount``), else the grade is refused, saying what the host lacks, unless the
instructor passes ``--unsafe-no-sandbox`` (``none``). A uid of its own and nothing more would
leave a script the host's network, files and IPC: that is no level. The level used is
recorded in every result (``isolation``).
"""

from __future__ import annotations

import enum
import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from gpushare import locations
from gpushare.sandbox import ids, namespaces
from gpushare.sandbox.isolation import INSTALL_HINT, Isolation, probe
from gpushare.sandbox.isolation import (
    IsolationUnavailable as IsolationUnavailable,
)  # raised by choose()


class Level(enum.StrEnum):
    """The isolation levels, the one place they are named; a value is what every result
    records (``isolation``)."""

    BUBBLEWRAP = "bubblewrap"
    UID = "uid"
    NONE = "none"


BUBBLEWRAP, UID, NONE = Level.BUBBLEWRAP, Level.UID, Level.NONE


@dataclass
class Sandbox:
    """The level of a grade's runs; ``isolation`` is bwrap's, at the ``bubblewrap`` level."""

    level: Level
    isolation: Isolation | None = None

    def __post_init__(self) -> None:
        self.level = Level(self.level)  # a level's name given as text is still one of them

    @property
    def own_uid(self) -> bool:
        """Whether each run has a uid of its own (root grader, any level but ``none``)."""
        if self.level is Level.UID:
            return True
        return self.isolation is not None and self.isolation.uid >= 0


NO_SANDBOX = Sandbox(NONE)
_noticed = False


def choose(
    *, strangers: bool, unsafe_no_sandbox: bool = False, minimum: Level = Level.UID
) -> Sandbox:
    """The level for a grade's runs. ``strangers``' work (a snapshot, a class) gets at least
    ``minimum`` (``uid`` or ``bubblewrap``), else :class:`IsolationUnavailable`, unless
    ``unsafe_no_sandbox`` (the instructor's explicit flag: ``none``). A learner's own work gets
    the best level that runs, and ``none`` with a note on stderr (once) when neither does."""
    global _noticed
    if unsafe_no_sandbox:
        return NO_SANDBOX
    found = probe()
    if strangers and os.geteuid() == 0 and not ids.can_switch():
        raise IsolationUnavailable(
            "refusing to run learners' scripts as root: this root lacks CAP_SETUID, CAP_SETGID "
            "or CAP_CHOWN, so they cannot run as a uid of their own; give the grader those "
            "capabilities, or run it as a non-root user"
        )
    if found.isolation is not None:
        return Sandbox(Level.BUBBLEWRAP, found.isolation)
    lacks = f"bubblewrap: {found.reason}"
    if ids.can_switch() and minimum is not Level.BUBBLEWRAP:
        why = namespaces.unavailable()
        if why is None:
            try:
                ids.uid_range()
            except ids.NoUid as exc:
                raise IsolationUnavailable(str(exc)) from None
            return Sandbox(Level.UID)
        lacks += (
            "; the uid level: root could not give a run network, IPC, mount and pid "
            f"namespaces of its own (it needs CAP_SYS_ADMIN and a seccomp profile that allows "
            f"unshare and mount): {why}"
        )
    if strangers:
        need = (
            "bubblewrap" if minimum is Level.BUBBLEWRAP else "bubblewrap, or the uid level as root"
        )
        raise IsolationUnavailable(
            f"refusing to run learners' scripts without a sandbox ({need}): {lacks}; "
            f"{INSTALL_HINT}; or pass --unsafe-no-sandbox to run them unsandboxed (only for "
            "trusted work)"
        )
    if not _noticed:
        _noticed = True
        print(
            f"gpushare: note: learners' scripts run without a sandbox here ({lacks})",
            file=sys.stderr,
        )
    return NO_SANDBOX


def _reachable_by_others(path: str) -> bool:
    """Whether every directory above ``path`` is searchable by others (neither owner nor group)."""
    parent = os.path.dirname(os.path.abspath(path))
    while True:
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def protect(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """At the ``uid`` level, keep other uids out of the grader's files: each path another uid
    could reach and read, write or search loses its bits for others (``chmod o-rwx``; for a
    file still to be written, the folder it will be in). Returns what changed; system folders
    (``/``, ``/usr``, ``/tmp``...) are never changed."""
    changed = []
    for raw in paths:
        path = os.path.abspath(os.fspath(raw))
        while not os.path.lexists(path):  # still to be written: the folder it will be in
            path = os.path.dirname(path)
        if path in _SYSTEM or os.path.islink(path):
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_mode & 0o007 and st.st_uid == os.geteuid() and _reachable_by_others(path):
            try:
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o007)
            except OSError:  # a read-only mount (an upload given read-only): nobody writes it
                continue
            changed.append(path)
    return changed


_SYSTEM = {
    "/",
    "/usr",
    "/tmp",
    "/var",
    "/var/tmp",
    "/home",
    "/opt",
    "/srv",
    "/etc",
    "/dev",
    "/dev/shm",
    "/run",
    "/mnt",
    "/media",
}


_protected = False


def protect_once() -> None:
    """:func:`protect` the grader's own files once per process (the ``uid`` level): its home,
    its working folder (results go there unless told otherwise) and the graders (the package
    itself is public: a learner has it in their pod)."""
    global _protected
    if not _protected:
        _protected = True
        protect([os.path.expanduser("~"), os.getcwd(), str(locations.graders_dir())])


def protect_at_uid(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """:func:`protect` a caller's own places (a class's folders, Gradescope's) when strangers'
    runs here would be at the ``uid`` level (root without bubblewrap); return those it could
    not protect (:func:`unprotectable`), for the caller to refuse."""
    if ids.can_switch() and not probe().available and namespaces.unavailable() is None:
        listed = [os.fspath(p) for p in paths]
        protect(listed)
        return unprotectable(listed)
    return []


def unprotectable(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The existing paths another uid could reach and read that :func:`protect` leaves so, not
    being the grader's (root grading an instructor's folder: ``sudo gpushare class grade ~/subs``).
    """
    found = []
    for raw in paths:
        path = os.path.abspath(os.fspath(raw))
        if path in _SYSTEM or os.path.islink(path) or not os.path.exists(path):
            continue
        st = os.stat(path)
        if st.st_mode & 0o007 and st.st_uid != os.geteuid() and _reachable_by_others(path):
            found.append(path)
    return found
