"""What a grader check is: a numbered function worth points that fails with structured feedback.

A check never builds prose: it raises :class:`CheckFailed` with what was expected, what was
found, where, and maybe a problem key, which the session renders in the learner's language
from the catalogs. So a failure reads the same in the terminal, the JSON and the JUnit XML, and
a test of ours asserts on the keys, not a translation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypedDict, TypeVar

from gpushare.feedback import WORKDIR_ABSENT as WORKDIR_ABSENT

# re-exported: graders write T(...), Value and CheckFailed from here (gpushare.feedback is the
# model itself)
from gpushare.feedback import CheckFailed as CheckFailed
from gpushare.feedback import T as T
from gpushare.feedback import Value as Value

P = ParamSpec("P")
R = TypeVar("R")


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
    hint: T | str | None = None,
    cause: str | None = None,
    **hint_values: object,
) -> NoReturn:
    """Fail the check. ``hint``: this finding's own hint, a catalog key of ``[values]`` with
    ``hint_values`` as its placeholders (or a :class:`T`), in place of the check's; ``cause``:
    the key of the root condition this failure follows from (see gpushare.feedback.Failure)."""
    raise CheckFailed(
        expected=expected,
        found=found,
        where=where,
        problem=problem,
        hint=hint,
        cause=cause,
        **hint_values,
    )
