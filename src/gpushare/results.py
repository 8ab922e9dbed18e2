"""Scores and the Gradescope-style results.json.

One check is one scored, numbered result wherever it appears: the terminal table, the JSON
file and the JUnit XML are all made from the same :class:`Report`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushare import __version__, versions


def number_key(number: str) -> tuple[int, ...]:
    return tuple(int(p) for p in number.split(".") if p.isdigit())


@dataclass
class CheckResult:
    number: str
    step: int
    title: str
    max_score: int
    score: int
    passed: bool
    output: str
    error: bool
    nodeid: str

    def fail(self, output: str, error: bool) -> None:
        self.passed = False
        self.score = 0
        self.output = output
        self.error = self.error or error

    def as_test(self) -> dict[str, Any]:
        return {
            "name": f"{self.number} {self.title}",
            "number": self.number,
            "score": self.score,
            "max_score": self.max_score,
            "status": "passed" if self.passed else "failed",
            "output": self.output,
            "visibility": "visible",
            "extra_data": {"step": self.step, "nodeid": self.nodeid, "grader_error": self.error},
        }


@dataclass
class Report:
    checks: list[CheckResult]
    execution_time: float
    lang: str
    seed: int
    workdir: str
    server: str | None

    @property
    def score(self) -> int:
        return sum(c.score for c in self.checks)

    @property
    def max_score(self) -> int:
        return sum(c.max_score for c in self.checks)

    @property
    def all_passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def steps(self) -> dict[int, tuple[int, int, bool]]:
        """step -> (score, max score, every check passed)."""
        out: dict[int, tuple[int, int, bool]] = {}
        for c in self.checks:
            s, m, ok = out.get(c.step, (0, 0, True))
            out[c.step] = (s + c.score, m + c.max_score, ok and c.passed)
        return out

    def metadata(self) -> dict[str, Any]:
        """What a regrade needs: tool and lab versions, the seed, the language."""
        return {
            "tool": "gpushare",
            "tool_version": __version__,
            "lab_versions": {
                "kwok": versions.KWOK,
                "kubernetes": versions.KUBERNETES,
                "etcd": versions.ETCD,
            },
            "seed": self.seed,
            "lang": self.lang,
            "workdir": self.workdir,
            "server": self.server,
        }

    def properties(self) -> dict[str, str]:
        meta = self.metadata()
        return {
            "score": str(self.score),
            "max_score": str(self.max_score),
            "seed": str(self.seed),
            "lang": self.lang,
            "tool_version": meta["tool_version"],
            "kwok_version": versions.KWOK,
            "kubernetes_version": versions.KUBERNETES,
            "etcd_version": versions.ETCD,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "max_score": self.max_score,
            "execution_time": round(self.execution_time, 3),
            "output": f"{self.score}/{self.max_score}",
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": [c.as_test() for c in self.checks],
            "extra_data": self.metadata(),
        }

    def write_json(self, path: Path) -> None:
        """Write atomically: an LMS polling the file never reads half of it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(self.as_json(), fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
