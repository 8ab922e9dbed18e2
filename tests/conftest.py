"""Fixtures of the project's own tests: one real kwok lab for the whole session.

Tests run against a dedicated cluster (``$GPUSHARE_TEST_CLUSTER``, default ``gpushare-test``)
so a developer's own lab is never reset by them. It is created once, put back to the fresh
state with ``reset`` between cases, and deleted at the end (``GPUSHARE_TEST_KEEP=1`` keeps it
for the next run, which then starts in about a second).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpushare import cluster
from gpushare.kubeapi import Client
from tests.helpers import TEST_CLUSTER, LabState


@pytest.fixture(scope="session")
def lab() -> Any:
    lab = cluster.up(TEST_CLUSTER)
    yield lab
    if not os.environ.get("GPUSHARE_TEST_KEEP"):
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
