"""The pytest plugin behind ``pytest graders/``: ``gpushare grade``'s options and session
(:mod:`gpushare.grading.grade`), with pytest collecting and calling the checks.

Registered by the root ``conftest.py``, dormant unless grader checks (``@check``) are
collected, so the project's own tests never start a cluster; collection alone starts nothing.
The steps' background work becomes fixtures of its names; the fixture ``lab`` connects when the
first check that judges the cluster runs (unreachable: exit 2, one line; unreadable: each such
check an error, exit 2); feedback is the report's longrepr, with no traceback; ``--junitxml``
is gpushare's JUnit writer's file, the one ``gpushare grade`` writes, not pytest's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from pathlib import Path

import pytest

from gpushare.grading import background
from gpushare.grading.checks import CheckMeta
from gpushare.grading.errors import GradeError
from gpushare.grading.grade import OptionError, Outcome, add_options, open_session, options_from
from gpushare.grading.labstate import LabState
from gpushare.grading.session import GradeSession
from gpushare.reports import messages, terminal
from gpushare.reports.clean import line
from gpushare.reports.clean import text as shown
from gpushare.reports.results import number_key
from gpushare.submissions.snapshot import SnapshotError
from gpushare.submissions.workdir import Workdir

GRADE_KEY = pytest.StashKey[GradeSession]()
EXIT_KEY = pytest.StashKey[contextlib.ExitStack]()
JUNIT_KEY = pytest.StashKey[Path]()
DURATIONS_KEY = pytest.StashKey[dict[str, float]]()
PREFIX = "gpushare_"  # our options' names in pytest's namespace


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("gpushare", "gpushare grading").addoption, PREFIX)


@pytest.hookimpl(tryfirst=True)  # before pytest's junitxml plugin reads --junitxml
def pytest_configure(config: pytest.Config) -> None:
    if _targets_graders(config) and getattr(config.option, "xmlpath", None):
        # our JUnit writer, not pytest's: the same file as `gpushare grade --junitxml`
        config.stash[JUNIT_KEY] = Path(config.option.xmlpath)
        config.option.xmlpath = None
    config.stash[DURATIONS_KEY] = {}
    stack = contextlib.ExitStack()
    config.stash[EXIT_KEY] = stack
    try:
        options = options_from(config.option, PREFIX)
        try:  # this entry point chooses the language, as gpushare.cli does for its commands
            options.lang = messages.resolve_lang(options.lang)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        config.stash[GRADE_KEY] = stack.enter_context(open_session(options))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    except SnapshotError as exc:
        pytest.exit(f"gpushare: bad snapshot: {exc}", returncode=2)


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(EXIT_KEY, None)
    if stack is not None:
        stack.close()  # the session's background work ends, a snapshot's scratch goes


def _targets_graders(config: pytest.Config) -> bool:
    """Whether this run was asked for graders (a path argument in a ``graders`` folder)."""
    return any("graders" in Path(arg.split("::")[0]).resolve().parts for arg in config.args)


def check_meta(item: pytest.Item) -> CheckMeta | None:
    """The ``@check`` data of a collected item, or None for anything else."""
    meta: CheckMeta | None = getattr(getattr(item, "function", None), "gpushare_check", None)
    return meta


def _number(item: pytest.Item) -> str:
    """The check number of a collected item; anything else sorts after the checks."""
    meta = check_meta(item)
    return meta["number"] if meta else "999.999"


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> Generator[None, object, object]:
    """A step module's ``BACKGROUND`` work, offered to its checks as fixtures of those names."""
    collector = yield
    if isinstance(collector, pytest.Module):
        try:
            module = collector.obj
        except Exception:  # its own collection reports the error
            return collector
        for name in background.declared(module):
            setattr(module, f"_gpushare_background_{name}", _background_fixture(name))
    return collector


