"""Progress of a class grade: a bar with the rate and an ETA on a terminal, plain lines
otherwise (a CI log or a Job's pod log keeps every line, and a bar would be noise there)."""

from __future__ import annotations

import sys
import time

from gpushare.reports.clean import line


class Progress:
    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.stream = sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self.last_draw = 0.0

    def update(self, learner: str, status: str, score: int | None, seconds: float) -> None:
        """One submission finished."""
        learner = line(learner)  # a learner's name may be anything: never an escape here
        self.done += 1
        elapsed = time.monotonic() - self.started
        if not self.tty:
            shown = score if score is not None else "-"
            print(
                f"[{self.done}/{self.total}] {learner}: {status} {shown} ({seconds:.2f}s)",
                file=self.stream,
                flush=True,
            )
            return
        now = time.monotonic()
        if self.done < self.total and now - self.last_draw < 0.1:
            return  # redraw at most ten times a second
        self.last_draw = now
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(
            f"\r\x1b[K[{bar}] {self.done}/{self.total} {rate:.1f}/s "
            f"ETA {round(eta) // 60}:{round(eta) % 60:02d}  {learner[:24]}"
        )
        if self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()
