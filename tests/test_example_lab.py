"""The example lab of another shape (``examples/labs/rbac``: a namespace, a Role and its
binding, a script; no GPU, no extended resource) through every entry point, with ``src/`` as it
is: ``up`` (its nodes, their labels and taints, its seeds), ``grade``, ``solve``, ``pytest`` on
its graders, ``snapshot``, ``grade --snapshot``, ``class grade``, the Gradescope bundle and its
run, ``reset`` (seeds back, the learner's work gone), and the lab's own gates through the kit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpushare.lab import cluster
from tests.helpers import ROOT, TEST_CLUSTER

pytestmark = pytest.mark.lab  # it makes a lab of its own

EXAMPLE = ROOT / "examples" / "labs" / "rbac"
CLUSTER = f"{TEST_CLUSTER}-rbac"  # this run's own, beside the GPU lab's
CHECKS = ["1.1", "2.1", "2.2", "2.3", "3.1"]
MAX = 14


def _env(lab: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSHARE_")}
    env.pop("KUBECONFIG", None)
    env.update(GPUSHARE_LAB=str(lab), LANG="C", **extra)
    for name in ("GPUSHARE_CACHE", "GPUSHARE_PORTS_DIR"):  # the machine's built binaries, ports
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _run(
    lab: Path, *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=_env(lab, **env),
        timeout=300,
    )


def _gpushare(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(lab, "-m", "gpushare", *args)


def _verdicts(results_json: Path) -> list[tuple[str, str, int]]:
    data = json.loads(results_json.read_text(encoding="utf-8"))
    return [(t["number"], t["status"], t["score"]) for t in data["tests"]]


def _names(results_json: Path) -> dict[str, str]:
    data = json.loads(results_json.read_text(encoding="utf-8"))
    return {t["number"]: t["name"] for t in data["tests"]}


@pytest.fixture(scope="module")
def rbac(tmp_path_factory: pytest.TempPathFactory):
    """A copy of the example lab (what an author copies), and its cluster, up."""
    root = tmp_path_factory.mktemp("example") / "rbac"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__"))
    up = _gpushare(root, "up", "--cluster", CLUSTER)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield root
    finally:
        cluster.down(CLUSTER)


def test_the_example_lab_through_every_entry_point(rbac, tmp_path):
    client = cluster.Lab(CLUSTER).client(timeout=10)
    nodes = {n["metadata"]["name"]: n for n in client.get("/api/v1/nodes")["items"]}
    assert sorted(nodes) == ["shop-node-0", "shop-node-1"]  # the lab's nodes, not the GPU lab's
    zone = "topology.kubernetes.io/zone"
    assert nodes["shop-node-0"]["metadata"]["labels"][zone] == "zone-a"
    assert nodes["shop-node-1"]["metadata"]["labels"][zone] == "zone-b"
    # the lab's taint (the node controller may add its own not-ready one for a moment)
    taints = {n: nodes[n]["spec"].get("taints") or [] for n in nodes}
    assert {"key": "dedicated", "value": "audit", "effect": "NoSchedule"} in taints["shop-node-1"]
    assert [t for t in taints["shop-node-0"] if t["key"] == "dedicated"] == []
    assert nodes["shop-node-0"]["status"]["capacity"]["memory"] == "32Gi"
    seeded = "/api/v1/namespaces/shop/serviceaccounts/auditor"
    assert client.get_or_none(seeded) is not None  # `up` made the lab's seeds

    # a fresh lab: every check fails, in the lab's default language (its lab.toml's)
    work = tmp_path / "work"
    work.mkdir()
    fresh = tmp_path / "fresh.json"
    proc = _gpushare(
        rbac, "grade", "--cluster", CLUSTER, "--workdir", str(work), "--json", str(fresh)
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _verdicts(fresh) == [(n, "failed", 0) for n in CHECKS]
    assert "RBAC lab: results" in proc.stdout and "no team label" in proc.stdout
    assert _names(fresh)["1.1"] == "1.1 Namespace shop carries the label team=shop"

    # the reference solution, then a live grade
    proc = _gpushare(rbac, "solve", "--cluster", CLUSTER, "--workdir", str(work))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    live = tmp_path / "live.json"
    grade = ["grade", "--cluster", CLUSTER, "--workdir", str(work), "--json", str(live)]
    proc = _gpushare(rbac, *grade, "--lang", "zh")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    passed = [(n, "passed", s) for n, s in zip(CHECKS, [2, 3, 3, 2, 4], strict=True)]
    assert _verdicts(live) == passed
    assert _names(live)["2.1"] == "2.1 Role pod-reader 只能读取 Pod，别无其他权限"

    # pytest on the lab's graders: the same verdicts
    via_pytest, xml = tmp_path / "pytest.json", tmp_path / "pytest.xml"
    proc = _run(
        rbac,
        "-m",
        "pytest",
        "graders",
        *("--cluster", CLUSTER, "--workdir", str(work), "--lang", "ko"),
        *("--json", str(via_pytest), "--junitxml", str(xml)),
        cwd=rbac,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _verdicts(via_pytest) == passed
    assert _names(via_pytest)["1.1"] == "1.1 네임스페이스 shop에 team=shop 레이블이 있음"
    assert f'name="score" value="{MAX}"' in xml.read_text(encoding="utf-8")

    # a snapshot (the Role's dry-run in it), graded offline, and a class of one
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    proc = _gpushare(
        rbac, "snapshot", "--cluster", CLUSTER, "--workdir", str(work), "--out", str(snaps)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    snapshot = Path(proc.stdout.strip().splitlines()[-1])
    offline = tmp_path / "offline.json"
    proc = _gpushare(rbac, "grade", "--snapshot", str(snapshot), "--json", str(offline))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _verdicts(offline) == passed
    out = tmp_path / "class"
    proc = _gpushare(rbac, "class", "grade", str(snaps), "--out", str(out), "--lang", "en")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (graded,) = sorted(out.rglob("results.json"))
    assert _verdicts(graded) == passed
    assert (out / "report.html").exists()

    # the Gradescope bundle carries the lab (its definition and seeds too), and its run grades
    bundle = tmp_path / "autograder.zip"
    proc = _gpushare(rbac, "gradescope", "bundle", "--out", str(bundle))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    autograder = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as zf:
        names = set(zf.namelist())
        zf.extractall(autograder / "source")
    assert {"graders/lab.toml", "graders/seed.yaml", "graders/rbaclab/runs.py"} <= names
    (autograder / "submission").mkdir()
    shutil.copy(snapshot, autograder / "submission")
    proc = _run(
        rbac,
        "-m",
        "gpushare",
        "gradescope",
        "run",
        "--root",
        str(autograder),
        PYTHONPATH=str(autograder / "source" / "src"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((autograder / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == MAX, results

    # reset: the learner's work goes, the seeds come back as they were
    proc = _gpushare(rbac, "reset", "--cluster", CLUSTER)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shop = client.get("/api/v1/namespaces/shop")
    assert "team" not in (shop["metadata"].get("labels") or {})
    assert client.get_or_none(seeded) is not None
    after = tmp_path / "after.json"
    proc = _gpushare(rbac, *grade[:-1], str(after))
    assert {n for n, status, _ in _verdicts(after) if status == "failed"} == {"1.1", "2.1", "2.2"}

    # the lab's own tests: its gates, through the kit, on its recordings
    proc = _run(rbac, "-m", "pytest", "tests", "-q", cwd=rbac)
    assert proc.returncode == 0, proc.stdout + proc.stderr
