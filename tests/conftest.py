"""Fixtures of the project's own tests: one real kwok lab for the whole session.

Each run has a lab of its own (``gpushare-test-<pid>-<random>``, or ``$GPUSHARE_TEST_CLUSTER``),
so a developer's own lab is never reset by the tests, and two checkouts, CI (``gpushare-ci``)
and a learner's lab run side by side. The lab is created once, put back to the fresh state with
``reset`` between cases, and always deleted at the end, unless ``GPUSHARE_TEST_KEEP=1``: then
``GPUSHARE_TEST_CLUSTER=mine GPUSHARE_TEST_KEEP=1 make test`` reuses it next time (about a
second to start instead of several).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpushare.kube.transport import Client
from gpushare.lab import cluster
from tests.helpers import TEST_CLUSTER, LabState


@pytest.fixture(scope="session")
def lab() -> Any:
    try:
        yield cluster.up(TEST_CLUSTER)  # a failed create leaves nothing behind
    finally:
        if os.environ.get("GPUSHARE_TEST_KEEP", "") not in ("", "0"):
            print(f"\nkept the test lab: GPUSHARE_TEST_CLUSTER={TEST_CLUSTER}")
        else:
            cluster.down(TEST_CLUSTER)


@pytest.fixture(scope="session")
def client(lab: cluster.Lab) -> Client:
    return lab.client(timeout=10)


@pytest.fixture(scope="session")
def state(lab: cluster.Lab, tmp_path_factory: pytest.TempPathFactory) -> LabState:
    return LabState(lab, tmp_path_factory.mktemp("solved") / "gpushare")


@pytest.fixture
def copy_workdir(tmp_path: Path):
    """A private copy of a work directory, for file mutants that must not touch the original."""

    def make(src: Path) -> Path:
        dst = tmp_path / "work"
        shutil.copytree(src, dst, symlinks=True)
        return dst

    return make


LAB_FIXTURES = {"lab", "client", "state"}
INSTALL_FIXTURES = {"autograder"}  # the Gradescope bundle installed by its own setup.sh


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "lab: needs a real kwok lab (the full tier only)")
    config.addinivalue_line(
        "markers",
        "install: installs a package with pip, as a deployment does (the full tier only; "
        "`make gradescope-check` installs the bundle too)",
    )


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_lab(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """In the fast tier (``make test-fast``), a test that would start a lab fails at once."""
    if os.environ.get("GPUSHARE_TEST_TIER") == "fast" and not request.node.get_closest_marker(
        "lab"
    ):

        def refuse(*_args: object, **_kwargs: object) -> None:
            raise AssertionError("a fast-tier test started a lab: mark it `lab`")

        monkeypatch.setattr(cluster, "up", refuse)
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that take the lab's fixtures (marked ``lab``) or install a bundle (``install``)
    are of the full tier; ``make test-fast`` runs the rest (``-m "not lab and not install"``):
    no control plane, no pip."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if LAB_FIXTURES & fixtures:
            item.add_marker(pytest.mark.lab)
        if INSTALL_FIXTURES & fixtures:
            item.add_marker(pytest.mark.install)
