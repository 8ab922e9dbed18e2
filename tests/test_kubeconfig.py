"""Grading any cluster truthfully (issue 8): kubeconfigs as kubectl reads them, and a grader
that cannot read is "could not grade" (exit 2, no score), never the learner's failure.

Every kubeconfig here logs in as a real ServiceAccount of the test lab, with a real token from
the TokenRequest API, and each grade goes through both entry points.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest
import yaml

from gpushare.lab import cluster
from tests.helpers import ALL_CHECKS, MAX_SCORE, ROOT

GRADER_NS = "gpushare-grader"
READER = "grader"  # may read what the graders read, and dry-run pods
NOBODY = "nobody"  # may read nothing

READ_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "namespaces"], "verbs": ["get", "list"]},
    {
        "apiGroups": [""],
        "resources": ["configmaps", "pods", "resourcequotas"],
        "verbs": ["get", "list"],
    },
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},  # the dry-run
]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PATH"] = os.path.dirname(sys.executable) + ":" + env["PATH"]
    env.update(extra)
    return env


def _token(client, name: str) -> str:
    """A ServiceAccount token from the TokenRequest API (what `kubectl create token` does)."""
    answer = client.create(
        f"/api/v1/namespaces/{GRADER_NS}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(answer["status"]["token"])


@pytest.fixture(scope="module")
def accounts(lab, client):
    """Two ServiceAccounts outside the lab's namespaces (reset leaves kube-system alone, and
    this namespace is re-created if a reset removed it): tokens for a reader and a nobody."""

    def ensure() -> dict[str, str]:
        for path, body in [
            ("/api/v1/namespaces", {"metadata": {"name": GRADER_NS}}),
            (
                f"/api/v1/namespaces/{GRADER_NS}/serviceaccounts",
                {"metadata": {"name": READER}},
            ),
            (
                f"/api/v1/namespaces/{GRADER_NS}/serviceaccounts",
                {"metadata": {"name": NOBODY}},
            ),
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                {"metadata": {"name": "gpushare-grader"}, "rules": READ_RULES},
            ),
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                {
                    "metadata": {"name": "gpushare-grader"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "gpushare-grader",
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": READER, "namespace": GRADER_NS}
                    ],
                },
            ),
        ]:
            try:
                client.create(path, body)
            except Exception as exc:  # already there
                if "409" not in str(exc):
                    raise
        return {READER: _token(client, READER), NOBODY: _token(client, NOBODY)}

    return ensure


def _lab_cluster_entry(lab) -> dict:
    """server and CA data of the lab, as a kubeconfig ``cluster`` entry."""
    doc = yaml.safe_load(lab.kubeconfig.read_text())
    entry = dict(doc["clusters"][0]["cluster"])
    ca = entry.pop("certificate-authority", None)
    if ca:
        entry["certificate-authority-data"] = base64.b64encode(Path(ca).read_bytes()).decode()
    return entry


def _kubeconfig(path: Path, *, clusters, users, contexts, current=None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [
            {"name": n, "context": {"cluster": c, "user": u}} for n, (c, u) in contexts.items()
        ],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


def _grade(entry: str, workdir: Path, out: Path, *args: str, env=None):
    js, xml = out / f"{entry}.json", out / f"{entry}.xml"
    common = ["--workdir", str(workdir), "--seed", "3", "--lang", "en"]
    common += ["--json", str(js), "--junitxml", str(xml), *args]
    if entry == "cli":
        cmd = [sys.executable, "-m", "gpushare", "grade", *common]
    else:
        cmd = [sys.executable, "-m", "pytest", "graders", "-p", "no:cacheprovider", "-q"]
        cmd += common
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=ROOT, env=env or _env(), timeout=180
    )
    results = json.loads(js.read_text()) if js.exists() else None
    junit = ET.parse(xml).getroot() if xml.exists() else None
    return proc, results, junit


def _props(junit) -> dict[str, str]:
    suite = junit if junit.tag == "testsuite" else junit.find("testsuite")
    return {p.get("name"): p.get("value") for p in suite.find("properties")}


def _assert_full_score(proc, results, junit, *, context: str, user: str) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert results["score"] == results["max_score"] == MAX_SCORE
    graded = results["extra_data"]["cluster"]
    assert graded["context"] == context and graded["user"] == user
    assert graded["server"].startswith("https://127.0.0.1:")
    assert _props(junit)["context"] == context


ENTRIES = ["cli", "pytest"]


@pytest.mark.parametrize("entry", ENTRIES)
def test_exec_plugin_kubeconfig(lab, state, accounts, tmp_path, entry):
    workdir = state.solve()
    token = accounts()[READER]
    plugin = tmp_path / "credential-plugin"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    plugin.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(credential)}\nEOF\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "interactiveMode": "Never",
        }
    }
    kc = _kubeconfig(
        tmp_path / "exec.kubeconfig",
        clusters={"lab": _lab_cluster_entry(lab)},
        users={"sa-exec": exec_user},
        contexts={"graded": ("lab", "sa-exec")},
        current="graded",
    )
    proc, results, junit = _grade(entry, workdir, tmp_path, "--kubeconfig", str(kc))
    _assert_full_score(proc, results, junit, context="graded", user="sa-exec")
    if entry == "cli":  # the terminal footer names what was graded
        assert f"kubeconfig={kc}" in proc.stdout and "user=sa-exec" in proc.stdout


@pytest.mark.parametrize("entry", ENTRIES)
def test_token_file_relative_to_the_kubeconfig(lab, state, accounts, tmp_path, entry):
    workdir = state.solve()
    folder = tmp_path / "conf"
    (folder / "secrets").mkdir(parents=True)
    (folder / "secrets" / "token").write_text(accounts()[READER] + "\n")
    kc = _kubeconfig(
        folder / "config",
        clusters={"lab": _lab_cluster_entry(lab)},
        users={"sa-file": {"tokenFile": "secrets/token"}},
        contexts={"tf": ("lab", "sa-file")},
        current="tf",
    )
    # run from elsewhere: the path is relative to the kubeconfig, not to the working dir
    proc, results, junit = _grade(entry, workdir, tmp_path, "--kubeconfig", str(kc))
    _assert_full_score(proc, results, junit, context="tf", user="sa-file")


@pytest.mark.parametrize("entry", ENTRIES)
def test_kubeconfig_list_is_merged_like_kubectl(lab, state, accounts, tmp_path, entry):
    """KUBECONFIG=a:b, no --kubeconfig: the context and cluster in one file, the user in the
    other; b's current-context is ignored because a sets one first."""
    workdir = state.solve()
    a = _kubeconfig(
        tmp_path / "a.yaml",
        clusters={"lab": _lab_cluster_entry(lab)},
        users={},
        contexts={"merged": ("lab", "sa-token")},
        current="merged",
    )
    b = _kubeconfig(
        tmp_path / "b.yaml",
        clusters={"elsewhere": {"server": "https://127.0.0.1:1"}},
        users={"sa-token": {"token": accounts()[READER]}},
        contexts={"wrong": ("elsewhere", "sa-token")},
        current="wrong",
    )
    env = _env(KUBECONFIG=f"{a}:{b}")
    proc, results, junit = _grade(entry, workdir, tmp_path, env=env)
    _assert_full_score(proc, results, junit, context="merged", user="sa-token")
    assert results["extra_data"]["cluster"]["kubeconfig_source"] == "KUBECONFIG"


