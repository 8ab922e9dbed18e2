"""What a grader check is: a numbered function worth points that fails with structured feedback.

Checks are collected by pytest (``pytest graders/``) and called directly by ``gpushare
grade``. A check never builds prose itself. It raises :class:`CheckFailed` with what was
expected, what was found, where, and optionally a problem key; the grading session renders
that in the learner's language from the message catalogs. So the same failure reads the same in the
terminal, the JSON file and the JUnit XML, and a test of ours can assert on the keys rather
than on a translation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NoReturn, ParamSpec, TypedDict, TypeVar

from gpushare.reports.messages import T as T  # re-exported: graders write T(...) too
from gpushare.submissions.workdir import WORKDIR_ABSENT as WORKDIR_ABSENT  # re-exported

P = ParamSpec("P")
R = TypeVar("R")


# What a failure says it expected, found and where: text, a number, a translatable value, or a
# sequence of them (a tuple enumerates names, a list strings clauses: messages.render_value).
# Sequence, not list: list is invariant, and a list[T] must be a Value too.
Value = str | int | T | Sequence["Value"] | None


class CheckFailed(AssertionError):
    """Raised by a check; carries the pieces of the learner's feedback, not the prose."""

    def __init__(
        self,
        *,
        expected: Value = None,
        found: Value = None,
        where: Value = None,
        problem: T | None = None,
        hint: T | None = None,
        cause: str | None = None,
    ) -> None:
        super().__init__(problem.key if problem else "check failed")
        self.expected = expected
        self.found = found
        self.where = where
        self.problem = problem
        self.hint = hint  # in place of the check's own hint, where that one would mislead
        # a short stable key of the root condition this failure follows from
        # ("config:shared:refused"): the first failure with it is told in full, later ones
        # point to it
        self.cause = cause


class CheckMeta(TypedDict):
    """What ``@check`` marks a function with (its ``gpushare_check`` attribute)."""

    number: str
    points: int
    step: int


def check(number: str, points: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a grader function as check ``number`` (``"<step>.<n>"``) worth ``points``.

    Title and hint live in the catalogs under ``[checks."<number>"]``. The mark is a plain
    attribute, not a pytest marker, so ``gpushare grade`` can run the graders without
    importing pytest at all; the pytest plugin reads the same attribute.
    """
    meta = CheckMeta(number=number, points=points, step=int(number.split(".")[0]))

    def deco(fn: Callable[P, R]) -> Callable[P, R]:
        fn.gpushare_check = meta  # type: ignore[attr-defined]  # an attribute, as said above
        return fn

    return deco


def fail(
    *,
    expected: Value = None,
    found: Value = None,
    where: Value = None,
    problem: T | None = None,
    hint: T | None = None,
    cause: str | None = None,
) -> NoReturn:
    raise CheckFailed(
        expected=expected, found=found, where=where, problem=problem, hint=hint, cause=cause
    )
