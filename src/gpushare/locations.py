"""Where a grade finds its inputs (the learner's work directory; the lab's graders, fixtures
and solutions) and where the lab clusters live on disk (the cache, kwokctl's clusters).

A lab is a folder of ``graders/`` (the step files, their support modules, ``lab.toml``,
``messages/``), ``fixtures/`` and ``solutions/``: this checkout's by default, ``GPUSHARE_LAB``
for another, ``GPUSHARE_GRADERS``, ``GPUSHARE_FIXTURES`` or ``GPUSHARE_SOLUTIONS`` to move one
part. Nothing here imports more than ``os`` and ``pathlib``, so ``gpushare grade`` knows every
place before it imports anything heavy (it starts the learner's script runs first).
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_WORKDIR = "/root/gpushare"
DEFAULT_CLUSTER = "gpushare"
_CHECKOUT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """The per-user cache shared by every checkout (``GPUSHARE_CACHE`` overrides it)."""
    env = os.environ.get("GPUSHARE_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpushare"


def kwok_workdir() -> Path:
    """Where kwokctl keeps the lab clusters (``clusters/<name>/``)."""
    return cache_dir() / "kwok"


def cluster_name(name: str | None = None) -> str:
    """The lab cluster a command means: ``--cluster``, else ``GPUSHARE_CLUSTER``, else ours."""
    return name or os.environ.get("GPUSHARE_CLUSTER") or DEFAULT_CLUSTER


def lab_dir(name: str) -> Path:
    """Where kwokctl keeps the lab cluster ``name`` (its kubeconfig, pki, pids, logs)."""
    return kwok_workdir() / "clusters" / name


def default_workdir() -> Path:
    return Path(os.environ.get("GPUSHARE_WORKDIR") or DEFAULT_WORKDIR)


def lab_folder() -> Path:
    """The lab graded: ``GPUSHARE_LAB``, else this checkout (whose lab is the GPU-sharing lab)."""
    env = os.environ.get("GPUSHARE_LAB")
    return Path(env).expanduser() if env else _CHECKOUT


def graders_dir() -> Path:
    env = os.environ.get("GPUSHARE_GRADERS")
    return Path(env) if env else lab_folder() / "graders"


def default_fixtures() -> Path:
    env = os.environ.get("GPUSHARE_FIXTURES")
    return Path(env) if env else lab_folder() / "fixtures"


def solutions_dir() -> Path:
    env = os.environ.get("GPUSHARE_SOLUTIONS")
    return Path(env) if env else lab_folder() / "solutions"


def lock_file() -> Path:
    """``requirements/grade.lock``: grading's pinned, hashed dependencies (image and bundle)."""
    return _CHECKOUT / "requirements" / "grade.lock"
