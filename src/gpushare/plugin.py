"""The pytest plugin behind ``pytest graders/`` and ``gpushare grade``.

It is registered by the checkout's root ``conftest.py`` and stays dormant unless the collected
items include grader checks (``@check``), so the project's own tests never start a cluster.
When it wakes it:

- connects to the lab (``--kubeconfig`` as given, else the lab cluster, brought up like
  ``gpushare up``); an unreachable cluster ends the run with exit status 2 and one line;
- starts, in the background, the cluster read and the runs of ``bin/check-request.sh`` so that
  checks only wait for what they read;
- turns each check's :class:`~gpushare.checks.CheckFailed` into feedback in the learner's
  language, as the report's longrepr (so pytest's own output and JUnit XML carry it, with no
  traceback);
- adds up the points, writes ``--json`` and the JUnit testsuite properties.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpushare import messages, results
from gpushare.checks import CheckFailed, T
from gpushare.kubeapi import ApiError, Unreachable

GRADE_KEY = pytest.StashKey["GradeSession"]()


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
    config.addinivalue_line(
        "markers", "gpushare_check(number, points, step): a graded check of the lab"
    )
    try:
        lang = messages.resolve_lang(config.getoption("lang"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    gs = GradeSession(config, lang)
    config.stash[GRADE_KEY] = gs
    prestarted = [p for p in config.pluginmanager.get_plugins() if hasattr(p, "gpushare_runs")]
    if prestarted:  # gpushare grade started the runs before it even imported pytest
        gs.runs = prestarted[0].gpushare_runs
    elif _targets_graders(config):
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


class GradeSession:
    """State of one grading run: options, the lab connection, the results."""

    def __init__(self, config: pytest.Config, lang: str) -> None:
        from gpushare.workdir import default_workdir

        self.config = config
        self.lang = lang
        wd = config.getoption("workdir")
        self.workdir = Path(wd).expanduser() if wd else default_workdir()
        self.kubeconfig: str | None = config.getoption("kubeconfig")
        self.cluster: str | None = config.getoption("cluster")
        seed = config.getoption("gpushare_seed")
        self.seed: int = seed if seed is not None else secrets.randbelow(2**31)
        self.active = False
        self.started = time.monotonic()
        self.results: dict[str, results.CheckResult] = {}
        self.items: list[pytest.Item] = []
        self.server: str | None = None
        self.state: Any = None
        self.runs: Any = None

    # -- waking up ------------------------------------------------------------------

    def activate(self, items: list[pytest.Item]) -> None:
        from gpushare import cluster as lab_cluster
        from gpushare.kubeapi import ApiError, Client, KubeconfigError, Unreachable
        from gpushare.labstate import LabState

        self.active = True
        self.items = items
        try:
            if self.kubeconfig:
                client = Client.from_kubeconfig(self.kubeconfig, timeout=3.0)
                where = f"--kubeconfig {self.kubeconfig}"
            else:
                lab = lab_cluster.up(self.cluster)
                client = lab.client(timeout=3.0)
                where = f"cluster {lab.name}"
            self.server = client.server
            client.get("/version")
            client.timeout = 10.0
        except KubeconfigError as exc:
            pytest.exit(f"gpushare: {exc}", returncode=2)
        except Unreachable as exc:
            pytest.exit(
                f"gpushare: {exc} ({where}). Start the lab with `make up` "
                "(or `gpushare up`), or pass --kubeconfig FILE for another cluster.",
                returncode=2,
            )
        except ApiError as exc:
            pytest.exit(
                f"gpushare: the apiserver refused us ({exc}); check the kubeconfig", returncode=2
            )
        except Exception as exc:  # a cluster that cannot be brought up: one line, exit 2
            pytest.exit(f"gpushare: cannot start the lab cluster: {exc}", returncode=2)
        self.state = LabState(client).start()
        if any(_mark(i)["step"] == 6 for i in items):
            self.start_runs()
        elif self.runs is not None:  # started early, but step 6 was deselected
            self.runs.close()
            self.runs = None

    def start_runs(self) -> None:
        if self.runs is None:
            from gpushare.requestruns import RequestRuns

            self.runs = RequestRuns.start(self.workdir, self.fixtures_dir(), self.seed)

    def fixtures_dir(self) -> Path:
        env = os.environ.get("GPUSHARE_FIXTURES")
        if env:
            return Path(env)
        return Path(str(self.config.rootpath)) / "fixtures"

    def close(self) -> None:
        if self.state is not None:
            self.state.close()
        if self.runs is not None:
            self.runs.close()

    # -- results --------------------------------------------------------------------

    def record(self, item: pytest.Item, passed: bool, output: str, error: bool) -> None:
        mark = _mark(item)
        number = mark["number"]
        if number in self.results and not passed:
            # a teardown failure after a pass: the check is failed after all
            self.results[number].fail(output, error)
            return
        if number in self.results:
            return
        self.results[number] = results.CheckResult(
            number=number,
            step=mark["step"],
            title=messages.title(number, self.lang),
            max_score=mark["points"],
            score=mark["points"] if passed else 0,
            passed=passed,
            output=output,
            error=error,
            nodeid=item.nodeid,
        )

    def report(self) -> results.Report:
        ordered = sorted(self.results.values(), key=lambda r: results.number_key(r.number))
        return results.Report(
            checks=ordered,
            execution_time=time.monotonic() - self.started,
            lang=self.lang,
            seed=self.seed,
            workdir=str(self.workdir),
            server=self.server,
        )


def _mark(item: pytest.Item) -> dict[str, Any]:
    m = item.get_closest_marker("gpushare_check")
    return dict(m.kwargs) if m else {}


def _session(config: pytest.Config) -> GradeSession:
    return config.stash[GRADE_KEY]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    checks = [i for i in items if i.get_closest_marker("gpushare_check")]
    if not checks:
        return
    seen: dict[str, str] = {}
    for item in checks:
        number = _mark(item)["number"]
        if number in seen:
            raise pytest.UsageError(f"check {number} defined twice: {seen[number]}, {item.nodeid}")
        seen[number] = item.nodeid
    items.sort(key=lambda i: results.number_key(_mark(i).get("number", "999.999")))
    _session(config).activate(checks)


@pytest.fixture(scope="session")
def grade_session(request: pytest.FixtureRequest) -> GradeSession:
    return _session(request.config)


@pytest.fixture(scope="session")
def lab(grade_session: GradeSession) -> Any:
    """The cluster read (a :class:`~gpushare.labstate.LabState`), shared by every check."""
    return grade_session.state


@pytest.fixture(scope="session")
def work(grade_session: GradeSession) -> Any:
    """The learner's work directory (a :class:`~gpushare.workdir.Workdir`)."""
    from gpushare.workdir import Workdir

    return Workdir(grade_session.workdir)


@pytest.fixture(scope="session")
def request_runs(grade_session: GradeSession) -> Any:
    """Runs of the learner's bin/check-request.sh on the sample and generated cases."""
    return grade_session.runs


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report: pytest.TestReport = yield
    if not item.get_closest_marker("gpushare_check"):
        return report
    gs = _session(item.config)
    number = _mark(item)["number"]
    if report.when == "call" or report.failed:
        if report.passed:
            gs.record(item, True, "", False)
        else:
            exc = call.excinfo.value if call.excinfo else None
            if isinstance(exc, ApiError | Unreachable):
                # the cluster could not be read: the check fails, but it is not a grader bug
                exc = CheckFailed(problem=T("api_error", error=str(exc)[:300]))
            if isinstance(exc, CheckFailed):
                text = messages.render_failure(number, exc, gs.lang)
                error = False
            else:
                text = messages.render_error(number, exc or RuntimeError("unknown"), gs.lang)
                error = True
            report.longrepr = f"{number} {messages.title(number, gs.lang)}\n{text}"
            gs.record(item, False, text, error)
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
