"""The instructor's visibility policy: which checks learners see, when, and in how much detail.

A TOML file, per check or per step, with a default for the rest::

    [default]                 # optional; these are the defaults
    visibility = "visible"
    show_expected = true

    [steps.2]                 # every check of step 2 ...
    visibility = "after_due_date"

    [checks."2.3"]            # ... but this one never
    visibility = "hidden"

``visibility`` takes Gradescope's four values: ``visible``, ``hidden`` (never shown to
learners), ``after_due_date``, ``after_published``. ``show_expected`` says whether a failed
check's feedback shows what was expected and what was found. A check takes its own rule, else
its step's, else the default.

Why withholding replaces the whole feedback and not just two lines of it: a failure's other
fields carry the same facts (a check on unseen cases names the case that failed first in its
problem line, describes it under "where", and shows under "found" the learner's output on it,
which may echo the case's own names). So a withheld feedback keeps none of them, neither in
its words nor as data in results.json: a check that is not visible says only that its details
are not shown; a visible check with ``show_expected = false`` says that, plus its hint, which
by the house rules guides without giving the answer. A check that is not visible can never
show expected values (``show_expected = true`` there is refused): nbgrader #917 and #1363 are
hidden tests leaking through exactly that feedback.

The policy is applied to the :class:`~gpushare.reports.results.Report` once, before anything is
written, by :func:`apply`; every output is made from that report, so results.json, the JUnit
XML, the terminal and the class report hold the same redactions and the same honest wording
("all visible checks passed" while any check is not visible, never "all passed").
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
    name: str = ""
    sha256: str = ""

    def rule(self, number: str) -> Rule:
        """The check's own rule, else its step's, else the default."""
        if number in self.checks:
            return self.checks[number]
        step = int(number.split(".")[0])
        return self.steps.get(step, self.default)

    def describe(self) -> str:
        """``<file name> sha256:<12 hex>``: which policy, as the outputs record it."""
        return f"{self.name} sha256:{self.sha256[:12]}" if self.sha256 else self.name


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
    for key, value in _table(data.get("checks", {}), f"{name} [checks]").items():
        if key not in known:
            raise PolicyError(f'{name}: [checks."{key}"] is not a check of the lab')
        checks[key] = _rule(value, f'{name} [checks."{key}"]')
    return Policy(default=default, steps=steps, checks=checks, name=name, sha256=sha256)


def _table(value: Json, where: str) -> JsonObject:
    if not isinstance(value, dict):
        raise PolicyError(f"{where} must be a table")
    return value


def _rule(value: Json, where: str) -> Rule:
    table = _table(value, where)
    extra = set(table) - _RULE_KEYS
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

    Idempotent, so a caller (``gpushare grade``, the class report, ``run_autograder``) may
    apply it whenever it holds a report; None leaves the report as it is (all visible).
    """
    if policy is None:
        return report
    report.policy = policy.describe()
    for check in report.checks:
        rule = policy.rule(check.number)
        check.visibility = rule.visibility
        if rule.show_expected or (check.passed and check.failure is None and not check.output):
            continue
        check.withheld = True  # said as such by every output (CheckResult.said)
    return report
