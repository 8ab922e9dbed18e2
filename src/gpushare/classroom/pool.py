"""Worker processes that each grade many submissions, and a time limit none of them can break.

Why not ``concurrent.futures``: in a ``ProcessPoolExecutor`` a worker that dies (a segfault,
the OOM killer, a grade stuck in C code) breaks the whole pool and every pending future with
it. Here each worker is a forked child with a pipe of its own; the parent hands it one task at
a time and watches its pipe, its exit and a hard deadline per task. A worker that dies, or
runs past the deadline (then it is SIGKILLed by pid, and the learner's runs it started end
with it: their supervisor dies with its grader), loses only its task, which becomes an error
result; a fresh worker takes its place and the others never notice.

Workers are forked from the parent, which starts no thread, so forking it is safe; a worker
imports what its first grade needs that the parent had not, once in its life.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Generic, TypeVar

Task = TypeVar("Task")
Result = TypeVar("Result")
HUNG, DIED = "hung", "died"  # why a task ended without a result


class _Worker(Generic[Task, Result]):
    def __init__(
        self, work: Callable[[Task], tuple[Result, bool]], init: Callable[[], None] | None
    ) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, work, init), daemon=True)
        self.proc.start()
        child.close()
        self.task: tuple[int, Task] | None = None
        self.deadline = 0.0
        self.started = 0.0

    def give(self, index: int, task: Task, limit: float) -> None:
        self.task = (index, task)
        self.started = time.monotonic()
        self.deadline = self.started + limit
        self.conn.send((index, task))

    def end(self) -> None:
        """Kill (by pid) and reap; the pipe is closed."""
        if self.proc.is_alive() and self.proc.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join()
        self.conn.close()

    def stop(self) -> None:
        """Ask an idle worker to leave, then reap it."""
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.proc.join(5)
        self.end()


def _serve(
    conn: Connection[tuple[int, Result, bool], tuple[int, Task] | None],
    work: Callable[[Task], tuple[Result, bool]],
    init: Callable[[], None] | None,
) -> None:
    """The worker's loop: one task at a time until told to stop or asked to retire."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if init is not None:
        init()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        index, task = message
        result, retire = work(task)
        conn.send((index, result, retire))
        if retire:
            break
    conn.close()
    os._exit(0)  # no interpreter teardown in a forked child (the parent's atexit is not ours)


def run(
    tasks: list[Task],
    work: Callable[[Task], tuple[Result, bool]],
    *,
    jobs: int,
    limit: float,
    on_result: Callable[[int, Result, float], None],
    on_failure: Callable[[int, str, str, float], None],
    init: Callable[[], None] | None = None,
) -> None:
    """Run ``work`` over ``tasks`` in ``jobs`` worker processes. ``work(task)`` returns
    (result, retire): ``retire`` asks for a fresh worker after this task.

    ``on_result(index, result, seconds)`` for each task that finished;
    ``on_failure(index, kind, why, seconds)`` for each whose worker died (kind :data:`DIED`)
    or ran past ``limit`` seconds (kind :data:`HUNG`). Both are called in this process, one
    at a time, as tasks end.
    """
    pending = deque(enumerate(tasks))
    workers: list[_Worker[Task, Result]] = []

    def staff() -> None:
        """Start workers up to ``jobs`` for what waits, and give each idle one a task."""
        idle = sum(1 for w in workers if w.task is None)
        while idle < len(pending) and len(workers) < jobs:
            workers.append(_Worker(work, init))
            idle += 1
        for w in workers:
            if w.task is None and pending:
                index, task = pending.popleft()
                try:
                    w.give(index, task, limit)
                except OSError:  # it died idle: replace it, the task waits
                    pending.appendleft((index, task))
                    w.end()
                    workers.remove(w)
                    return

    def settle(busy: list[tuple[_Worker[Task, Result], int]], ready: Sequence[object]) -> None:
        """Each busy worker that answered, died or ran past its deadline: its task's end said."""
        now = time.monotonic()
        for w, index in busy:
            seconds = now - w.started
            if w.conn in ready or w.conn.poll():
                try:
                    got, result, retire = w.conn.recv()
                except (EOFError, OSError):
                    got = None
                if got == index:
                    w.task = None
                    if retire:  # it leaves after this task: reap it, a fresh one follows
                        w.proc.join(5)
                        w.end()
                        workers.remove(w)
                    on_result(index, result, seconds)
                    continue
            if w.proc.sentinel in ready or not w.proc.is_alive():
                w.end()
                workers.remove(w)
                on_failure(index, DIED, _death(w.proc.exitcode), seconds)
            elif now >= w.deadline:
                w.end()
                workers.remove(w)
                why = f"the grade ran past the hard limit of {limit:g} s"
                on_failure(index, HUNG, why, seconds)

    try:
        while pending or any(w.task for w in workers):
            staff()
            busy = [(w, w.task[0]) for w in workers if w.task is not None]
            if not busy:
                continue
            now = time.monotonic()
            timeout = max(0.0, min(w.deadline for w, _ in busy) - now)
            ready = wait([w.conn for w, _ in busy] + [w.proc.sentinel for w, _ in busy], timeout)
            settle(busy, ready)
            for w in [w for w in workers if w.task is None and not w.proc.is_alive()]:
                w.end()  # died idle
                workers.remove(w)
    finally:
        for w in workers:
            if w.task is None:
                w.stop()
            else:
                w.end()


def _death(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the grading process was killed ({name})"
    return f"the grading process ended unexpectedly (exit status {code})"
