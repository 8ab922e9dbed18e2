"""The figures of ``make bench``, kept in one file and written as one table of docs/performance.md.

Each benchmark calls :func:`record` for what it measured; ``benchmarks/figures.json`` keeps
the latest value of every figure with its goal, the machine it ran on and the UTC date, so a
benchmark run alone updates its own rows and leaves the others. ``python benchmarks/figures.py``
(the last step of ``make bench``) writes the table between the markers of
``docs/performance.md``; the rest of that page is prose and is never touched. There is no
history here: the git log keeps that.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "benchmarks" / "figures.json"
PAGE = ROOT / "docs" / "performance.md"
BEGIN = "<!-- bench:begin (written by make bench: benchmarks/figures.py) -->"
END = "<!-- bench:end -->"
HEADER = "| figure | measured | goal | machine | date |\n|---|---|---|---|---|"


def machine() -> str:
    """The machine in a few words: cores, load average, the grader's Python."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0]
    return f"{cores} cores, load {load:.1f}, Python {platform.python_version()}"


def _load() -> dict[str, dict[str, str]]:
    return json.loads(STORE.read_text()) if STORE.exists() else {}


def record(key: str, figure: str, measured: str, goal: str = "") -> None:
    """Keep ``measured`` as the latest value of figure ``key`` (its order: first recorded)."""
    figures = _load()
    figures[key] = {
        "figure": figure,
        "measured": measured,
        "goal": goal,
        "machine": machine(),
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
    }
    STORE.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")


def table(figures: dict[str, dict[str, str]]) -> str:
    cells = ("figure", "measured", "goal", "machine", "date")
    rows = [
        "| " + " | ".join(f[c].replace("|", "\\|") for c in cells) + " |" for f in figures.values()
    ]
    return "\n".join([HEADER, *rows])


def write(page: Path = PAGE) -> None:
    """The table between the page's markers, from the store; the page must have both."""
    text = page.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{page}: no {BEGIN} ... {END} block to write the figures into")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{BEGIN}\n{table(_load())}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
    print(f"figures written into {PAGE.relative_to(ROOT)}")
