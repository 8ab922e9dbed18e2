"""A failure as data: what a check expected, found and where, until an output writes it.

The one model of feedback: a check raises :class:`CheckFailed`, its :class:`Failure` travels as
data through the grade and results.json (``extra_data.feedback``) into a class report, and each
output says it in the learner's language only when it writes (``messages.render``). So the
language is applied once, a class groups failures by problem key rather than by parsing prose,
and a failure that follows from another (the same ``cause``) can point to it: which came first
is known only once every check has run. It sits below every room and imports only
:mod:`gpushare.data`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast, overload

from gpushare.data import Json, JsonObject


@dataclass(init=False)
class T:
    """A translatable value: a catalog key under ``[values]`` and its parameters. Checks and
    readers of learners' files say what they found as these, never as prose."""

    key: str
    params: dict[str, object]

    def __init__(self, key: str, /, **params: object) -> None:
        self.key = key
        self.params = params


# What a failure says it expected, found and where: text, a number, a translatable value, or a
# sequence of them (a tuple enumerates names, a list strings clauses: messages.render_value).
# Sequence, not list: list is invariant, and a list[T] must be a Value too.
Value = str | int | T | Sequence["Value"] | None
V = TypeVar("V")

# The cause of every failure of a learner's file when the work dir itself is missing: the
# report says that once, first, with how to name another (``--workdir``, ``WORKDIR=``)
WORKDIR_ABSENT = "workdir:absent"

# What a failure is, besides the learner's own mistake (kind ""): the grader could not read the
# cluster ("cluster"), the time limit struck first ("timeout"), a bug of ours ("grader").
GRADER_SIDE = ("cluster", "timeout", "grader")

# Why a grade could not be taken (or finished) when it is not the learner's doing; also any
# refused snapshot (``snapshot_*``: a file repacked by hand far more often than an attack). Each
# is said with the catalogs' ``grader_side`` sentence: whom to tell, not the learner's mistake.
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


class _Through(Generic[V]):
    """A field of the :class:`Failure`, read and written through the exception that carries it:
    a test asks ``exc.problem.key`` as a check wrote it, and a lab's helper may say more of where
    (``exc.where = ...``) before it re-raises."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, exc: None, owner: type) -> _Through[V]: ...
    @overload
    def __get__(self, exc: CheckFailed, owner: type) -> V: ...
    def __get__(self, exc: CheckFailed | None, owner: type) -> _Through[V] | V:
        return self if exc is None else cast(V, getattr(exc.failure, self.name))

    def __set__(self, exc: CheckFailed, value: V) -> None:
        setattr(exc.failure, self.name, value)


class CheckFailed(AssertionError):
    """Raised by a check; carries the learner's feedback as a :class:`Failure`, not as prose."""

    problem: _Through[T | None] = _Through()
    expected: _Through[Value] = _Through()
    found: _Through[Value] = _Through()
    where: _Through[Value] = _Through()
    hint: _Through[T | None] = _Through()
    cause: _Through[str | None] = _Through()

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
            hint=hint if hint is None or isinstance(hint, T) else T(hint, **hint_values),
            cause=cause,
        )


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
