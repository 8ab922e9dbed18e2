"""Resource caps of one untrusted run: memory, processes, CPU time, file size, by rlimits alone.

The learner's script may allocate without end, fork without end or spin; grading a class runs
many of them. The caps are rlimits, set in the script's process just before exec and inherited
by everything it starts, so they hold at every isolation level, with or without cgroups (which
a container or a non-root grader rarely has):

* ``RLIMIT_NPROC``: processes (threads included) of the run at once. The kernel counts them per
  uid, so this is the run's own count only where the run has a uid of its own: a dedicated uid
  (the ``uid`` level, and ``bubblewrap`` started by root), or the user namespace bubblewrap
  makes (a non-root grader: set inside the sandbox, see :mod:`gpushare.sandbox.isolation`).
* ``RLIMIT_DATA``: private writable memory of each process (heap, anonymous mappings: what a
  process really fills). With the process cap this bounds the memory of the whole run:
  ``data * processes`` (plus stacks and the sandbox's tmpfs), 2 GiB by default.
* ``RLIMIT_AS``: address space of each process, kept at 1 GiB: a Go program (``yq``,
  ``kubectl``) reserves some 600 MiB of address space it never fills, which DATA does not count.
* ``RLIMIT_CPU`` (seconds of CPU per process), ``RLIMIT_FSIZE`` (largest file), no core dumps.

Imported by the sandbox master, which may be a fresh ``python -I -S``: small stdlib modules only.
"""

from __future__ import annotations

import resource

MIB = 1024 * 1024


class Limits:
    """Caps of one run (see the module docstring); every run has :data:`DEFAULT_LIMITS`."""

    def __init__(
        self, *, address_space: int, data: int, processes: int, cpu_seconds: int, file_size: int
    ) -> None:
        self.address_space, self.data, self.processes = address_space, data, processes
        self.cpu_seconds, self.file_size = cpu_seconds, file_size


# Far above what the lab's script needs (bash, awk, or python3 with PyYAML: under 40 MiB of
# address space and a handful of processes), far below what would hurt a shared machine.
DEFAULT_LIMITS = Limits(
    address_space=1024 * MIB, data=128 * MIB, processes=16, cpu_seconds=10, file_size=64 * MIB
)


def apply_rlimits(*, processes: bool) -> None:
    """Set the caps of :data:`DEFAULT_LIMITS` in the calling process (the script's, just before
    exec). ``processes``: whether to set ``RLIMIT_NPROC`` here (only where the uid is the run's
    own)."""

    def cap(kind: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        _cur_soft, cur_hard = resource.getrlimit(kind)
        if cur_hard != resource.RLIM_INFINITY:  # never above what we were given ourselves
            soft, hard = min(soft, cur_hard), min(hard, cur_hard)
        resource.setrlimit(kind, (soft, hard))

    limits = DEFAULT_LIMITS
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_AS, limits.address_space)
    cap(resource.RLIMIT_DATA, limits.data)
    cap(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1)
    cap(resource.RLIMIT_FSIZE, limits.file_size)
    if processes:
        cap(resource.RLIMIT_NPROC, limits.processes)
