"""A small class of real snapshots, captured from the test lab, for the class-grading tests.

Every snapshot is taken by :func:`gpushare.grading.capture.take` from the real lab: the reference
solution, and variants made by changing the solved work dir (or the lab itself) before the
capture. :func:`respin` makes many more from one real snapshot, each with a learner id and a
content hash of its own (a file added to its work dir), for the benchmark.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gpushare.grading import capture
from gpushare.submissions import snapshot

ENDLESS = ("sleep", "297")


def capture_variant(
    solved: Path,
    out: Path,
    learner: str,
    kubeconfig: str,
    change: Callable[[Path], None] | None = None,
) -> Path:
    """Copy the solved work dir, ``change`` it as a learner would, and capture it."""
    with tempfile.TemporaryDirectory(prefix="gpushare-class-wd-") as tmp:
        wd = Path(tmp) / "gpushare"
        shutil.copytree(solved, wd, symlinks=True)
        if change is not None:
            change(wd)
        return capture.take(wd, kubeconfig=kubeconfig, learner=learner, out=out)


def broken_script(wd: Path) -> None:
    """A check-request.sh that says OK to everything."""
    (wd / "bin" / "check-request.sh").write_text("#!/bin/sh\necho OK\nexit 0\n")


def endless_script(wd: Path) -> None:
    """A check-request.sh that never answers (``sleep 297``: a command line to look for)."""
    (wd / "bin" / "check-request.sh").write_text(f"#!/bin/sh\n{' '.join(ENDLESS)}\n")


def wrong_table(wd: Path) -> None:
    """Step 7's table with every answer swapped."""
    table = wd / "out" / "isolation.txt"
    swapped = {"no": "yes", "yes": "no", "partial": "no"}
    lines = []
    for line in table.read_text().splitlines():
        key, _, value = line.partition("=")
        lines.append(f"{key}={swapped.get(value, value)}")
    table.write_text("\n".join(lines) + "\n")


def no_quota_file(wd: Path) -> None:
    (wd / "k8s" / "gpu-quota.yaml").unlink()


def truncate(path: Path, keep: int = 2000) -> Path:
    """A snapshot cut short, as an interrupted upload leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    return path


def respin(base: Path, out: Path, learner: str, salt: str) -> Path:
    """A copy of the real snapshot ``base`` for another learner, with a content hash of its
    own: ``notes.txt`` holding ``salt`` is added to its work dir."""
    with tempfile.TemporaryDirectory(prefix="gpushare-respin-") as tmp:
        snap = snapshot.load(base, Path(tmp) / "scratch")
        (snap.work_root / "notes.txt").write_text(f"{salt}\n")
        captured = snapshot.build(
            learner=learner,
            cluster=snap.cluster,
            identity=snap.manifest["cluster"],
            workdir=snap.work_root,
            runtime=snap.manifest["runtime"],
        )
        captured.manifest["workdir"] = snap.manifest["workdir"]
        return snapshot.write(captured, out)


def wait_next_second() -> None:
    """Capture times have one-second resolution: make the next capture a later one."""
    time.sleep(1.05 - (time.time() % 1.0) if time.time() % 1.0 > 0.05 else 0.05)
