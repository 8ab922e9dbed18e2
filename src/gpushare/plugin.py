"""The pytest plugin behind ``pytest graders/``.

It is registered by the checkout's root ``conftest.py`` and stays dormant unless the collected
items include grader checks (``@check``), so the project's own tests never start a cluster.
When it wakes it drives a :class:`~gpushare.session.GradeSession`, the same one
``gpushare grade`` drives without pytest:

- connects to the lab (``--kubeconfig`` as given, else the lab cluster, brought up like
  ``gpushare up``); an unreachable cluster ends the run with exit status 2 and one line;
- starts, in the background, the cluster read and the runs of ``bin/check-request.sh`` so that
  checks only wait for what they read;
- turns each check's failure into feedback in the learner's language, as the report's
  longrepr (so pytest's own output and JUnit XML carry it, with no traceback);
- adds up the points, writes ``--json`` and the JUnit testsuite properties.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpushare import messages
from gpushare.session import GradeError, GradeSession

GRADE_KEY = pytest.StashKey[GradeSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpushare", "gpushare grading")
    group.addoption(
        "--workdir", help="learner's work directory (default $GPUSHARE_WORKDIR or /root/gpushare)"
    )
    group.addoption("--kubeconfig", help="grade this cluster as given; never start anything")
    group.addoption("--cluster", help="lab cluster name (default $GPUSHARE_CLUSTER or gpushare)")
    group.addoption("--lang", help="feedback language: zh (default), ko, en")
    group.addoption(
        "--json", dest="gpushare_json", metavar="FILE", help="write Gradescope-style results.json"
    )
    group.addoption(
        "--seed",
        dest="gpushare_seed",
        type=int,
        help="seed of the generated check-request.sh cases (default: random)",
    )


def pytest_configure(config: pytest.Config) -> None:
    from gpushare.locations import default_workdir

    try:
        lang = messages.resolve_lang(config.getoption("lang"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    wd = config.getoption("workdir")
    gs = GradeSession(
        workdir=Path(wd).expanduser() if wd else default_workdir(),
        kubeconfig=config.getoption("kubeconfig"),
        cluster=config.getoption("cluster"),
        lang=lang,
        seed=config.getoption("gpushare_seed"),
        fixtures=Path(str(config.rootpath)) / "fixtures",
    )
    config.stash[GRADE_KEY] = gs
    if _targets_graders(config):
        # The learner's script runs are the slowest part of a grade: start them now, so they
        # overlap pytest's collection and the cluster read.
        gs.start_runs()


def _targets_graders(config: pytest.Config) -> bool:
    """Whether this run was asked for the graders (a path argument in a ``graders`` folder).

    Not when a selection (-k, -m) may leave step 6 out: its runs would only be waited for.
    """
    if config.getoption("keyword", "") or config.getoption("markexpr", ""):
        return False
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if "graders" in path.parts and (path.is_dir() or path.name.startswith("test_step6")):
            return True
    return False


def check_meta(item: pytest.Item) -> dict[str, Any]:
    """The ``@check`` data of a collected item, or {} for anything else."""
    return getattr(getattr(item, "function", None), "gpushare_check", None) or {}


def _session(config: pytest.Config) -> GradeSession:
    return config.stash[GRADE_KEY]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    checks = [i for i in items if check_meta(i)]
    if not checks:
        return
    from gpushare.results import number_key

    seen: dict[str, str] = {}
    for item in checks:
        number = check_meta(item)["number"]
        if number in seen:
            raise pytest.UsageError(f"check {number} defined twice: {seen[number]}, {item.nodeid}")
        seen[number] = item.nodeid
    items.sort(key=lambda i: number_key(check_meta(i).get("number", "999.999")))
    gs = _session(config)
    try:
        gs.connect()
    except GradeError as exc:
        pytest.exit(str(exc), returncode=2)
    if any(check_meta(i)["step"] == 6 for i in checks):
        gs.start_runs()
    else:
        gs.drop_runs()


@pytest.fixture(scope="session")
def grade_session(request: pytest.FixtureRequest) -> GradeSession:
    return _session(request.config)


@pytest.fixture(scope="session")
def lab(grade_session: GradeSession) -> Any:
    """The cluster read (a :class:`~gpushare.labstate.LabState`), shared by every check."""
    return grade_session.inputs()["lab"]


@pytest.fixture(scope="session")
def work(grade_session: GradeSession) -> Any:
    """The learner's work directory (a :class:`~gpushare.workdir.Workdir`)."""
    return grade_session.inputs()["work"]


@pytest.fixture(scope="session")
def request_runs(grade_session: GradeSession) -> Any:
    """Runs of the learner's bin/check-request.sh on the sample and generated cases."""
    return grade_session.inputs()["request_runs"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report: pytest.TestReport = yield
    meta = check_meta(item)
    if not meta:
        return report
    gs = _session(item.config)
    if report.when == "call" or report.failed:
        if report.passed:
            gs.record(meta, item.nodeid, True, "", False)
        else:
            exc = call.excinfo.value if call.excinfo else RuntimeError("unknown")
            text, error = gs.feedback(meta["number"], exc)
            report.longrepr = f"{gs.headline(meta['number'])}\n{text}"
            gs.record(meta, item.nodeid, False, text, error)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    gs = _session(session.config)
    if not gs.active:
        return
    gs.close()
    report = gs.report()
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    if xml is not None:
        for name, value in report.properties().items():
            xml.add_global_property(name, value)
    path = session.config.getoption("gpushare_json")
    if path:
        report.write_json(Path(path))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    gs = _session(config)
    if not gs.active:
        return
    from gpushare import terminal

    terminalreporter.write("\n")
    terminalreporter.write(
        terminal.render(gs.report(), color=terminalreporter.hasmarkup, feedback=False)
    )
