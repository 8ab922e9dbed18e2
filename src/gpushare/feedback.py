"""A failure as data: what a check expected, found and where, until an output writes it.

This is the one model of feedback. A check raises :class:`CheckFailed`; its :class:`Failure`
travels as data through the grade (``CheckResult.failure``), into results.json (the test's
``extra_data.feedback``) and back out of it for a class report, and each output says it in the
learner's language only when it writes (``gpushare.reports.messages.render``). So the language
is applied once, a class groups failures by their problem key rather than by parsing prose, and
a failure that follows from another one (the same ``cause``) can point to it instead of
repeating the diagnosis: which one came first is known only once every check has run.

It sits below every room (grading raises it, reports render it, submissions and classroom say
their own values with :class:`T`), and imports nothing of the package but :mod:`gpushare.data`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpushare.data import Json, JsonObject


@dataclass(init=False)
class T:
    """A translatable value: a catalog key under ``[values]`` and its parameters.

    Checks and readers of learners' files say what they found as these, never as prose; the
    catalogs turn them into the learner's language.
    """

    key: str
    params: dict[str, object]

    def __init__(self, key: str, /, **params: object) -> None:
        self.key = key
        self.params = params


# What a failure says it expected, found and where: text, a number, a translatable value, or a
# sequence of them (a tuple enumerates names, a list strings clauses: messages.render_value).
# Sequence, not list: list is invariant, and a list[T] must be a Value too.
Value = str | int | T | Sequence["Value"] | None

# The cause of every failure of a learner's file when the work dir itself is missing: the
# report says that once, first, with how to name another (``--workdir``, ``WORKDIR=``)
WORKDIR_ABSENT = "workdir:absent"

# What a failure is, besides the learner's own mistake (kind ""): the grader could not read the
# cluster ("cluster"), the time limit struck first ("timeout"), a bug of ours ("grader").
GRADER_SIDE = ("cluster", "timeout", "grader")

# The reasons a grade could not be taken (or finished) that are not the learner's doing: a
# cluster the grader could not read, a grade that crashed, was killed, hung or ran out of time,
# a snapshot the grader refused (``snapshot_*``: a file repacked by hand far more often than an
# attack). Each is said with the catalogs' ``grader_side`` sentence: whom to tell, and that it
# is not the learner's mistake.
GRADER_SIDE_REASONS = frozenset(
    {
        "could_not_read",
        "could_not_read_cluster",
        "time_limit",
        "time_limit_during",
        "grade_hung",
        "grade_killed",
        "grade_exited",
        "grade_crashed",
    }
)


def grader_side(reason: object) -> bool:
    """Whether a could-not-grade reason (a :class:`T`) is the grader's side, not the learner's."""
    return isinstance(reason, T) and (
        reason.key in GRADER_SIDE_REASONS or reason.key.startswith("snapshot_")
    )


@dataclass(kw_only=True)
class Failure:
    """One check's failure: the pieces of the learner's feedback, not the prose.

    ``hint``: this finding's own hint, in place of the check's (whose one static hint would
    mislead for what was found: a syntax error, a cordoned node). ``cause``: a short stable key
    of the root condition this failure follows from (``config:shared:refused``); in one grade
    the first failure with it is told in full and later ones point to it. ``kind``: whose side
    the failure is on (see :data:`GRADER_SIDE`); ``check_hint``: whether the check's own hint
    applies at all (not to a grader's bug).
    """

    problem: T | None = None
    expected: Value = None
    found: Value = None
    where: Value = None
    hint: T | None = None
    cause: str | None = None
    kind: str = ""
    check_hint: bool = True

    @property
    def problem_key(self) -> str | None:
        """What a class groups this failure by: the problem's catalog key."""
        return self.problem.key if self.problem is not None else None

    def as_data(self) -> JsonObject:
        """JSON data (results.json keeps it), read back by :meth:`from_data`."""
        out: JsonObject = {}
        for name in ("problem", "expected", "found", "where", "hint"):
            value = getattr(self, name)
            if value is not None:
                out[name] = to_data(value)
        if self.cause:
            out["cause"] = self.cause
        if self.kind:
            out["kind"] = self.kind
        if not self.check_hint:
            out["check_hint"] = False
        return out

    @classmethod
    def from_data(cls, data: Json) -> Failure | None:
        """The inverse of :meth:`as_data`; None for anything that is not such data (a stranger's
        results.json, or one written before it held a failure's data)."""
        if not isinstance(data, dict):
            return None

        def value(name: str) -> Value:
            return from_data(data.get(name))  # type: ignore[return-value]  # Json -> Value

        def translatable(name: str) -> T | None:
            read = from_data(data.get(name))
            return read if isinstance(read, T) else None

        cause, kind = data.get("cause"), data.get("kind")
        return cls(
            problem=translatable("problem"),
            expected=value("expected"),
            found=value("found"),
            where=value("where"),
            hint=translatable("hint"),
            cause=cause if isinstance(cause, str) else None,
            kind=kind if isinstance(kind, str) and kind in GRADER_SIDE else "",
            check_hint=data.get("check_hint") is not False,
        )


def as_hint(hint: T | str | None, values: dict[str, object]) -> T | None:
    """``fail(hint=KEY, **values)``'s hint as a value: a key and its values, or a T as it is."""
    if hint is None or isinstance(hint, T):
        return hint
    return T(hint, **values)


class CheckFailed(AssertionError):
    """Raised by a check; carries the learner's feedback as a :class:`Failure`, not as prose."""

    def __init__(
        self,
        *,
        expected: Value = None,
        found: Value = None,
        where: Value = None,
        problem: T | None = None,
        hint: T | str | None = None,
        cause: str | None = None,
        **hint_values: object,
    ) -> None:
        super().__init__(problem.key if problem else "check failed")
        self.failure = Failure(
            problem=problem,
            expected=expected,
            found=found,
            where=where,
            hint=as_hint(hint, hint_values),
            cause=cause,
        )

    # the fields, read and written through: a test asks ``exc.problem.key`` as a check wrote
    # it, and a lab's helper may say more of where (``exc.where = ...``) before it re-raises
    @property
    def problem(self) -> T | None:
        return self.failure.problem

    @problem.setter
    def problem(self, value: T | None) -> None:
        self.failure.problem = value

    @property
    def expected(self) -> Value:
        return self.failure.expected

    @expected.setter
    def expected(self, value: Value) -> None:
        self.failure.expected = value

    @property
    def found(self) -> Value:
        return self.failure.found

    @found.setter
    def found(self, value: Value) -> None:
        self.failure.found = value

    @property
    def where(self) -> Value:
        return self.failure.where

    @where.setter
    def where(self, value: Value) -> None:
        self.failure.where = value

    @property
    def hint(self) -> T | None:
        return self.failure.hint

    @hint.setter
    def hint(self, value: T | None) -> None:
        self.failure.hint = value

    @property
    def cause(self) -> str | None:
        return self.failure.cause

    @cause.setter
    def cause(self, value: str | None) -> None:
        self.failure.cause = value


def to_data(value: object) -> Json:
    """A translatable value as JSON data (``{"key": ..., "params": {...}}``), so a reason kept in
    a results.json can be said again later in another language (a class report's). A tuple
    (names) is a JSON list; a list (clauses) is ``{"clauses": [...]}``, so it reads back as one.
    """
    if isinstance(value, T):
        return {"key": value.key, "params": {k: to_data(v) for k, v in value.params.items()}}
    if isinstance(value, list):
        return {"clauses": [to_data(v) for v in value]}
    if isinstance(value, tuple):
        return [to_data(v) for v in value]
    return value if isinstance(value, str | int | float) or value is None else str(value)


def from_data(data: Json) -> object:
    """The inverse of :func:`to_data`; anything else read back (a file is a stranger's) is text,
    and a key no catalog knows shows as itself rather than failing a report."""
    if isinstance(data, dict) and isinstance(data.get("key"), str):
        params = data.get("params")
        params = params if isinstance(params, dict) else {}
        return T(data["key"], **{str(k): from_data(v) for k, v in params.items()})
    if isinstance(data, dict) and isinstance(data.get("clauses"), list) and len(data) == 1:
        return [from_data(v) for v in data["clauses"]]
    if isinstance(data, list):
        return tuple(from_data(v) for v in data)
    return data if isinstance(data, str | int | float) or data is None else str(data)
