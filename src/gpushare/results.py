"""Scores and the Gradescope-style results.json.

One check is one scored, numbered result wherever it appears: the terminal table, the JSON
file and the JUnit XML are all made from the same :class:`Report`.
"""

from __future__ import annotations

import json
import os

from gpushare import __version__, versions
from gpushare.records import Record

TYPE_CHECKING = False  # not ``typing``: see gpushare.records
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


def number_key(number: str) -> tuple[int, ...]:
    return tuple(int(p) for p in number.split(".") if p.isdigit())


class CheckResult(Record):
    """One check's scored result, as every report shows it."""

    __slots__ = (
        "error",
        "max_score",
        "nodeid",
        "number",
        "output",
        "passed",
        "score",
        "step",
        "title",
    )

    def __init__(
        self,
        *,
        number: str,
        step: int,
        title: str,
        max_score: int,
        score: int,
        passed: bool,
        output: str,
        error: bool,
        nodeid: str,
    ) -> None:
        self.number, self.step, self.title = number, step, title
        self.max_score, self.score, self.passed = max_score, score, passed
        self.output, self.error, self.nodeid = output, error, nodeid

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


class Report(Record):
    """Every check of one grade, and what a regrade needs."""

    __slots__ = ("checks", "execution_time", "lang", "seed", "server", "workdir")

    def __init__(
        self,
        *,
        checks: list[CheckResult],
        execution_time: float,
        lang: str,
        seed: int,
        workdir: str,
        server: str | None,
    ) -> None:
        self.checks, self.execution_time, self.lang = checks, execution_time, lang
        self.seed, self.workdir, self.server = seed, workdir, server

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
        import tempfile

        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(self.as_json(), fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