def _background_fixture(name: str) -> Callable[[GradeSession], object]:
    def provide(grade_session: GradeSession) -> object:
        return grade_session.inputs()[name]

    provide.__doc__ = f"The step's background work {name!r}, started before any check."
    return pytest.fixture(scope="session", name=name)(provide)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    checks = [i for i in items if check_meta(i)]
    if not checks:
        return
    seen: dict[str, str] = {}
    for item in checks:
        number = _number(item)
        if number in seen:
            raise pytest.UsageError(f"check {number} defined twice: {seen[number]}, {item.nodeid}")
        seen[number] = item.nodeid
    items.sort(key=lambda i: number_key(_number(i)))
    if config.getoption("collectonly", False):
        return
    gs = config.stash[GRADE_KEY]
    gs.active = True
    wanted = background.wanted(
        (getattr(i, "module", None), getattr(i, "fixturenames", ())) for i in checks
    )
    try:
        gs.start_background(wanted)
    except GradeError as exc:
        gs.active = False
        pytest.exit(str(exc), returncode=2)


@pytest.fixture(scope="session")
def grade_session(request: pytest.FixtureRequest) -> GradeSession:
    return request.config.stash[GRADE_KEY]


@pytest.fixture(scope="session")
def cluster_read(request: pytest.FixtureRequest, grade_session: GradeSession) -> GradeSession:
    """Connects once, when the first check that judges the cluster runs, and starts the read
    (with the reads and dry-runs the collected grader modules declare)."""
    modules = list(
        {
            id(i.module): i.module
            for i in request.session.items
            if isinstance(i, pytest.Function) and check_meta(i)
        }.values()
    )
    try:
        grade_session.connect(modules)
    except GradeError as exc:
        grade_session.active = False  # no grade at all: no results.json, no summary
        pytest.exit(str(exc), returncode=2)
    return grade_session


@pytest.fixture
def lab(cluster_read: GradeSession) -> LabState:
    """The cluster read (a :class:`~gpushare.grading.labstate.LabState`), shared by every check.

    Raises ClusterUnreadable in setup when the grader could not read the cluster, so each
    check that judges the cluster is an error (not a failure) in the JUnit XML too.
    """
    return cluster_read.lab()


@pytest.fixture(scope="session")
def work(grade_session: GradeSession) -> Workdir:
    """The learner's work directory."""
    return grade_session.work


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    meta = check_meta(item)
    if not meta:
        return report
    durations = item.config.stash[DURATIONS_KEY]
    durations[item.nodeid] = durations.get(item.nodeid, 0.0) + report.duration
    gs = item.config.stash[GRADE_KEY]
    if report.when == "call" or report.failed:
        if report.passed:
            gs.record(meta, item.nodeid, True, None, "")
        else:
            exc = call.excinfo.value if call.excinfo else RuntimeError("unknown")
            failure, error = gs.feedback(exc)
            gs.record(meta, item.nodeid, False, failure, error)
            # cleaned for pytest's terminal and XML
            text = gs.said(meta["number"])
            report.longrepr = shown(f"{gs.headline(meta['number'])}\n{text}")
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    gs = config.stash[GRADE_KEY]
    gs.close()  # the background work ends here whatever happened
    if not gs.active:
        return
    report = gs.report()
    if not report.complete:  # could not grade: exit 2, as ``gpushare grade`` does
        session.exitstatus = 2
    checks = [i for i in session.items if check_meta(i)]
    Outcome(  # the files `gpushare grade` writes, written the same way
        report,
        classnames={i.nodeid: _classname(i.nodeid) for i in checks},
        durations=config.stash[DURATIONS_KEY],
        headlines={c.number: gs.headline(c.number) for c in report.checks},
    ).write(config.getoption(f"{PREFIX}json"), config.stash.get(JUNIT_KEY, None))


def _classname(nodeid: str) -> str:
    """A check's JUnit classname as pytest names it: its file's path, dotted."""
    return nodeid.split("::")[0].removesuffix(".py").replace("/", ".")


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    gs = config.stash[GRADE_KEY]
    if not gs.active:
        return
    report = gs.report()
    terminalreporter.write("\n")
    if not report.complete:
        terminalreporter.write_line(line(f"gpushare: could not grade: {report.could_not_grade}"))
        return
    terminalreporter.write(
        terminal.render(report, color=terminalreporter.hasmarkup, feedback=False)
    )
