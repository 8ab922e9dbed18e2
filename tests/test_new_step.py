"""A new lab step is one grader file and its catalog entries (issue 12).

A temporary copy of the checkout gets a toy step 9, nothing else: steps, checks, points and
the cluster reads it declares are discovered. Its read is captured into a snapshot by the
copy's own ``gpushare snapshot``, then both entry points of the copy grade it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import MAX_SCORE, ROOT, kubectl

TOY = '''"""Step 9 (a toy): lab-node-0 is still there and Ready."""

from gpushare.lab_api import T, check, fail

READS = {"node:lab-node-0": "/api/v1/nodes/lab-node-0"}


@check("9.1", 1)
def test_9_1_lab_node_0_is_ready(lab):
    node = lab.read("node:lab-node-0")
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        fail(expected="lab-node-0 Ready", found=T("absent"), where="node lab-node-0")
'''

CATALOG = {
    "en": ('title = "lab-node-0 is Ready"', 'hint = "Keep the lab\'s nodes."'),
    "zh": ('title = "lab-node-0 处于 Ready 状态"', 'hint = "保留实验的节点。"'),
    "ko": ('title = "lab-node-0이 Ready 상태입니다"', 'hint = "실습의 노드를 유지하세요."'),
}


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "checkout"
    for name in ("src", "graders", "fixtures", "solutions"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(ROOT / name, copy / name)
    (copy / "graders" / "test_step9_toy.py").write_text(TOY)
    for lang, (title, hint) in CATALOG.items():
        toml = copy / "graders" / "messages" / f"{lang}.toml"
        toml.write_text(toml.read_text() + f'\n[checks."9.1"]\n{title}\n{hint}\n')
    return copy


def _run(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PYTHONPATH")}
    env["PYTHONPATH"] = str(copy / "src")
    for var in ("GPUSHARE_GRADERS", "GPUSHARE_FIXTURES", "GPUSHARE_SOLUTIONS"):
        env.pop(var, None)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=copy, env=env, timeout=180
    )


def test_a_toy_step_is_graded_by_both_entry_points(lab, state, tmp_path):
    workdir = state.solve()
    copy = _copy(tmp_path)
    made = _run(
        copy, "-m", "gpushare", "snapshot", "--kubeconfig", str(lab.kubeconfig),
        "--workdir", str(workdir), "--out", str(tmp_path),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    snap = made.stdout.strip()
    cli, via_pytest = tmp_path / "cli.json", tmp_path / "pytest.json"
    options = ["--snapshot", snap, "--lang", "en", "--seed", "3", "--json"]
    graded = _run(copy, "-m", "gpushare", "grade", *options, str(cli), "--unsafe-no-sandbox")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "9. " in graded.stdout and "lab-node-0 is Ready" not in graded.stderr
    by_pytest = _run(
        copy, "-m", "pytest", "graders", "-p", "no:cacheprovider", "-q", *options,
        str(via_pytest), "--unsafe-no-sandbox",
    )  # fmt: skip
    assert by_pytest.returncode == 0, by_pytest.stdout + by_pytest.stderr
    for path in (cli, via_pytest):
        results = json.loads(path.read_text())
        toy = next(t for t in results["tests"] if t["number"] == "9.1")
        assert toy["status"] == "passed" and toy["name"] == "9.1 lab-node-0 is Ready"
        assert results["max_score"] == results["score"] == MAX_SCORE + 1
    assert not (ROOT / "graders" / "test_step9_toy.py").exists()  # only the copy changed
    # the toy check is a real one: with lab-node-0 gone, it fails
    state.dirty()
    kubectl(lab, "delete", "node", "lab-node-0", "--wait=false")
    try:
        made = _run(
            copy, "-m", "gpushare", "snapshot", "--kubeconfig", str(lab.kubeconfig),
            "--workdir", str(workdir), "--out", str(tmp_path / "gone"),
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
    finally:
        state.fresh()  # reset brings the node back
    graded = _run(
        copy, "-m", "gpushare", "grade", "--snapshot", made.stdout.strip(), "--step", "9",
        "--lang", "en", "--json", str(cli), "--unsafe-no-sandbox",
    )  # fmt: skip
    assert graded.returncode == 1, graded.stdout + graded.stderr
    results = json.loads(cli.read_text())
    assert [(t["number"], t["status"]) for t in results["tests"]] == [("9.1", "failed")]
