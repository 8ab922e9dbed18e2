"""Grading a whole class (issue 10): real snapshots from the test lab, the real command.

A class of real snapshots is captured once (the reference solution, variants of it, a fresh
lab) and graded with ``gpushare class grade`` as a subprocess: one corrupt snapshot is an error
row and the others are graded exactly as ``gpushare grade --snapshot`` grades them; a regrade
after a grader change shows whose score changed; shards merged give the unsharded CSV byte for
byte; the Indexed Job is created on the lab's real apiserver and its pods are scheduled.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from deploy import job
from deploy.pod import pod_spec, printed_objects  # make images reads the printed script so too

from gpushare.classroom import gradebook, inputs, pool, report
from gpushare.lab import binaries
from gpushare.sandbox import isolation
from tests import class_snapshots as snaps
from tests import sample_class
from tests.helpers import (
    ALL_CHECKS,
    MAX_SCORE,
    ROOT,
    _gpushare,
    discovered_checks,
    grade_snapshot,
    kubectl,
)

# Learners' scripts run in the sandbox wherever it can run; only where it cannot are they run
# without it (these are our own scripts).
UNSAFE = [] if isolation.probe().available else ["--unsafe-no-sandbox"]


def gpushare(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return _gpushare(*args, timeout=300, env=env)


def class_grade(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = gpushare("class", "grade", *args, "--lang", "en", *UNSAFE, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


@pytest.fixture(scope="module")
def snapshots(state: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real snapshots of the test lab: ada (solved), bob twice (an older one with a wrong
    table, then a newer one whose script says OK to everything), cy (no quota file), eve (a
    script that never answers), dan (a fresh lab, an empty work dir)."""
    out = tmp_path_factory.mktemp("class-snapshots")
    kubeconfig = str(state.lab.kubeconfig)
    solved = state.solve()
    found = {
        "ada": snaps.capture_variant(solved, out, "ada", kubeconfig),
        "bob-old": snaps.capture_variant(solved, out, "bob", kubeconfig, snaps.wrong_table),
        "cy": snaps.capture_variant(solved, out, "cy", kubeconfig, snaps.no_quota_file),
    }
    snaps.wait_next_second()
    found["bob"] = snaps.capture_variant(solved, out, "bob", kubeconfig, snaps.broken_script)
    found["eve"] = snaps.capture_variant(solved, out, "eve", kubeconfig, snaps.endless_script)
    state.fresh()
    empty = out / "empty-work"
    empty.mkdir()
    found["dan"] = snaps.capture_variant(empty, out, "dan", kubeconfig)
    return found


