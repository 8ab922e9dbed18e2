"""The bounds of a process that grades a stranger's snapshot: its memory, and a hard deadline.

The learner's script has the sandbox's caps, but unpacking, parsing and every check run in the
grader itself, on inputs bounded before parsing (:mod:`gpushare.submissions.bounded`). These
are the backstop for whatever a bound missed: a soft ``RLIMIT_DATA`` (heap, anonymous mappings,
thread stacks; Linux 4.7+), so an allocation past it is a MemoryError in that grade, not the
machine's memory gone (the reference snapshot's grade uses some 50 MiB); and a SIGALRM
:data:`GRACE` seconds past ``--timeout`` that ends the process whatever its Python code does
(the class pool kills its workers by pid then too).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
from collections.abc import Iterator

from gpushare.reports.clean import line

MIB = 1024 * 1024
MEMORY_CAP = 1024 * MIB
SNAPSHOT_TIMEOUT = 60.0  # as class grade's default
GRACE = 15.0
EXIT_ERROR = 2


def memory_cap() -> int:
    """:data:`MEMORY_CAP`, or ``$GPUSHARE_GRADE_MEMORY_MIB`` MiB when set (a whole number)."""
    value = os.environ.get("GPUSHARE_GRADE_MEMORY_MIB", "")
    return int(value) * MIB if value.isdigit() and int(value) > 0 else MEMORY_CAP


def _lower(limit: int | None) -> tuple[int, tuple[int, int]]:
    """Lower the soft ``RLIMIT_DATA`` to ``limit`` (default :func:`memory_cap`), never above
    the limits already in force; (the limit now, the limits before)."""
    limit = memory_cap() if limit is None else limit
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    for bound in (soft, hard):
        if bound != resource.RLIM_INFINITY:
            limit = min(limit, bound)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return limit, (soft, hard)


@contextlib.contextmanager
def capped_memory(limit: int | None = None) -> Iterator[int]:
    """The memory cap for the block, then the limits as they were (``run_autograder`` and
    tests grade in-process); gives the cap in force."""
    value, before = _lower(limit)
    try:
        yield value
    finally:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_DATA, before)


def cap_memory(limit: int | None = None) -> int:
    """The memory cap for good (a worker process that only grades); the cap in force."""
    return _lower(limit)[0]


@contextlib.contextmanager
def hard_deadline(seconds: float, what: str) -> Iterator[None]:
    """End the process (exit 2, one line on stderr saying ``what``) if the block is still
    running after ``seconds``; the previous SIGALRM handler is put back after it."""
    said = line(f"gpushare: could not grade: {what} ran past {seconds:g} s; ended") + "\n"

    def strike(_signum: int, _frame: object) -> None:
        sys.stderr.write(said)
        sys.stderr.flush()
        os._exit(EXIT_ERROR)

    previous = signal.signal(signal.SIGALRM, strike)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is the memory cap striking: a failed allocation, or a thread whose
    stack could not be mapped (thread stacks count in RLIMIT_DATA)."""
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and "can't start new thread" in str(exc)
    )


def memory_message() -> str:
    """One line for a grade that hit the memory cap."""
    return (
        f"the grade needed more than {memory_cap() // MIB} MiB of memory (a snapshot's grade cap)"
    )
