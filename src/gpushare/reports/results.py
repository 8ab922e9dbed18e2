"""Scores and the Gradescope-style results.json.

One check is one scored, numbered result wherever it appears: the terminal table, the JSON
file and the JUnit XML are all made from the same :class:`Report`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from gpushare import __version__, versions
from gpushare.data import JsonObject
from gpushare.feedback import Failure, grader_side
from gpushare.reports import messages

# What a JUnit XML may say about what was graded, besides the grade's own properties: these
# keys of Report.cluster, in this order, and no other. A snapshot's manifest chooses the rest
# of that mapping (its ``cluster`` keys), and a key named ``score`` there once became a second
# ``score`` property that an LMS could read instead of the real one.
GRADED_PROPERTIES = (
    "snapshot",
    "snapshot_sha256",
    "learner",
    "captured_at",
    "kubeconfig",
    "kubeconfig_source",
    "context",
    "cluster",
    "server",
    "user",
    "uid",
    "runtime_learner",
    "runtime_grader",
    "runtime_note",
)


def number_key(number: str) -> tuple[int, ...]:
    return tuple(int(p) for p in number.split(".") if p.isdigit())


@dataclass
class CheckResult:
    """One check's scored result, as every report shows it."""

    _: KW_ONLY
    number: str
    step: int
    title: str
    max_score: int
    score: int
    passed: bool
    # what the check found, as data (gpushare.feedback): every output says it when it writes
    failure: Failure | None = None
    # "" (the learner's own result), "cluster" (the grader could not read the cluster: not a
    # result at all), "timeout" (the deadline struck first) or "grader" (a bug of ours)
    error: str
    nodeid: str
    # the feedback as prose, for a result made without a check's data (a class's submission
    # that could not be graded at all says why in words of its own)
    output: str = ""
    # set by the instructor's policy (gpushare.reports.policy.apply): Gradescope's four values,
    # and whether the feedback was reduced (then only the check's hint, where it is visible)
    visibility: str = "visible"
    withheld: bool = False

    def fail(self, failure: Failure, error: str) -> None:
        self.passed = False
        self.score = 0
        self.failure = failure
        self.error = self.error or error


