"""The pytest plugin behind ``pytest graders/``.

It is registered by the checkout's root ``conftest.py`` and stays dormant unless the collected
items include grader checks (``@check``), so the project's own tests never start a cluster.
When it wakes it drives a :class:`~gpushare.grading.session.GradeSession`, the same one
``gpushare grade`` drives without pytest:

- connects, in the session fixture ``lab``, when the first check that judges the cluster
  runs (``--kubeconfig``, else ``$KUBECONFIG``, else the lab cluster, graded as it is: never
  started or repaired); collection (``--collect-only``, ``-k``) starts nothing. A cluster that
  cannot be reached ends the run with exit status 2 and one line; one that cannot be read
  makes every check that judges it an error (JUnit ``<error>``) and the run exit 2;
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

from gpushare.grading.session import GradeError, GradeSession
from gpushare.reports import messages

GRADE_KEY = pytest.StashKey[GradeSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpushare", "gpushare grading")
    group.addoption(
        "--workdir", help="learner's work directory (default $GPUSHARE_WORKDIR or /root/gpushare)"
    )
    group.addoption(
        "--kubeconfig",
        help="grade this cluster as given, never start anything (default: $KUBECONFIG, else "
        "the lab cluster)",
    )
    group.addoption("--context", help="kubeconfig context to grade (default: current-context)")
    group.addoption("--cluster", help="lab cluster name (default $GPUSHARE_CLUSTER or gpushare)")
    group.addoption(
        "--unsafe-no-sandbox",
        dest="gpushare_unsafe_no_sandbox",
        action="store_true",
        help="run the learner's script unsandboxed even for a snapshot (trusted work only)",
    )
    group.addoption(
        "--snapshot",
        dest="gpushare_snapshot",
        metavar="FILE",
        help="grade this snapshot (.gpushare.tgz) offline: no cluster, no control plane",
    )
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
    workdir = Path(wd).expanduser() if wd else default_workdir()
    snap = _load_snapshot(config)
    if snap is not None:
        workdir = snap.work_root
    gs = GradeSession(
        workdir=workdir,
        snapshot=snap,
        unsafe_no_sandbox=config.getoption("gpushare_unsafe_no_sandbox"),
        kubeconfig=config.getoption("kubeconfig"),
        cluster=config.getoption("cluster"),
        context=config.getoption("context"),
        lang=lang,
        seed=config.getoption("gpushare_seed"),
        fixtures=Path(str(config.rootpath)) / "fixtures",
    )
    config.stash[GRADE_KEY] = gs
    if _targets_graders(config):
        # The learner's script runs are the slowest part of a grade: start them now, so they
        # overlap pytest's collection and the cluster read.
        try:
            gs.start_runs()
        except GradeError as exc:
            pytest.exit(str(exc), returncode=2)


SCRATCH_KEY = pytest.StashKey[Path]()


def _load_snapshot(config: pytest.Config) -> Any:
    """The ``--snapshot`` file, verified and unpacked into a scratch folder (removed at the
    end); a bad one ends the run with exit status 2 and one line."""
    path = config.getoption("gpushare_snapshot")
    if not path:
        return None
    if config.getoption("kubeconfig") or config.getoption("context"):
        raise pytest.UsageError("--snapshot grades the file alone: no --kubeconfig or --context")
    import tempfile

    from gpushare.submissions.snapshot import SnapshotError, load

    scratch = Path(tempfile.mkdtemp(prefix="gpushare-grade-"))
    config.stash[SCRATCH_KEY] = scratch
    try:
        return load(Path(path).expanduser(), scratch)
    except SnapshotError as exc:
        pytest.exit(f"gpushare: bad snapshot: {exc}", returncode=2)


def pytest_unconfigure(config: pytest.Config) -> None:
    scratch = config.stash.get(SCRATCH_KEY, None)
    if scratch is not None:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


def _targets_graders(config: pytest.Config) -> bool:
    """Whether this run was asked for the graders (a path argument in a ``graders`` folder).

    Not when a selection (-k, -m) may leave step 6 out: its runs would only be waited for;
    and never for ``--collect-only``, which runs nothing.
    """
    if config.getoption("keyword", "") or config.getoption("markexpr", ""):
        return False
    if config.getoption("collectonly", False):
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
    from gpushare.reports.results import number_key

    seen: dict[str, str] = {}
    for item in checks:
        number = check_meta(item)["number"]
        if number in seen:
            raise pytest.UsageError(f"check {number} defined twice: {seen[number]}, {item.nodeid}")
        seen[number] = item.nodeid
    items.sort(key=lambda i: number_key(check_meta(i).get("number", "999.999")))
    gs = _session(config)
    if config.getoption("collectonly", False):
        return
    gs.active = True
    if any("request_runs" in getattr(i, "fixturenames", ()) for i in checks):
        try:
            gs.start_runs()
        except GradeError as exc:
            gs.active = False
            pytest.exit(str(exc), returncode=2)
    else:
        gs.drop_runs()


@pytest.fixture(scope="session")
def grade_session(request: pytest.FixtureRequest) -> GradeSession:
    return _session(request.config)


@pytest.fixture(scope="session")
def cluster_read(request: pytest.FixtureRequest, grade_session: GradeSession) -> GradeSession:
    """Connects once, when the first check that judges the cluster runs, and starts the read
    (with the dry-runs the collected grader modules declare)."""
    modules = list(
        {id(i.module): i.module for i in request.session.items if check_meta(i)}.values()
    )
    try:
        grade_session.connect(modules)
    except GradeError as exc:
        grade_session.active = False  # no grade at all: no results.json, no summary
        pytest.exit(str(exc), returncode=2)
    return grade_session


@pytest.fixture
def lab(cluster_read: GradeSession) -> Any:
    """The cluster read (a :class:`~gpushare.grading.labstate.LabState`), shared by every check.

    Raises ClusterUnreadable in setup when the grader could not read the cluster, so each
    check that judges the cluster is an error (not a failure) in pytest's JUnit XML too.
    """
    return cluster_read.lab()


@pytest.fixture(scope="session")
def work(grade_session: GradeSession) -> Any:
    """The learner's work directory (a :class:`~gpushare.submissions.workdir.Workdir`)."""
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
            gs.record(meta, item.nodeid, True, "", "")
        else:
            exc = call.excinfo.value if call.excinfo else RuntimeError("unknown")
            text, error = gs.feedback(meta["number"], exc)
            from gpushare.reports.clean import text as shown  # pytest's terminal and XML

            report.longrepr = shown(f"{gs.headline(meta['number'])}\n{text}")
            gs.record(meta, item.nodeid, False, text, error)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    gs = _session(session.config)
    gs.close()  # the learner's runs end here whatever happened
    if not gs.active:
        return
    report = gs.report()
    if not report.complete:  # could not grade: exit 2, as ``gpushare grade`` does
        session.exitstatus = 2
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    if xml is not None:
        from gpushare.reports.clean import line

        for name, value in report.properties().items():
            xml.add_global_property(name, line(value))
    path = session.config.getoption("gpushare_json")
    if path:
        report.write_json(Path(path))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    gs = _session(config)
    if not gs.active:
        return
    from gpushare.reports import terminal

    report = gs.report()
    terminalreporter.write("\n")
    if not report.complete:
        from gpushare.reports.clean import line

        terminalreporter.write_line(line(f"gpushare: could not grade: {report.could_not_grade}"))
        return
    terminalreporter.write(
        terminal.render(report, color=terminalreporter.hasmarkup, feedback=False)
    )