@pytest.fixture(scope="module")
def three(snapshots: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A class of three (ada, bob with two snapshots, cy whose upload was cut short)."""
    folder = tmp_path_factory.mktemp("three")
    for key in ("ada", "bob-old", "bob", "cy"):
        shutil.copy2(snapshots[key], folder / snapshots[key].name)
    snaps.truncate(folder / snapshots["cy"].name)
    return folder


@pytest.fixture(scope="module")
def graded(three: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("graded") / "class"
    proc = class_grade(str(three), "--out", str(out), "--jobs", "2")
    return out, proc.stdout


def test_a_class_of_three_with_a_corrupt_snapshot(graded, snapshots, tmp_path):
    out, stdout = graded
    rows = {r["learner"]: r for r in read_csv(out / "grades.csv")}
    assert list(rows) == ["ada", "bob", "cy"]
    # the corrupt snapshot is an error row: no score anywhere, the reason said
    cy = rows["cy"]
    assert cy["status"] == "error" and cy["score"] == "" and cy["snapshot"] == snapshots["cy"].name
    assert all(cy[k] == "" for k in cy if re.fullmatch(r"\d\.\d|step \d", k))
    assert "cy: error: the snapshot cannot be read" in stdout and "corrupt or truncated" in stdout
    results = json.loads((out / "cy" / "results.json").read_text())
    assert "score" not in results and results["extra_data"]["complete"] is False
    assert results["extra_data"]["could_not_grade_kind"] == "unreadable"
    assert results["tests"][0]["output"].startswith("Not graded: the snapshot cannot be read")
    # an instructor (or learner) of another language reads the sort of reason in theirs
    zh = report.render(gradebook.load_rows(out), gradebook.catalog(), "zh", seed=0)
    assert "快照无法读取：已损坏或被截断（" in zh
    assert "corrupt or truncated" not in zh  # the reason too is said in the report's language
    assert all("score" not in t for t in results["tests"])
    assert f'errors="{len(ALL_CHECKS)}"' in (out / "cy" / "junit.xml").read_text()
    # bob's latest snapshot is the one graded
    assert rows["bob"]["snapshot"] == snapshots["bob"].name
    # the others are graded exactly as `gpushare grade --snapshot` grades them, with the seed
    # derived from --seed (0) and the snapshot's hash
    for learner in ("ada", "bob"):
        path = snapshots[learner]
        seed = inputs.seed_for(0, inputs.describe(path).digest)
        alone = grade_snapshot(path, tmp_path, "--lang", "en", "--seed", str(seed), *UNSAFE)
        ours = json.loads((out / learner / "results.json").read_text())
        assert ours["extra_data"]["seed"] == seed
        assert rows[learner]["score"] == str(alone.results["score"])
        assert [(t["number"], t["status"], t["output"]) for t in ours["tests"]] == [
            (t["number"], t["status"], t["output"]) for t in alone.results["tests"]
        ]
        for t in ours["tests"]:
            assert rows[learner][t["number"]] == str(t["score"])
        assert (out / learner / "junit.xml").is_file()
    assert rows["bob"]["status"] == "failed" and int(rows["bob"]["score"]) < 100
    assert int(rows["bob"]["step 6"]) < int(rows["ada"]["step 6"])
    # the page: self-contained, plots inline, the failure reasons with example learners
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 3 and "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "corrupt or truncated" in page and "Most common failure reasons" in page
    assert re.search(r"<td>[^<]+</td><td class='n'>1</td><td><a href=\"bob/results.json\">", page)


def test_the_report_honours_the_visibility_policy(graded, three, tmp_path):
    """Step 6 hidden: no results.json names an unseen case or its seed, while the grade without
    a policy does (bob's script fails them); the page says the checks' details are not shown."""
    before, _ = graded
    bob = json.loads((before / "bob" / "results.json").read_text())
    unseen = next(t for t in bob["tests"] if t["number"] == "6.5")["output"]
    case = re.search(r"first failing case: (\S+)", unseen)
    assert case, unseen
    # the page groups it by its problem, each learner's own values (the case) said as "…"
    shown = (before / "report.html").read_text()
    assert "first failing case: …" in shown and case[1] not in shown
    policy = tmp_path / "policy.toml"
    policy.write_text('[steps.6]\nvisibility = "hidden"\n')
    out = tmp_path / "hidden"
    class_grade(str(three), "--out", str(out), "--policy", str(policy))
    page = (out / "report.html").read_text()
    assert case[1] not in page and "are not shown (your instructor" in page
    for learner in ("ada", "bob"):
        assert case[1] not in (out / learner / "results.json").read_text()
    assert (out / "grades.csv").read_bytes() == (before / "grades.csv").read_bytes()


def test_a_grade_past_its_time_limit_is_an_error_row_and_the_others_go_on(
    graded, snapshots, tmp_path
):
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for key in ("ada", "eve"):
        shutil.copy2(snapshots[key], folder / snapshots[key].name)
    out = tmp_path / "class"
    started = time.monotonic()
    proc = class_grade(str(folder), "--out", str(out), "--timeout", "2", "--jobs", "2")
    assert time.monotonic() - started < 60
    rows = {r["learner"]: r for r in read_csv(out / "grades.csv")}
    assert rows["eve"]["status"] == "error" and rows["eve"]["score"] == ""
    assert rows["eve"]["1.1"] == "2"  # the checks that finished keep their results
    results = json.loads((out / "eve" / "results.json").read_text())
    assert results["extra_data"]["timed_out"] is True
    assert "time limit" in results["extra_data"]["could_not_grade"]
    assert "eve: error: the time limit (" in (proc.stdout)
    before = read_csv(graded[0] / "grades.csv")  # ada as the class of three graded her
    assert before[0]["learner"] == "ada"
    # her grade is the same; her flags are the class's (eve's cluster.json, captured from the
    # same solved lab, is ada's byte for byte unless kwok wrote to it between the captures)
    grade = {k: v for k, v in rows["ada"].items() if k != "flags"}
    assert grade == {k: v for k, v in before[0].items() if k != "flags"}
    # nothing of eve's script outlives the grade (its worker retired; the runs ended with it)
    deadline = time.monotonic() + 15
    while _endless() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _endless()


def _endless() -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if tuple(proc.info["cmdline"] or ()) == snaps.ENDLESS:
            found.append(proc.pid)
    return found


def test_latest_snapshot_per_learner_or_all(snapshots):
    found = [inputs.describe(p) for p in snapshots.values()]
    latest = inputs.select(found)
    assert [s.learner for s in latest] == ["ada", "bob", "cy", "dan", "eve"]
    assert next(s for s in latest if s.learner == "bob").path == snapshots["bob"]
    every = inputs.select(found, every=True)
    assert len(every) == 6
    assert len({s.folder(True) for s in every}) == 6
    # a shard takes its part of the same list; together they take each exactly once
    parts = [inputs.shard(latest, i, 3) for i in range(3)]
    assert sorted(s.path for part in parts for s in part) == sorted(s.path for s in latest)


def test_previous_shows_the_changed_scores_after_a_grader_change(graded, three, tmp_path):
    before, _ = graded
    graders = tmp_path / "graders"
    shutil.copytree(ROOT / "graders", graders, ignore=shutil.ignore_patterns("__pycache__"))
    step7 = graders / "test_step7_mps_isolation.py"
    source = step7.read_text()
    head = "def test_7_1_mps_config(lab: LabState) -> None:\n"
    assert head in source
    step7.write_text(
        source.replace(head, head + '    fail(expected="a stricter grader", found="this")\n')
    )
    after = tmp_path / "regraded"
    proc = class_grade(
        str(three),
        "--out",
        str(after),
        "--previous",
        str(before),
        env={"GPUSHARE_GRADERS": str(graders)},
    )
    old = {r["learner"]: r for r in read_csv(before / "grades.csv")}
    new = {r["learner"]: r for r in read_csv(after / "grades.csv")}
    for learner in ("ada", "bob"):
        assert old[learner]["7.1"] == "4" and new[learner]["7.1"] == "0"
        was, now = old[learner]["score"], new[learner]["score"]
        assert int(now) == int(was) - 4
        assert f"  {learner}: {was} -> {now} (-4)  7.1 passed->failed" in proc.stdout
    assert "2 changed since" in proc.stdout and "  cy:" not in proc.stdout.split("changed")[1]
    page = (after / "report.html").read_text()
    assert "Regrade: changes since" in page and page.count('class="down">-4</span>') == 2


def test_shards_merged_give_the_csv_of_one_run(graded, three, tmp_path):
    """Three pods' shards, run at once, merged: the very bytes of the one run of ``graded``
    (an earlier process: the seeds depend on the snapshots alone)."""
    whole, _ = graded
    shards = [tmp_path / f"shard-{i}" for i in range(3)]
    environ = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    command = [sys.executable, "-m", "gpushare", "class", "grade", str(three), "--jobs", "1"]
    command += ["--lang", "en", *UNSAFE]
    running = [
        subprocess.Popen(
            [*command, "--out", str(out), "--shard", f"{i}/3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=environ,
        )
        for i, out in enumerate(shards)
    ]
    for proc in running:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    graded_by = [sorted(p.name for p in s.iterdir() if p.is_dir()) for s in shards]
    assert sorted(n for names in graded_by for n in names) == ["ada", "bob", "cy"]
    assert all(graded_by), graded_by
    merged = tmp_path / "merged"
    proc = gpushare(
        "class", "merge", *map(str, shards), "--out", str(merged), "--previous", str(whole)
    )
    assert proc.returncode == 0, proc.stderr
    assert (merged / "grades.csv").read_bytes() == (whole / "grades.csv").read_bytes()
    assert "no change since" in proc.stdout
    assert (merged / "report.html").is_file() and (merged / "ada" / "results.json").is_file()
    assert json.loads((merged / "class.json").read_text())["seed"] == 0
    assert "seed 0" in (merged / "report.html").read_text()
    # a learner graded by two shards is refused, not counted twice
    proc = gpushare("class", "merge", str(shards[0]), str(whole), "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "graded by two shards" in proc.stderr
    # shards of another seed judged other unseen cases: refused, whatever --seed says
    proc = gpushare(
        "class", "merge", *map(str, shards), "--out", str(tmp_path / "y"), "--seed", "5"
    )
    assert proc.returncode == 2 and "graded with --seed 0" in proc.stderr, proc.stderr
    other = tmp_path / "shard-0-seed-5"
    class_grade(str(three), "--jobs", "1", "--out", str(other), "--shard", "0/3", "--seed", "5")
    assert json.loads((other / "class.json").read_text())["seed"] == 5
    proc = gpushare(
        "class", "merge", str(other), *map(str, shards[1:]), "--out", str(tmp_path / "z")
    )
    assert proc.returncode == 2 and "different --seed values" in proc.stderr, proc.stderr
    # a learner folder moved in from another run without its class.json is caught by its seed
    (other / "class.json").unlink()
    proc = gpushare(
        "class", "merge", str(other), *map(str, shards[1:]), "--out", str(tmp_path / "w")
    )
    assert proc.returncode == 2 and "was not graded with --seed 0" in proc.stderr, proc.stderr
    assert not (tmp_path / "w").exists()
    # a learner's results.json the merge cannot read (cut short, another uid's 0600 file) is
    # refused, never a smaller class that exits 0
    cut = tmp_path / "shard-cut"
    shutil.copytree(shards[1], cut)
    (next(cut.glob("*/results.json"))).write_text('{"score": 1', encoding="utf-8")
    proc = gpushare(
        "class", "merge", str(shards[0]), str(cut), str(shards[2]), "--out", str(tmp_path / "v")
    )
    assert proc.returncode == 2 and "cannot read" in proc.stderr, proc.stderr
    assert not (tmp_path / "v").exists()


def _work(task: str) -> tuple[str, bool]:
    """A worker's task for the pool test: finish, hang, or die."""
    if task == "hang":
        time.sleep(600)
    if task == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"done {task}", False


def test_a_hung_or_dead_worker_costs_its_submission_only():
    results: dict[int, str] = {}
    failures: dict[int, str] = {}
    started = time.monotonic()
    pool.run(
        ["ok", "hang", "die", "ok", "ok", "ok"],
        _work,
        jobs=2,
        limit=1.5,
        on_result=lambda i, r, s: results.__setitem__(i, r),
        on_failure=lambda i, kind, why, s: failures.__setitem__(i, f"{kind}: {why}"),
    )
    assert time.monotonic() - started < 10
    assert results == {0: "done ok", 3: "done ok", 4: "done ok", 5: "done ok"}
    assert failures[1] == "hung: the grade ran past the hard limit of 1.5 s"
    assert failures[2] == "died: the grading process was killed (SIGKILL)"


def _printed(*extra: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "deploy.job", "--image", "registry.example/gpushare:0.1.0",
         "--shards", "3", "--expect", "6", "--lang", "en", *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _wait_scheduled(lab, ns: str, count: int) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = json.loads(kubectl(lab, "get", "pods", "-n", ns, "-o", "json").stdout)["items"]
        if len(pods) == count and all(p["spec"].get("nodeName") for p in pods):
            break
        time.sleep(0.5)
    return pods


def _as_pod(name: str, template: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": template["spec"]}


def test_the_whole_procedure_is_accepted_and_its_pods_scheduled(lab, tmp_path):
    """Every object the printed procedure creates, created server-side on the lab's apiserver:
    the claims bound by its controller manager to volumes the test provides, the loader, the
    three grading pods, the merge's pod and the retriever placed by its scheduler; and the
    Pod Security levels docs/operator.md states, as the apiserver's admission judges them."""
    ns = f"class-{os.getpid()}"
    klass = f"gpushare-class-{os.getpid()}"
    script = _printed("--namespace", ns, "--storage-class", klass)
    blocks = printed_objects(script)
    assert [[d["kind"] for d in b] for b in blocks] == [
        ["Namespace"],
        ["PersistentVolumeClaim", "PersistentVolumeClaim"],
        ["Pod"],
        ["Job"],
        ["Job"],
        ["Pod"],
    ]
    _namespace, _claims, (loader,), (grade,), (merge,), (retriever,) = blocks
    # the order of the script: nothing grades before the loader marked the snapshots complete
    marks = [script.index(s) for s in (
        "# 0. The namespace", "k apply", "serviceaccount default", "# 1. The claims",
        "touch /snapshots/.gpushare-ready",
        "# 3. The Indexed Job", "wait_job gpushare-class\n", "# 4. The merge",
        "wait_job gpushare-class-merge", "# 5. The results out", "tar -xf - -C \"$OUT\"",
    )]  # fmt: skip
    assert marks == sorted(marks)
    template = grade["spec"]["template"]
    command = template["spec"]["containers"][0]["command"]
    assert command[:4] == ["gpushare", "class", "grade", "/snapshots"]
    assert "$(JOB_COMPLETION_INDEX)/3" in command and command[command.index("--expect") + 1] == "6"
    (init,) = template["spec"]["initContainers"]
    assert "/snapshots/.gpushare-ready" in init["command"][-1]
    assert merge["spec"]["template"]["spec"]["containers"][0]["command"][3:] == [
        "/results/shard-0", "/results/shard-1", "/results/shard-2", "--out", "/results/class"
    ]  # fmt: skip
    images = {c["image"] for b in blocks[2:] for d in b for c in _containers(d)}
    assert images == {"registry.example/gpushare:0.1.0"}
    volumes = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{klass}-{name}"},
            "spec": {
                "storageClassName": klass,
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "hostPath": {"path": f"/srv/{klass}/{name}"},
            },
        }
        for name in ("snapshots", "results")
    ]
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(yaml.safe_dump_all(volumes + [d for b in blocks for d in b]))
    kubectl(lab, "create", "namespace", ns)
    strict = {level: f"{ns}-{level}" for level in ("restricted", "baseline")}
    try:
        kubectl(lab, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=privileged")
        applied = kubectl(lab, "apply", "--server-side", "-f", str(manifest), check=False)
        assert applied.returncode == 0, applied.stderr
        pods = _wait_scheduled(lab, ns, 6)  # loader, 3 graders, the merge, retriever
        assert len(pods) == 6 and all(
            p["spec"].get("nodeName", "").startswith("lab-node-") for p in pods
        ), [(p["metadata"]["name"], p.get("status")) for p in pods]
        graders = [p for p in pods if p["metadata"]["labels"].get("job-name") == "gpushare-class"]
        indexes = sorted(
            p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            for p in graders
        )
        assert indexes == ["0", "1", "2"]
        got = json.loads(kubectl(lab, "get", "pvc", "-n", ns, "-o", "json").stdout)["items"]
        assert sorted(c["status"]["phase"] for c in got) == ["Bound", "Bound"]
        got = json.loads(
            kubectl(lab, "get", "job", "gpushare-class", "-n", ns, "-o", "json").stdout
        )
        assert got["spec"]["completionMode"] == "Indexed" and got["spec"]["completions"] == 3
        assert got["spec"]["backoffLimitPerIndex"] == 1
        assert got["spec"]["podFailurePolicy"]["rules"][0]["action"] == "FailIndex"
        # the script's own waits, on the Jobs' real status (kwok completes their pods without
        # running them): its functions as printed, our kubectl, the lab's kubeconfig
        head = script[script.index("k() {") : script.index('found="$(')]
        for name in ("gpushare-class", "gpushare-class-merge"):
            waited = subprocess.run(
                ["bash", "-c", f"set -euo pipefail\n{head}\nwait_job {name}"],
                capture_output=True,
                text=True,
                timeout=120,
                env={
                    **os.environ,
                    "KUBECTL": str(binaries.find("kubectl")),
                    "KUBECONFIG": str(lab.kubeconfig),
                },
            )
            assert waited.returncode == 0, waited.stderr
            assert waited.stdout == f"Job {name}: complete\n"
        # Pod Security: the helpers pass "restricted"; the graders need "privileged"
        for level, name in strict.items():
            kubectl(lab, "create", "namespace", name)
            kubectl(lab, "label", "namespace", name, f"pod-security.kubernetes.io/enforce={level}")
        helpers = [loader, retriever, _as_pod("merge", merge["spec"]["template"])]
        for pod in helpers:
            path = tmp_path / f"{pod['metadata']['name']}.yaml"
            path.write_text(yaml.safe_dump({**pod, "metadata": {"name": "x"}}))
            made = kubectl(
                lab, "create", "--dry-run=server", "-n", strict["restricted"], "-f", str(path),
                check=False,
            )  # fmt: skip
            assert made.returncode == 0, (pod["metadata"]["name"], made.stderr)
        path = tmp_path / "grader.yaml"
        path.write_text(yaml.safe_dump(_as_pod("grader", template)))
        made = kubectl(
            lab, "create", "--dry-run=server", "-n", strict["baseline"], "-f", str(path),
            check=False,
        )  # fmt: skip
        assert made.returncode != 0 and "violates PodSecurity" in made.stderr, made.stderr
        assert "seccompProfile" in made.stderr
    finally:
        for name in (ns, *strict.values()):
            kubectl(lab, "delete", "namespace", name, "--wait=false", check=False)
        names = [v["metadata"]["name"] for v in volumes]
        kubectl(lab, "delete", "pv", *names, "--wait=false", check=False)


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc["spec"]["template"]["spec"] if doc["kind"] == "Job" else doc["spec"]
    return spec["containers"] + spec.get("initContainers", [])


def test_the_printed_script_refuses_a_folder_of_another_count(tmp_path):
    """The first thing the script does, before any kubectl: count the local folder."""
    script = tmp_path / "class-job.sh"
    script.write_text(_printed())
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("a", "b"):
        shutil.copy2(ROOT / "examples/reference.gpushare.tgz", folder / f"{name}.gpushare.tgz")
    env = {**os.environ, "KUBECTL": "/bin/false"}
    proc = subprocess.run(
        ["bash", str(script), str(folder)], capture_output=True, text=True, env=env, timeout=30
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"class-job: expected 6 *.gpushare.tgz in {folder}, found 2\n"


def test_expect_refuses_a_class_of_another_size_in_one_line(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("reference", "mistakes"):
        shutil.copy2(ROOT / f"examples/{name}.gpushare.tgz", folder)
    for expect, why in (("3", "still running"), ("1", "rest")):
        out = tmp_path / f"out-{expect}"
        proc = gpushare("class", "grade", str(folder), "--out", str(out), "--expect", expect)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"--expect {expect}: {folder} holds 2 snapshot files" in proc.stderr
        assert why in proc.stderr and not out.exists()
    out = tmp_path / "out"
    proc = class_grade(str(folder), "--out", str(out), "--expect", "2", "--jobs", "1")
    assert len(read_csv(out / "grades.csv")) == 2


@pytest.mark.skipif(not isolation.probe().available, reason="needs bubblewrap to run")
def test_a_merge_without_a_writable_tmp_or_home_still_writes_the_report(tmp_path):
    """The merge in a read-only root with no writable /tmp nor home (bubblewrap makes one):
    report.html is written with nothing else to write to (no plotting library's cache)."""
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("reference", "mistakes"):
        shutil.copy2(ROOT / f"examples/{name}.gpushare.tgz", folder)
    shards = [tmp_path / f"shard-{i}" for i in range(2)]
    for i, shard in enumerate(shards):
        class_grade(str(folder), "--out", str(shard), "--shard", f"{i}/2", "--jobs", "1")
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    env.update(HOME="/nonexistent", TMPDIR="/nonexistent")
    proc = subprocess.run(
        [
            "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--bind", str(out), str(out), "--chdir", "/", "--",
            sys.executable, "-m", "gpushare", "class", "merge", *map(str, shards),
            "--out", str(out / "class"),
        ],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / "class" / "report.html").read_text().count("<svg") == 3
    assert sorted(p.name for p in (out / "class").iterdir() if p.name.startswith(".")) == []


def test_the_job_command_is_the_class_grade_of_one_shard():
    objects = job.manifests(image="img", shards=4, grade_args=["--seed", "9"], claims=False)
    assert [o["kind"] for o in objects] == ["Job"]
    command = pod_spec(objects)["containers"][0]["command"]
    assert shlex.join(command) == (
        "gpushare class grade /snapshots --out '/results/shard-$(JOB_COMPLETION_INDEX)' "
        "--shard '$(JOB_COMPLETION_INDEX)/4' --seed 9"
    )


def test_an_error_row_says_its_sort_of_reason_in_the_report_language():
    """A results.json of an ungradable submission, as a class grade writes it: the sort of
    reason in the report's language, then the technical reason; a sort we have no words for
    (a newer gpushare's) is left out rather than failing the report."""

    def row(kind: str) -> gradebook.Row:
        extra = {"complete": False, "could_not_grade": "x.gpushare.tgz was altered after capture"}
        return gradebook.row_from_results(
            "ann", {"extra_data": {**extra, "could_not_grade_kind": kind}}
        )

    assert report.reason_said(row("altered"), "ko").startswith("스냅샷이 생성된 뒤에 변경됨(")
    assert report.reason_said(row("altered"), "zh").startswith("快照在生成之后被修改过（x.gpushare")
    assert report.reason_said(row("someday"), "zh") == "x.gpushare.tgz was altered after capture"


def test_an_error_row_says_its_whole_reason_in_each_language(tmp_path):
    """Review 2: the reasons of a submission that could not be graded were English in zh and ko.
    The reason travels as a translatable value in results.json: the learner reads it in their
    language, and a report in another language says it in its own."""
    from gpushare.classroom import batch
    from gpushare.reports.messages import T, render_value

    checks = [gradebook.CheckInfo("1.1", 1, 2)]
    made = gradebook.error_results(
        tmp_path / "ann.gpushare.tgz",
        "/x/ann.gpushare.tgz was altered after capture (sha256 mismatch: work/k8s/a.yaml)",
        "cluster",
        lang="zh",
        seed=1,
        checks=checks,
        why="altered",
        detail=T("snapshot_altered", members=("work/k8s/a.yaml",)),
    ).as_json()
    said = "快照在生成之后被修改过（sha256 不一致：work/k8s/a.yaml）"
    first, note = made["tests"][0]["output"].splitlines()
    assert first == f"未评分：{said}" and note == render_value(T("grader_side"), "zh")
    assert made["output"].startswith(f"无法评分：{said}。这不是分数：")
    row = gradebook.row_from_results("ann", made)
    assert report.reason_said(row, "zh") == said
    assert (
        report.reason_said(row, "ko")
        == "스냅샷이 생성된 뒤에 변경됨(sha256 불일치: work/k8s/a.yaml)"
    )
    assert report.reason_said(row, "en") == (
        "the snapshot was changed after it was captured (sha256 mismatch: work/k8s/a.yaml)"
    )
    # a worker that gave no result, as the pool says it
    hung = batch._ended_detail(pool.HUNG, "the grade ran past the hard limit of 75 s", 75.0)
    killed = batch._ended_detail(pool.DIED, "the grading process was killed (SIGKILL)", 75.0)
    ended = batch._ended_detail(
        pool.DIED, "the grading process ended unexpectedly (exit status 3)", 75.0
    )
    from gpushare.reports.messages import render_value

    assert render_value(hung, "zh") == "评分超过了 75 秒的硬性上限"
    assert render_value(hung, "en") == "grading took longer than its hard limit of 75 s"
    assert render_value(killed, "ko") == "채점 프로세스가 강제 종료됨(SIGKILL)"
    assert render_value(ended, "en") == "the process grading it ended unexpectedly (exit status 3)"


def test_a_damaged_snapshot_says_why_in_each_language(tmp_path):
    """A real SnapshotError from a file that is not a snapshot: the technical English message
    for the command line, the same reason without the path for everyone else."""
    from gpushare.reports.messages import render_value
    from gpushare.submissions import snapshot

    bad = tmp_path / "bob.gpushare.tgz"
    bad.write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    with pytest.raises(snapshot.SnapshotError) as caught:
        snapshot.load(bad, tmp_path / "scratch")
    assert "corrupt or truncated" in str(caught.value) and str(bad) in str(caught.value)
    zh = render_value(caught.value.detail, "zh")
    assert zh.startswith("快照无法读取：已损坏或被截断（") and str(tmp_path) not in zh
    assert render_value(caught.value.detail, "ko").startswith(
        "스냅샷을 읽을 수 없음: 손상되었거나 잘림("
    )


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        # the problem the feedback names first
        ("文件不存在。\n位置：out/isolation.txt\n提示：…", "文件不存在。"),
        # no problem line: what was found, never the expected value everyone was told
        ("预期：ConfigMap 存在\n实际：不存在\n位置：ConfigMap x\n提示：…", "实际：不存在"),
        ("기댓값: replicas: 4\n실제값: replicas: 1\n힌트: …", "실제값: replicas: 1"),
        (
            "Expected: exit code 1\nFound: exit code 0, output: OK\nHint: …",
            "Found: exit code 0, output: OK",
        ),
        # nothing found to show: the first line it has
        ("Expected: no nvidia.com/gpu\nHint: …", "Expected: no nvidia.com/gpu"),
        # a submission's own seed does not split one reason into many
        ("2 of 9 unseen cases wrong (seed 123456789)", "2 of 9 unseen cases wrong (seed …)"),
    ],
)
def test_a_failure_is_counted_under_its_problem_or_what_was_found(output, reason):
    from gpushare.classroom import feedback

    cell = gradebook.Cell("1.3", 1, 2, 0, False, "", output)
    assert feedback.reason(cell) == reason


def test_the_sample_class_grades_and_flags_as_its_readme_says(tmp_path):
    """examples/class (made by tests/sample_class.py from real labs): each learner's row
    scores what their mistakes cost; the dry run flags the copy pair as one group and the late
    learner, the corrupt upload is an error row, and no one else is flagged (each learner's
    cluster is their own: no "everyone copied")."""
    folder = ROOT / "examples" / "class"
    readme = (folder / "README.md").read_text(encoding="utf-8")
    deadline = re.search(r"--deadline (\S+)", readme)
    assert deadline, readme
    files = sorted(folder.glob(f"*/*{inputs.SUFFIX}"))
    assert sum(f.stat().st_size for f in files) < 96 * 1024  # small enough to ship
    out = tmp_path / "class"
    proc = class_grade(str(folder), "--out", str(out), "--deadline", deadline[1], "--jobs", "2")
    rows = {r["learner"]: r for r in read_csv(out / "grades.csv")}
    learners = {x.name: x for x in sample_class.LEARNERS}
    assert list(rows) == sorted(learners)
    points = discovered_checks()
    for name, learner in learners.items():
        row = rows[name]
        if learner.corrupt:
            assert row["status"] == "error" and row["score"] == "", row
            continue
        results = json.loads((out / name / "results.json").read_text())
        failed = {t["number"] for t in results["tests"] if t["status"] != "passed"}
        assert failed == sample_class.expected(learner), name
        assert int(row["score"]) == MAX_SCORE - sum(points[n] for n in failed), name
    flagged = {name: row["flags"] for name, row in rows.items() if row["flags"]}
    assert flagged == {
        "ada": "same_files#1",
        "emre": "same_files#1",
        "farah": "after_deadline",
    }, flagged
    assert "  #1 same_files: bin/check-request.sh, " in proc.stdout
    assert ", …: ada, emre\n" in proc.stdout
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count("<td>ada, emre</td>") == 1 and "reference_cluster" not in page
