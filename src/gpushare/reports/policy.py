"""The instructor's visibility policy: which checks learners see, when, and in how much detail.

A TOML file, per check or per step, with a default for the rest::

    [default]                 # optional; these are the defaults
    visibility = "visible"
    show_expected = true

    [steps.2]                 # every check of step 2 ...
    visibility = "after_due_date"

    [checks."2.3"]            # ... but this one never
    visibility = "hidden"

    [checks."5.4"]            # worth 5 points, not the 3 its grader gives it
    points = 5

``visibility`` takes Gradescope's four values: ``visible``, ``hidden`` (never shown to
learners), ``after_due_date``, ``after_published``. ``show_expected``: whether a failed check's
feedback shows what was expected and found. A check takes its own rule, else its step's, else
the default. ``points`` (a check's own table only) re-weights a check without editing the lab;
:func:`total` is the lab's total under the policy, which the instructor's commands state.

Withholding replaces the whole feedback, not just two lines of it: a failure's other fields
carry the same facts (a check on unseen cases names the failing case in its problem line,
describes it under "where", and shows under "found" the learner's output on it). So a withheld
feedback keeps none of them, in words or as data in results.json: a check that is not visible
says only that its details are not shown; a visible one with ``show_expected = false`` adds its
hint, which guides without giving the answer. A check that is not visible never shows expected
values (``show_expected = true`` there is refused): nbgrader #917 and #1363 are hidden tests
leaking through exactly that feedback.

:func:`apply` sets the policy on the :class:`~gpushare.reports.results.Report` before anything is
written; every output is made from that report, so all hold the same redactions and the same
honest wording ("all visible checks passed" while any check is not visible).
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gpushare.data import Json, JsonObject
from gpushare.reports import messages
from gpushare.reports.results import Report

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
_RULE_KEYS = {"visibility", "show_expected"}
_TOP_KEYS = {"default", "steps", "checks"}


class PolicyError(Exception):
    """The policy file cannot be used; one line saying where and why (exit 2)."""


@dataclass(init=False)
class Rule:
    """What learners see of one check."""

    show_expected: bool
    visibility: str

    def __init__(self, visibility: str = "visible", show_expected: bool | None = None) -> None:
        self.visibility = visibility
        # unset: shown only where the check itself is
        self.show_expected = visibility == "visible" if show_expected is None else show_expected


@dataclass(kw_only=True)
class Policy:
    """A parsed policy: a default rule, rules per step and per check, and where it came from."""

    default: Rule = field(default_factory=Rule)
    steps: dict[int, Rule] = field(default_factory=dict)
    checks: dict[str, Rule] = field(default_factory=dict)
    # a check's points, apart from its rule: points alone leave the check its step's visibility
    check_points: dict[str, int] = field(default_factory=dict)
    name: str = ""
    sha256: str = ""

    def rule(self, number: str) -> Rule:
        """The check's own rule, else its step's, else the default."""
        if number in self.checks:
            return self.checks[number]
        step = int(number.split(".")[0])
        return self.steps.get(step, self.default)

    def points(self, number: str, own: int) -> int:
        """The check's points: the policy's for it, else ``own`` (its grader's)."""
        return self.check_points.get(number, own)

    def describe(self) -> str:
        """``<file name> sha256:<12 hex>``: which policy, as the outputs record it."""
        return f"{self.name} sha256:{self.sha256[:12]}" if self.sha256 else self.name


def total(policy: Policy | None, lab: dict[str, int]) -> int:
    """The lab's total under ``policy``: ``lab`` maps every check number to its grader's points."""
    return sum(policy.points(n, p) if policy else p for n, p in lab.items())


def total_warning(policy: Policy | None, lab: dict[str, int]) -> str | None:
    """The instructor's warning when the checks no longer add up to 100 points, else None."""
    points = total(policy, lab)
    if points == 100:
        return None
    under = f" under the policy {policy.describe()}" if policy else ""
    return (
        f"gpushare: warning: the lab's checks add up to {points} points{under}, not 100; "
        "scores are out of that (grades.csv's max_score)"
    )


def known_checks() -> set[str]:
    """Every check number of the lab (the catalogs title each one; a test keeps them whole)."""
    return set(messages.catalog(messages.REFERENCE)["checks"])


def load(path: Path) -> Policy:
    """Read and check a policy file; PolicyError (one line) when it cannot be used."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PolicyError(f"cannot read the policy {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PolicyError(f"the policy {path} is not valid TOML: {exc}") from None
    return parse(data, name=path.name, sha256=hashlib.sha256(raw).hexdigest())


def parse(data: JsonObject, *, name: str = "policy", sha256: str = "") -> Policy:
    """A policy from TOML data. Unknown keys, steps and check numbers are refused: a typo
    such as ``[checks."6.50"]`` would otherwise leave the check it meant visible."""
    extra = set(data) - _TOP_KEYS
    if extra:
        raise PolicyError(f"{name}: unknown key {sorted(extra)[0]!r} (use default, steps, checks)")
    default = _rule(data.get("default", {}), f"{name} [default]")
    known = known_checks()
    lab_steps = sorted({number.split(".")[0] for number in known}, key=int)
    steps: dict[int, Rule] = {}
    for key, value in _table(data.get("steps", {}), f"{name} [steps]").items():
        if key not in lab_steps:
            raise PolicyError(
                f"{name}: [steps.{key}] is not a step of the lab ({', '.join(lab_steps)})"
            )
        steps[int(key)] = _rule(value, f"{name} [steps.{key}]")
    checks: dict[str, Rule] = {}
    points: dict[str, int] = {}
    for key, value in _table(data.get("checks", {}), f"{name} [checks]").items():
        if key not in known:
            raise PolicyError(f'{name}: [checks."{key}"] is not a check of the lab')
        where = f'{name} [checks."{key}"]'
        table = dict(_table(value, where))
        if "points" in table:
            points[key] = _points(table.pop("points"), where)
            if not table:  # points alone: the visibility stays the step's or the default's
                continue
        checks[key] = _rule(table, where)
    return Policy(
        default=default, steps=steps, checks=checks, check_points=points, name=name, sha256=sha256
    )


def _points(value: Json, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PolicyError(f"{where}: points must be a whole number, 0 or more")
    return value


def _table(value: Json, where: str) -> JsonObject:
    if not isinstance(value, dict):
        raise PolicyError(f"{where} must be a table")
    return value


def _rule(value: Json, where: str) -> Rule:
    table = _table(value, where)
    extra = set(table) - _RULE_KEYS
    if extra == {"points"}:
        raise PolicyError(f'{where}: points belong to one check ([checks."<step>.<n>"])')
    if extra:
        raise PolicyError(f"{where}: unknown key {sorted(extra)[0]!r} (visibility, show_expected)")
    visibility = table.get("visibility", "visible")
    if visibility not in VISIBILITIES:
        raise PolicyError(
            f"{where}: visibility {visibility!r} is not one of {', '.join(VISIBILITIES)}"
        )
    show = table.get("show_expected")
    if show is not None and not isinstance(show, bool):
        raise PolicyError(f"{where}: show_expected must be true or false")
    if show and visibility != "visible":
        raise PolicyError(
            f"{where}: a check that is not visible never shows expected values "
            "(drop show_expected, or make it visible)"
        )
    return Rule(visibility, show)


def apply(report: Report, policy: Policy | None) -> Report:
    """Set every check's visibility and withhold feedback as the policy says; the same report.
    Idempotent, so a caller may apply it whenever it holds a report; None changes nothing."""
    if policy is None:
        return report
    report.policy = policy.describe()
    for check in report.checks:
        points = policy.points(check.number, check.max_score)
        if points != check.max_score:
            check.max_score = points
            check.score = points if check.passed else 0
        rule = policy.rule(check.number)
        check.visibility = rule.visibility
        if rule.show_expected or (check.passed and check.failure is None and not check.output):
            continue
        check.withheld = True  # said as such by every output (Report.said)
    return report