@dataclass
class Report:
    """Every check of one grade, and what a regrade needs."""

    _: KW_ONLY
    checks: list[CheckResult]
    execution_time: float
    lang: str
    seed: int
    workdir: str
    server: str | None
    cluster: JsonObject | None = None  # what was graded: kubeconfig, context, server...
    could_not_grade: str | None = None  # why the cluster could not be read (voids the grade)
    could_not_grade_kind: str | None = None  # a class's sort of reason (e.g. a bad snapshot's)
    # the same reason as a translatable value (messages.T), said in the learner's language
    could_not_grade_detail: object = None
    timed_out: bool = False  # the deadline struck: finished checks keep their results
    policy: str | None = None
    isolation: str | None = None  # the learner's runs' level: bubblewrap, uid, none
    steps_not_graded: int = 0  # the lab's steps a `--step` left out
    workdir_absent: bool = False  # the work dir graded does not exist: said once, first

    def workdir_notice(self) -> str:
        """The one line a grade of a missing work dir starts with, or "": every file check fails
        for that reason alone, and the learner most likely named the wrong folder."""
        if not self.workdir_absent:
            return ""
        return messages.render_value(
            messages.T("workdir_absent_first", root=self.workdir), self.lang
        )

    @property
    def complete(self) -> bool:
        """Whether this is a grade at all: every check judged what it had to read."""
        return self.could_not_grade is None

    @property
    def score(self) -> int:
        return sum(c.score for c in self.checks)

    @property
    def max_score(self) -> int:
        return sum(c.max_score for c in self.checks)

    @property
    def all_passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def visible(self) -> list[CheckResult]:
        """The checks learners see now (the policy's ``visible`` ones)."""
        return [c for c in self.checks if c.visibility == "visible"]

    def not_visible(self) -> list[CheckResult]:
        """The checks learners do not see now: hidden, or shown only later."""
        return [c for c in self.checks if c.visibility != "visible"]

    def verdict(self) -> str:
        """The honest one-liner, or "" when some check learners see failed: while any check is
        not visible, at most "all visible checks passed" (otter-grader #138: learners told "All
        tests passed" while hidden tests failed)."""
        if self.not_visible():
            shown = self.visible()
            ok = bool(shown) and all(c.passed for c in shown)
            return messages.label("all_visible_passed", self.lang) if ok else ""
        if not self.all_passed:
            return ""
        if not self.steps_not_graded:
            return messages.label("all_passed", self.lang)
        # `--step`: "Step 1: all 5 checks passed (12/12); 7 steps not graded", so a grade of some
        # steps never reads as the whole lab done
        steps = sorted({c.step for c in self.checks})
        said = messages.T(
            "steps_passed" if len(steps) > 1 else "step_passed",
            steps=tuple(str(s) for s in steps),
            count=len(self.checks),
            figures=f"{self.score}/{self.max_score}",
            rest=(
                messages.T("steps_not_graded", count=self.steps_not_graded)
                if self.steps_not_graded > 1
                else messages.T("step_not_graded")
            ),
        )
        return messages.render_value(said, self.lang)

    def figures(self) -> str:
        """The score as learners may read it: the visible checks' alone while some are not
        visible (their points would tell how the hidden ones went), plus how many are not."""
        hidden = self.not_visible()
        if not hidden:
            return f"{self.score}/{self.max_score}"
        shown = self.visible()
        score, top = sum(c.score for c in shown), sum(c.max_score for c in shown)
        total = messages.labelled("visible_total", f"{score}/{top}", self.lang)
        more = messages.T("not_shown", count=len(hidden), points=sum(c.max_score for c in hidden))
        return f"{total}\n{messages.render_value(more, self.lang)}"

    def roots(self) -> dict[str, tuple[str, Failure]]:
        """cause -> (number, failure) of the first check, in number order, that failed with it:
        the one told in full; later failures with the same cause point to it."""
        out: dict[str, tuple[str, Failure]] = {}
        for c in self.checks:
            failure = c.failure
            # a check learners do not see in full is no root: pointing to it would tell
            shown = c.visibility == "visible" and not c.withheld
            if failure is not None and failure.cause and not c.passed and shown:
                out.setdefault(failure.cause, (c.number, failure))
        return out

    def root_of(self, check: CheckResult) -> tuple[str, Failure] | None:
        """The earlier check ``check`` follows from (same cause), or None: its own root."""
        cause = check.failure.cause if check.failure is not None else None
        root = self.roots().get(cause) if cause and not check.passed else None
        return root if root is not None and root[0] != check.number else None

    def said(self, check: CheckResult, lang: str | None = None) -> str:
        """``check``'s feedback in ``lang`` (the report's own by default): what every output of
        this report writes for it. A check that failed for the cause of an earlier one points
        to it rather than repeating its diagnosis (see messages.render)."""
        lang = lang or self.lang
        if check.passed and check.failure is None:
            return check.output
        if check.withheld:
            lines = [messages.render_value(messages.T("withheld"), lang)]
            hint = messages.hint(check.number, lang)
            if check.visibility == "visible" and hint:
                lines.append(messages.labelled("hint", hint, lang))
            return "\n".join(lines)
        if check.failure is None:
            return check.output
        return messages.render(check.number, check.failure, lang, root=self.root_of(check))

    def reason_said(self, lang: str | None = None) -> str:
        """Why the grade is void or incomplete, in ``lang`` (the report's own by default)."""
        if self.could_not_grade_detail is not None:
            return messages.render_value(self.could_not_grade_detail, lang or self.lang)
        return self.could_not_grade or ""

    def metadata(self) -> JsonObject:
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
            "cluster": self.cluster,
            "complete": self.complete,
            "could_not_grade": self.could_not_grade,
            **({"could_not_grade_kind": k} if (k := self.could_not_grade_kind) else {}),
            **(
                {"could_not_grade_detail": messages.to_data(d)}
                if (d := self.could_not_grade_detail) is not None
                else {}
            ),
            "timed_out": self.timed_out,
            "policy": self.policy,
            "isolation": self.isolation,
            **({"workdir_absent": True} if self.workdir_absent else {}),
        }

    def properties(self) -> dict[str, str]:
        """JUnit testsuite properties: no score at all when the grade could not be taken."""
        props = {
            "score": str(self.score) if self.complete or self.timed_out else "",
            "max_score": str(self.max_score),
            "complete": "true" if self.complete else "false",
            "seed": str(self.seed),
            "lang": self.lang,
            "isolation": self.isolation or "",
            "tool_version": __version__,
            "kwok_version": versions.KWOK,
            "kubernetes_version": versions.KUBERNETES,
            "etcd_version": versions.ETCD,
        }
        if self.could_not_grade:
            props["could_not_grade"] = self.could_not_grade
        props["verdict"] = self.verdict()
        if self.policy:  # what learners see: the same wording and figures as results.json
            props["policy"] = self.policy
            shown = self.visible()
            props["visible_score"] = str(sum(c.score for c in shown))
            props["visible_max_score"] = str(sum(c.max_score for c in shown))
            props["not_visible"] = " ".join(
                f"{c.number}:{c.visibility}" for c in self.not_visible()
            )
        graded = self.cluster or {}
        for key in GRADED_PROPERTIES:
            if graded.get(key) is not None and key not in props:
                props[key] = str(graded[key])
        return props

    def as_json(self) -> JsonObject:
        """Gradescope's results.json. A grade that could not be taken carries no ``score``
        (nor do its tests): an LMS must not record the checks that could not read as zeros."""
        verdict = self.verdict()
        out: JsonObject = {
            "score": self.score,
            "max_score": self.max_score,
            "execution_time": round(self.execution_time, 3),
            "output": "\n".join(filter(None, [self.workdir_notice(), self.figures(), verdict])),
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": [self._test(c) for c in self.checks],
            "extra_data": self.metadata(),
        }
        if self.timed_out:  # finished checks keep their scores: a partial grade, marked so
            out["output"] = messages.render_value(
                messages.T("report_incomplete", reason=self.reason_said(), figures=self.figures()),
                self.lang,
            )
        elif not self.complete:
            del out["score"]
            for test in out["tests"]:
                del test["score"]
            out["output"] = messages.render_value(
                messages.T("report_not_graded", reason=self.reason_said()), self.lang
            )
        # void or cut short for a reason not the learner's doing (a reason kept only as English
        # words, from an older gpushare or an option, is not known to be)
        if not self.complete and grader_side(self.could_not_grade_detail):
            out["output"] += "\n" + messages.render_value(messages.T("grader_side"), self.lang)
        return out

    def _test(self, check: CheckResult) -> JsonObject:
        """One entry of results.json's ``tests``: the failure's data under
        ``extra_data.feedback`` (never a withheld one's), with the check it follows from."""
        extra: JsonObject = {
            "step": check.step,
            "nodeid": check.nodeid,
            "withheld": check.withheld,
            "grader_error": check.error == "grader",
            "could_not_grade": check.error == "cluster",
            "timed_out": check.error == "timeout",
        }
        if check.failure is not None and not check.withheld:
            extra["feedback"] = check.failure.as_data()
            if root := self.root_of(check):
                extra["feedback"]["follows"] = root[0]
        return {
            "name": f"{check.number} {check.title}",
            "number": check.number,
            "score": check.score,
            "max_score": check.max_score,
            "status": "passed" if check.passed else "failed",
            "output": self.said(check),
            "visibility": check.visibility,
            "extra_data": extra,
        }

    def write_json(self, path: Path) -> None:
        write_atomic(
            path, (json.dumps(self.as_json(), ensure_ascii=False, indent=2) + "\n").encode()
        )


def write_atomic(path: Path, data: bytes) -> None:
    """Write atomically (a temporary file, 0600, then renamed): an LMS polling the file never
    reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