@pytest.mark.parametrize("entry", ENTRIES)
def test_context_flag_picks_the_context(lab, state, accounts, tmp_path, entry):
    workdir = state.solve()
    kc = _kubeconfig(
        tmp_path / "two.kubeconfig",
        clusters={"lab": _lab_cluster_entry(lab), "dead": {"server": "https://127.0.0.1:1"}},
        users={"sa": {"token": accounts()[READER]}},
        contexts={"good": ("lab", "sa"), "bad": ("dead", "sa")},
        current="bad",
    )
    proc, results, junit = _grade(
        entry, workdir, tmp_path, "--kubeconfig", str(kc), "--context", "good"
    )
    _assert_full_score(proc, results, junit, context="good", user="sa")


@pytest.mark.parametrize("entry", ENTRIES)
def test_no_read_rights_is_could_not_grade(lab, state, accounts, tmp_path, entry):
    """Every read refused (403): exit 2, no score anywhere, errors not failures."""
    workdir = state.solve()
    kc = _kubeconfig(
        tmp_path / "nobody.kubeconfig",
        clusters={"lab": _lab_cluster_entry(lab)},
        users={"nobody": {"token": accounts()[NOBODY]}},
        contexts={"n": ("lab", "nobody")},
        current="n",
    )
    proc, results, junit = _grade(entry, workdir, tmp_path, "--kubeconfig", str(kc))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "score" not in results
    assert all("score" not in t for t in results["tests"])
    assert results["extra_data"]["complete"] is False
    reason = results["extra_data"]["could_not_grade"]
    assert "403" in reason and "forbidden" in reason.lower() and "GET /api/v1/" in reason
    assert "Could not grade" in results["output"]
    suite = junit if junit.tag == "testsuite" else junit.find("testsuite")
    errors = int(suite.get("errors"))
    cluster_checks = [t for t in results["tests"] if t["extra_data"]["could_not_grade"]]
    assert errors == len(cluster_checks) > 20
    assert _props(junit)["score"] == ""
    if entry == "cli":
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "could not grade" in lines[0] and "403" in lines[0]
        assert proc.stdout == ""


