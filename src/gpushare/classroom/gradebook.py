"""One row per submission, made from its ``results.json``; ``grades.csv`` made from rows.

Every output of a class grade (the CSV, the report, the regrade diff, a merge of shards) is
made from the per-learner ``results.json`` files through :func:`row_from_results` (in a run,
of the JSON parsed from the text just written: :func:`write_results`), never from anything
else a run kept in memory: a merge of shards therefore writes the very bytes of one unsharded
run, and ``--previous`` can read any earlier class folder.

A submission that could not be graded (a bad snapshot, a grade past its time limit, a grading
process that died) gets a results.json too, made by :func:`error_results` in the shape of a
grade that could not be taken: no score at all, every check an error saying why. Its CSV row
has status ``error`` and empty score cells, so a gradebook import records no zero for it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpushare.classroom import texts
from gpushare.data import JsonObject
from gpushare.feedback import Failure, T, grader_side
from gpushare.grading import runner
from gpushare.locations import graders_dir
from gpushare.reports import clean, messages
from gpushare.reports.policy import Policy
from gpushare.reports.results import CheckResult, Report, number_key

CSV_NAME = "grades.csv"
# a test's flag in results.json -> the error of its cell, the first that is set
_ERRORS = (("timed_out", "timeout"), ("could_not_grade", "cluster"), ("grader_error", "grader"))


@dataclass(frozen=True)
class CheckInfo:
    """One check of the graders: its number, step and points."""

    number: str
    step: int
    max_score: int
    nodeid: str = ""
    classname: str = ""


@dataclass
class Cell:
    """One check of one submission."""

    number: str
    step: int
    max_score: int
    score: int | None  # None: not judged (an error)
    passed: bool
    error: str  # "" the learner's own result; "cluster", "grader", "timeout": not a result
    output: str
    visibility: str = "visible"  # the policy's word for learners (reports.policy.VISIBILITIES)
    # the failure as data (results.json's extra_data.feedback; None in a file written before
    # it held one), and the check it follows from (the same cause), if any
    failure: Failure | None = None
    follows: str = ""

    @property
    def state(self) -> str:
        """passed, failed or error: what a regrade compares."""
        if self.error:
            return "error"
        return "passed" if self.passed else "failed"


@dataclass
class Row:
    """One graded (or ungradable) submission."""

    learner: str  # the folder name under the class folder: the learner's (a row apart: whole)
    snapshot: str  # the snapshot's file name
    status: str  # passed, failed, error
    score: int | None  # None for an error row
    max_score: int
    reason: str  # why there is no grade ("" for a grade)
    seed: int | None
    cells: dict[str, Cell] = field(default_factory=dict)
    folder: str = ""  # relative to the class folder
    lang: str = ""  # of the feedback
    digest: str = ""  # the snapshot's content hash, when it was graded (the seed derives from it)
    why: str = ""  # the sort of reason of an error row (classroom.texts ``why_*``), or ""
    detail: object = None  # the reason as a translatable value (messages.T), when it has one
    submission: JsonObject = field(default_factory=dict)  # whose, from where (inputs)
    flags: dict[str, str] = field(default_factory=dict)  # suspicion flag -> detail (flags.py)
    isolation: str = ""  # the level the learner's script ran at (gpushare.sandbox.levels)

    def step_scores(self) -> dict[int, int | None]:
        """step -> points, None when a check of the step was not judged."""
        out: dict[int, int | None] = {}
        for cell in self.cells.values():
            held = out.get(cell.step, 0)
            out[cell.step] = None if held is None or cell.score is None else held + cell.score
        return out


def catalog(policy: Policy | None = None) -> list[CheckInfo]:
    """Every check of the graders, in number order (the CSV's columns), worth the points the
    instructor's ``policy`` gives it, else its grader's."""
    return [
        CheckInfo(
            c.meta["number"],
            c.meta["step"],
            policy.points(c.meta["number"], c.meta["points"]) if policy else c.meta["points"],
            c.nodeid,
            c.classname,
        )
        for c in runner.load_checks(graders_dir())
    ]


def with_points(checks: list[CheckInfo], rows: list[Row]) -> list[CheckInfo]:
    """``checks`` worth what the graded rows say each was worth (a policy's points, which a
    merge of shards knows only from their results)."""
    worth: dict[str, int] = {}
    for row in rows:
        for number, cell in row.cells.items():
            if row.status != "error" or cell.score is not None:
                worth.setdefault(number, cell.max_score)
    return [dataclasses.replace(c, max_score=worth.get(c.number, c.max_score)) for c in checks]


def total_line(checks: list[CheckInfo], lang: str) -> str:
    """The points possible, always said; with a warning when they are not 100 (a policy's
    points, a check added to the lab): scores are then out of that total."""
    points = sum(c.max_score for c in checks)
    said = texts.text("points_total", lang, points=points)
    return said if points == 100 else f"{said} {texts.text('points_not_100', lang, points=points)}"


def row_from_results(folder: str, results: JsonObject) -> Row:
    """A row from a results.json as ``gpushare grade`` (or :func:`error_results`) wrote it."""
    extra = results.get("extra_data") or {}
    graded = extra.get("cluster") or {}
    snapshot = Path(str(graded.get("snapshot") or "")).name
    cells: dict[str, Cell] = {}
    for test in results.get("tests") or []:
        flags = test.get("extra_data") or {}
        error = next((kind for key, kind in _ERRORS if flags.get(key)), "")
        number = str(test.get("number"))
        score = test.get("score")
        data = flags.get("feedback")
        follows = data.get("follows") if isinstance(data, dict) else None
        cells[number] = Cell(
            number=number,
            step=int(flags.get("step") or number.split(".")[0]),
            max_score=int(test.get("max_score") or 0),
            score=None if error or score is None else int(score),
            passed=test.get("status") == "passed",
            error=error,
            output=str(test.get("output") or ""),
            visibility=str(test.get("visibility") or "visible"),
            failure=Failure.from_data(data),
            follows=follows if isinstance(follows, str) else "",
        )
    status = "passed" if all(c.passed for c in cells.values()) else "failed"
    if extra.get("complete", True) is False:
        status = "error"
    score = results.get("score")
    held = extra.get("submission")  # whose, from where, as the class run recorded it (inputs)
    submission = dict(held) if isinstance(held, dict) else {}
    return Row(
        # a file that only its manifest gives to a learner whom another file is given to:
        # its own name, so no gradebook import takes it for that learner's grade
        learner=folder if submission.get("apart") else folder.split("/")[0],
        snapshot=snapshot,
        status=status,
        score=int(score) if status != "error" and score is not None else None,
        max_score=int(results.get("max_score") or sum(c.max_score for c in cells.values())),
        reason=str(extra.get("could_not_grade") or "") if status == "error" else "",
        seed=extra.get("seed"),
        cells=dict(sorted(cells.items(), key=lambda kv: number_key(kv[0]))),
        folder=folder,
        lang=str(extra.get("lang") or ""),
        digest=str(graded.get("snapshot_sha256") or ""),
        why=_why(extra) if status == "error" else "",
        detail=_detail(extra) if status == "error" else None,
        submission=submission,
        isolation=str(extra.get("isolation") or ""),
    )


def _detail(extra: JsonObject) -> object:
    """The reason of an error row as a translatable value, or None when the results.json
    holds none (an options or grade error says one English line; an older gpushare wrote none)."""
    data = extra.get("could_not_grade_detail")
    return messages.from_data(data) if isinstance(data, dict) else None


def write_results(folder: Path, data: JsonObject, record: dict[str, object]) -> JsonObject:
    """Write ``folder/results.json``: ``data`` (a report's JSON) with ``record`` (whose the
    submission is, from where: :meth:`inputs.Submission.record`) as ``extra_data.submission``.
    Return the JSON as read back from the text written, as every later reader reads it."""
    data["extra_data"]["submission"] = record
    text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    write_text(folder / "results.json", text)
    written: JsonObject = json.loads(text)
    return written


def _why(extra: JsonObject) -> str:
    """The sort of reason of an error row: what the class recorded, or a grade's own deadline
    ("" for one we have no words for, e.g. from another gpushare)."""
    why = str(extra.get("could_not_grade_kind") or ("timeout" if extra.get("timed_out") else ""))
    return why if why and texts.has(f"why_{why}") else ""


def error_results(
    snapshot: Path,
    reason: str,
    kind: str,
    *,
    lang: str,
    seed: int | None,
    checks: list[CheckInfo],
    why: str = "",
    detail: object = None,
) -> Report:
    """A :class:`~gpushare.reports.results.Report` for a submission that could not be graded: every
    check an error of ``kind`` ("cluster" for a bad snapshot, "timeout", "grader") saying why,
    no score. Written with the same writers as a grade, so an LMS reads it the same way.

    ``why`` sorts ``reason`` (a bad snapshot's :attr:`SnapshotError.kind`, ``timeout``,
    ``died``); ``detail`` is ``reason`` as a translatable value, which the learner reads in
    their language (else the sort in their language and the English ``reason`` after it)."""
    said = texts.no_grade(detail, why, reason[:300], lang)
    text = texts.text("not_graded", lang, reason=said)
    if grader_side(detail):  # not the learner's doing: whom to tell
        text += "\n" + messages.render_value(T("grader_side"), lang)
    cells = [
        CheckResult(
            number=c.number,
            step=c.step,
            title=messages.title(c.number, lang),
            max_score=c.max_score,
            score=0,
            passed=False,
            output=text,
            error=kind,
            nodeid=c.nodeid or c.number,
        )
        for c in checks
    ]
    return Report(
        checks=cells,
        execution_time=0.0,
        lang=lang,
        seed=seed if seed is not None else 0,
        workdir="",
        server=None,
        cluster={"snapshot": str(snapshot)},
        could_not_grade=reason[:500] or "could not grade",
        could_not_grade_kind=why or None,
        could_not_grade_detail=detail,
    )


def load_rows(class_dir: Path, *, strict: bool = False) -> list[Row]:
    """Every row of a class folder, from ``<learner>/results.json`` (and, for a run with
    ``--all``, ``<learner>/<snapshot>/results.json``); ordered as the CSV orders them.

    ``strict`` (a merge): a results.json that cannot be read is a ValueError naming it, not a
    learner silently left out of the class (a shard written by another uid, a copy cut short).
    """
    rows = []
    for path in sorted(class_dir.glob("*/results.json")) + sorted(
        class_dir.glob("*/*/results.json")
    ):
        folder = path.parent.relative_to(class_dir).as_posix()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            if strict:
                raise ValueError(f"cannot read {path}: {exc}") from None
            continue
        if isinstance(data, dict):
            rows.append(row_from_results(folder, data))
        elif strict:
            raise ValueError(f"{path} is not a results.json (not a JSON object)")
    return ordered(rows)


def ordered(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.learner, r.snapshot, r.folder))


def columns(rows: list[Row], checks: list[CheckInfo]) -> tuple[list[int], list[str]]:
    """The steps and check numbers of the CSV: the graders' and any a row holds."""
    numbers = {c.number for c in checks} | {n for r in rows for n in r.cells}
    steps = {c.step for c in checks} | {c.step for r in rows for c in r.cells.values()}
    return sorted(steps), sorted(numbers, key=number_key)


def csv_text(rows: list[Row], checks: list[CheckInfo]) -> str:
    """grades.csv: learner, score, max_score (the points possible: the lab's, or the policy's),
    status, snapshot, flags, ``step N`` per step, one per check.

    Error rows have empty score cells; a check that was not judged (its grade timed out) is
    empty too, and so is its step. Rows in learner order; Unix newlines; UTF-8.
    """
    steps, numbers = columns(rows, checks)
    buf = io.StringIO()
    out = clean.csv_writer(buf, lineterminator="\n")  # learners' text: no control, no formula
    head = ["learner", "score", "max_score", "status", "snapshot", "flags"]
    out.writerow([*head, *[f"step {s}" for s in steps], *numbers])
    for row in ordered(rows):
        by_step = row.step_scores()
        graded = row.status != "error"
        out.writerow(
            [
                row.learner,
                _num(row.score if graded else None),
                str(row.max_score),
                row.status,
                row.snapshot,
                " ".join(flag_tokens(row.flags)),
                *[_num(by_step.get(s)) if row.cells else "" for s in steps],
                *[_num(row.cells[n].score) if n in row.cells else "" for n in numbers],
            ]
        )
    return buf.getvalue()


def flag_tokens(flags: dict[str, str]) -> list[str]:
    """A row's flags as grades.csv and the summary say them: the key, and for a flag shared by
    a group (its detail ``#N: ...``, classroom.flags) the group's number: ``same_cluster#2``."""
    return [key + (v.split(":", 1)[0] if v.startswith("#") else "") for key, v in flags.items()]


def _num(value: int | None) -> str:
    return "" if value is None else str(value)


def write_text(path: Path, text: str, *, private: bool = False) -> Path:
    """Write atomically: a spreadsheet, a browser or an LMS never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    if not private:  # mkstemp makes 0600; the class's files are for sharing, as any new file
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
    os.replace(tmp, path)
    return path
