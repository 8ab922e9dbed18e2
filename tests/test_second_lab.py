"""A second lab, written here into a temporary folder, through every entry point.

The engine (``src/gpushare``) knows no lab: this one has one node, two checks (one judges the
cluster, one runs the learner's script), texts in zh, ko and en and one fixture, and
``gpushare up``, ``grade``, ``snapshot``, ``grade --snapshot``, ``pytest graders/`` and ``class
grade`` all grade it with ``GPUSHARE_LAB`` pointing at it, and nothing of ``src/`` changed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpushare.lab import cluster
from tests.helpers import ROOT, TEST_CLUSTER

pytestmark = pytest.mark.lab  # it makes a lab of its own

LAB: dict[str, str] = {
    "conftest.py": 'pytest_plugins = ["gpushare.grading.plugin"]\n',
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
    "graders/lab.toml": textwrap.dedent(
        """\
        default_lang = "zh"
        [nodes]
        names = ["tiny-node"]
        capacity = { cpu = "4", memory = "8Gi", pods = "10" }
        """
    ),
    "graders/tinylab/__init__.py": textwrap.dedent(
        '''\
        """The tiny lab's own code: what it reads, and the run of the learner's script."""

        import shutil
        import tempfile
        from pathlib import Path

        from gpushare.lab_api import Supervisor, check_runnable

        READS = {"colour": "/api/v1/namespaces/default/configmaps/colour"}
        SCRIPT = "bin/colour.sh"


        class ColourRun:
            """The learner's script on the lab's fixture, in the sandbox the engine chose."""

            def __init__(self, context):
                self.tmp = Path(tempfile.mkdtemp(prefix="tinylab-"))
                sample = self.tmp / "colour.txt"
                shutil.copy(context.fixtures / "colour.txt", sample)
                self.problem = check_runnable(context.workdir / SCRIPT)
                self.result = None
                if self.problem is None:
                    with Supervisor(sandbox=context.sandbox) as runner:
                        self.result = runner.run(
                            [str((context.workdir / SCRIPT).absolute()), str(sample)],
                            cwd=context.workdir,
                            timeout=5.0,
                            output_cap=4096,
                            readable=[sample],
                        )

            def close(self):
                shutil.rmtree(self.tmp, ignore_errors=True)
        '''
    ),
    "graders/test_step1_colour.py": textwrap.dedent(
        '''\
        """Step 1: the ConfigMap says blue, and the script shouts the fixture's colour."""

        from tinylab import READS, SCRIPT, ColourRun  # noqa: F401  (READS: what step 1 reads)

        from gpushare.lab_api import T, check, fail

        BACKGROUND = {"colour_run": ColourRun}


        @check("1.1", 4)
        def test_1_1_configmap_says_blue(lab):
            cm = lab.read("colour")
            found = ((cm or {}).get("data") or {}).get("colour")
            if found != "blue":
                fail(expected="blue", found=found or T("absent"), where="ConfigMap default/colour")


        @check("1.2", 6)
        def test_1_2_script_shouts_the_colour(colour_run):
            if colour_run.problem is not None:
                fail(problem=T("colour_script_missing"), where=SCRIPT)
            out = colour_run.result.stdout.strip()
            if out != "BLUE":
                fail(expected="BLUE", found=out or T("colour_no_output"), where=SCRIPT)
        '''
    ),
    "graders/messages/en.toml": textwrap.dedent(
        """\
        [labels]
        summary_title = "tiny lab: results"
        step1 = "Colours"
        [values]
        colour_script_missing = "The script is missing or cannot be run."
        colour_no_output = "(nothing printed)"
        [checks."1.1"]
        title = "The ConfigMap says blue"
        hint = "Create ConfigMap colour in namespace default."
        [checks."1.2"]
        title = "The script prints the colour in capitals"
        hint = "Read the file named by the first argument."
        """
    ),
    "graders/messages/zh.toml": textwrap.dedent(
        """\
        [labels]
        summary_title = "小实验：结果"
        step1 = "颜色"
        [values]
        colour_script_missing = "脚本不存在或无法运行。"
        colour_no_output = "（没有输出）"
        [checks."1.1"]
        title = "ConfigMap 写的是 blue"
        hint = "在名字空间 default 中创建 ConfigMap colour。"
        [checks."1.2"]
        title = "脚本用大写打印颜色"
        hint = "读取第一个参数指定的文件。"
        """
    ),
    "graders/messages/ko.toml": textwrap.dedent(
        """\
        [labels]
        summary_title = "작은 실습: 결과"
        step1 = "색깔"
        [values]
        colour_script_missing = "스크립트가 없거나 실행할 수 없습니다."
        colour_no_output = "(출력 없음)"
        [checks."1.1"]
        title = "컨피그맵에 blue가 적혀 있음"
        hint = "네임스페이스 default에 컨피그맵 colour를 만드세요."
        [checks."1.2"]
        title = "스크립트가 색깔을 대문자로 출력함"
        hint = "첫 번째 인자로 받은 파일을 읽으세요."
        """
    ),
    "fixtures/colour.txt": "blue\n",
    "solutions/workdir/bin/colour.sh": '#!/bin/sh\ntr a-z A-Z < "$1"\n',
}


def _write_lab(root: Path) -> Path:
    for rel, text in LAB.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    script = root / "solutions/workdir/bin/colour.sh"
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return root


def _env(lab: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSHARE_")}
    env.pop("KUBECONFIG", None)
    env.update(GPUSHARE_LAB=str(lab), GPUSHARE_LANG="en")
    for name in ("GPUSHARE_CACHE", "GPUSHARE_PORTS_DIR"):  # the machine's built binaries, ports
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _run(lab: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=_env(lab),
        timeout=300,
    )


def _gpushare(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(lab, "-m", "gpushare", *args)


def _tests(results_json: Path) -> list[tuple[str, str, int, str]]:
    data = json.loads(results_json.read_text(encoding="utf-8"))
    return [(t["number"], t["status"], t["score"], t["name"]) for t in data["tests"]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    root = _write_lab(tmp_path_factory.mktemp("tinylab"))
    name = f"{TEST_CLUSTER}-tiny"  # this run's own, beside the GPU lab's
    up = _gpushare(root, "up", "--cluster", name)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield root, name
    finally:
        cluster.down(name)


def test_the_second_lab_through_every_entry_point(tiny, tmp_path):
    root, name = tiny
    client = cluster.Lab(name).client(timeout=10)
    nodes = [n["metadata"]["name"] for n in client.get("/api/v1/nodes")["items"]]
    assert nodes == ["tiny-node"], nodes  # up made the lab's one node, not the GPU lab's three

    workdir = tmp_path / "work"
    (workdir / "bin").mkdir(parents=True)

    # a fresh lab: both checks fail, in the lab's own words
    fresh = tmp_path / "fresh.json"
    proc = _gpushare(
        root, "grade", "--cluster", name, "--workdir", str(workdir), "--json", str(fresh)
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _tests(fresh) == [
        ("1.1", "failed", 0, "1.1 The ConfigMap says blue"),
        ("1.2", "failed", 0, "1.2 The script prints the colour in capitals"),
    ]
    assert "The script is missing or cannot be run." in proc.stdout
    assert "tiny lab: results" in proc.stdout

    # solved: the ConfigMap applied, the reference script in place
    client.create(
        "/api/v1/namespaces/default/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "colour"},
            "data": {"colour": "blue"},
        },
    )
    script = workdir / "bin/colour.sh"
    script.write_text(LAB["solutions/workdir/bin/colour.sh"])
    script.chmod(0o755)
    live = tmp_path / "live.json"
    proc = _gpushare(
        root,
        "grade",
        "--cluster",
        name,
        "--workdir",
        str(workdir),
        "--json",
        str(live),
        "--lang",
        "zh",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _tests(live) == [
        ("1.1", "passed", 4, "1.1 ConfigMap 写的是 blue"),
        ("1.2", "passed", 6, "1.2 脚本用大写打印颜色"),
    ]

    # pytest on the lab's graders: the same checks and the same verdicts
    via_pytest = tmp_path / "pytest.json"
    xml = tmp_path / "pytest.xml"
    proc = _run(
        root,
        "-m",
        "pytest",
        "graders",
        "--cluster",
        name,
        "--workdir",
        str(workdir),
        "--lang",
        "ko",
        "--json",
        str(via_pytest),
        "--junitxml",
        str(xml),
        cwd=root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [t[:3] for t in _tests(via_pytest)] == [t[:3] for t in _tests(live)]
    assert _tests(via_pytest)[0][3] == "1.1 컨피그맵에 blue가 적혀 있음"
    assert 'name="score" value="10"' in xml.read_text(encoding="utf-8")

    # a snapshot, graded offline, and a class of one
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    proc = _gpushare(
        root, "snapshot", "--cluster", name, "--workdir", str(workdir), "--out", str(snaps)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    snapshot = Path(proc.stdout.strip().splitlines()[-1])
    offline = tmp_path / "offline.json"
    proc = _gpushare(root, "grade", "--snapshot", str(snapshot), "--json", str(offline))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [t[:3] for t in _tests(offline)] == [t[:3] for t in _tests(live)]

    out = tmp_path / "class"
    proc = _gpushare(root, "class", "grade", str(snaps), "--out", str(out), "--lang", "en")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    graded = sorted(out.rglob("results.json"))
    assert len(graded) == 1
    assert [t[:3] for t in _tests(graded[0])] == [t[:3] for t in _tests(live)]
    assert (out / "report.html").exists()