def test_interactive_login_is_exit_2_with_one_line(tmp_path):
    kc = _kubeconfig(
        tmp_path / "interactive.kubeconfig",
        clusters={"c": {"server": "https://127.0.0.1:1"}},
        users={
            "person": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "kubelogin",
                    "interactiveMode": "Always",
                }
            }
        },
        contexts={"x": ("c", "person")},
        current="x",
    )
    for entry in ENTRIES:
        proc, results, _ = _grade(entry, tmp_path, tmp_path, "--kubeconfig", str(kc))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert results is None
        text = proc.stderr if entry == "cli" else proc.stdout + proc.stderr
        assert "interactive login" in text and "Traceback" not in text


def test_failing_exec_plugin_is_exit_2_and_says_why(tmp_path):
    plugin = tmp_path / "broken-plugin"
    plugin.write_text("#!/bin/sh\necho 'token expired, run sso login' >&2\nexit 3\n")
    plugin.chmod(0o755)
    kc = _kubeconfig(
        tmp_path / "broken.kubeconfig",
        clusters={"c": {"server": "https://127.0.0.1:1"}},
        users={
            "u": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "command": str(plugin),
                }
            }
        },
        contexts={"x": ("c", "u")},
        current="x",
    )
    proc, _, _ = _grade("cli", tmp_path, tmp_path, "--kubeconfig", str(kc))
    assert proc.returncode == 2
    assert "exec credential plugin" in proc.stderr and "token expired" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_kubeconfig_env_is_not_ignored_and_collection_starts_nothing(tmp_path):
    """KUBECONFIG names a cluster that does not answer: both entry points say so (exit 2)
    instead of grading the local lab; --collect-only starts nothing at all."""
    dead = _kubeconfig(
        tmp_path / "dead.kubeconfig",
        clusters={"c": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}},
        users={"u": {"token": "x"}},
        contexts={"x": ("c", "u")},
        current="x",
    )
    unused = f"gpushare-never-{os.getpid()}"
    env = _env(KUBECONFIG=str(dead), GPUSHARE_CLUSTER=unused)
    for entry in ENTRIES:
        proc, _, _ = _grade(entry, tmp_path, tmp_path, env=env)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "127.0.0.1:1" in proc.stdout + proc.stderr
    env.pop("KUBECONFIG")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "graders",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(ALL_CHECKS)} tests collected" in proc.stdout
    assert not cluster.Lab(unused).dir.exists()


def test_apiserver_killed_mid_grade_is_could_not_grade(tmp_path, state):
    """etcd frozen: the grader connects (``/version`` needs no etcd), then its reads hang;
    the apiserver is killed while they do. Exit 2, no score, nothing of the grade left."""
    name = f"gpushare-test-kill-{os.getpid()}"
    lab = cluster.up(name)
    try:
        components = lab.running_components()
        etcd = psutil.Process(components["etcd"])
        apiserver = psutil.Process(components["kube-apiserver"])
        etcd.suspend()
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gpushare",
                    "grade",
                    "--kubeconfig",
                    str(lab.kubeconfig),
                    "--workdir",
                    str(state.workdir if state.workdir.exists() else tmp_path),
                    "--json",
                    str(tmp_path / "r.json"),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env=_env(),
            )
            grader = psutil.Process(proc.pid)
            time.sleep(2.0)  # connected, reads hanging on etcd
            assert proc.poll() is None, proc.communicate()
            descendants = grader.children(recursive=True)
            apiserver.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=60)
        finally:
            etcd.resume()
        assert proc.returncode == 2, out + err
        assert "could not grade" in err and len(err.strip().splitlines()) == 1
        results = json.loads((tmp_path / "r.json").read_text())
        assert "score" not in results and results["extra_data"]["complete"] is False
        time.sleep(0.5)
        assert not [p for p in descendants if p.is_running() and p.status() != "zombie"]
    finally:
        cluster.down(name)
