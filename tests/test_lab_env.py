"""The lab environment (issue 2): a real kwok control plane, its nodes, scheduler and quota."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpushare.kube.errors import ApiError
from gpushare.kube.transport import Client
from gpushare.lab import cluster, ports, purge
from gpushare.lab import nodes as lab_nodes
from gpushare.lab.nodes import fresh_node_labels
from tests.helpers import ROOT, TEST_CLUSTER, kubectl

LAB_NODES = lab_nodes.load().names
NODE_RESOURCES = lab_nodes.load().capacity


def _pod(name: str, resources: dict[str, str], **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "c", "image": "pause", "resources": {"limits": resources}}],
            **spec,
        },
    }


def _wait(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _namespace(client: Client, name: str) -> None:
    client.create("/api/v1/namespaces", {"metadata": {"name": name}})
    # pods in a new namespace are refused until its default ServiceAccount exists
    sa = f"/api/v1/namespaces/{name}/serviceaccounts/default"
    _wait(lambda: client.get_or_none(sa) is not None, what=f"{name}'s default ServiceAccount")


def _set_gpus(client: Client, node: str, count: str) -> None:
    client.merge_patch(
        f"/api/v1/nodes/{node}/status",
        {
            "status": {
                "capacity": {"nvidia.com/gpu": count},
                "allocatable": {"nvidia.com/gpu": count},
            }
        },
    )


def test_up_gives_three_fresh_ready_nodes(lab, client, state):
    state.fresh()
    nodes = {n["metadata"]["name"]: n for n in client.get("/api/v1/nodes")["items"]}
    assert sorted(nodes) == list(LAB_NODES)
    for node in nodes.values():
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        assert not [k for k in node["metadata"]["labels"] if k.startswith("nvidia.com/")]
        for field in ("capacity", "allocatable"):
            assert node["status"][field] == NODE_RESOURCES


def test_gpu_status_patch_survives_kwok_and_steers_the_scheduler(lab, client, state):
    state.fresh()
    _namespace(client, "sched")
    _set_gpus(client, "lab-node-1", "2")
    # Make kwok write the node's status itself: a NotReady node goes through kwok's
    # node-initialize stage again, whose template must keep our capacity.
    node = client.get("/api/v1/nodes/lab-node-1")
    conditions = [
        {**c, "status": "False"} if c["type"] == "Ready" else c
        for c in node["status"]["conditions"]
    ]
    client.merge_patch("/api/v1/nodes/lab-node-1/status", {"status": {"conditions": conditions}})
    _wait(lambda: cluster._node_ready(client.get("/api/v1/nodes/lab-node-1")), what="Ready again")
    status = client.get("/api/v1/nodes/lab-node-1")["status"]
    assert status["capacity"]["nvidia.com/gpu"] == "2"
    assert status["allocatable"]["nvidia.com/gpu"] == "2"

    for i in range(2):
        client.create("/api/v1/namespaces/sched/pods", _pod(f"gpu-{i}", {"nvidia.com/gpu": "1"}))
    for i in range(2):
        node = _wait(
            lambda i=i: client.get(f"/api/v1/namespaces/sched/pods/gpu-{i}")["spec"].get(
                "nodeName"
            ),
            what=f"gpu-{i} scheduled",
        )
        assert node == "lab-node-1"
    # a third one finds no node with a free nvidia.com/gpu: Pending, with the scheduler's reason
    client.create("/api/v1/namespaces/sched/pods", _pod("gpu-2", {"nvidia.com/gpu": "1"}))
    cond = _wait(
        lambda: [
            c
            for c in (client.get("/api/v1/namespaces/sched/pods/gpu-2").get("status") or {}).get(
                "conditions", []
            )
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ],
        what="gpu-2 unschedulable",
    )
    assert "nvidia.com/gpu" in cond[0]["message"]
    assert not client.get("/api/v1/namespaces/sched/pods/gpu-2")["spec"].get("nodeName")
    state.dirty()


def test_no_gpu_anywhere_leaves_pod_pending(lab, client, state):
    state.fresh()
    _namespace(client, "pending")
    client.create("/api/v1/namespaces/pending/pods", _pod("lonely", {"nvidia.com/gpu": "1"}))
    cond = _wait(
        lambda: [
            c
            for c in (client.get("/api/v1/namespaces/pending/pods/lonely").get("status") or {}).get(
                "conditions", []
            )
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ],
        what="unschedulable",
    )
    assert "Insufficient nvidia.com/gpu" in cond[0]["message"]
    state.dirty()


def test_quota_denies_the_third_gpu_pod_with_the_apiserver_text(lab, client, state):
    state.fresh()
    _namespace(client, "quota")
    _set_gpus(client, "lab-node-0", "8")
    client.create(
        "/api/v1/namespaces/quota/resourcequotas",
        {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}},
    )
    # the apiserver enforces a quota only once the controller manager filled its status
    _wait(
        lambda: (
            client.get("/api/v1/namespaces/quota/resourcequotas/gpu-quota").get("status") or {}
        ).get("hard"),
        what="quota status",
    )
    for i in range(2):
        client.create("/api/v1/namespaces/quota/pods", _pod(f"p{i}", {"nvidia.com/gpu": "1"}))
    with pytest.raises(ApiError) as denied:
        client.create("/api/v1/namespaces/quota/pods", _pod("p2", {"nvidia.com/gpu": "1"}))
    assert denied.value.status == 403
    assert denied.value.message == (
        'pods "p2" is forbidden: exceeded quota: gpu-quota, requested: '
        "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, "
        "limited: requests.nvidia.com/gpu=2"
    )
    assert client.get_or_none("/api/v1/namespaces/quota/pods/p2") is None
    # and kubectl, as the learner sees it
    out = kubectl(
        lab,
        "run",
        "p3",
        "-n",
        "quota",
        "--image=pause",
        "--overrides",
        '{"spec":{"containers":[{"name":"p3","image":"pause",'
        '"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}',
        check=False,
    )
    assert out.returncode != 0
    assert "exceeded quota: gpu-quota" in out.stderr
    state.dirty()


def test_reset_restores_the_fresh_lab(lab, client, state):
    state.solve()
    t0 = time.monotonic()
    cluster.reset(lab.name)
    elapsed = time.monotonic() - t0
    state.dirty()
    namespaces = {n["metadata"]["name"] for n in client.get("/api/v1/namespaces")["items"]}
    assert namespaces == set(cluster.SYSTEM_NAMESPACES)
    for node in client.get("/api/v1/nodes")["items"]:
        assert node["metadata"]["labels"] == fresh_node_labels(node["metadata"]["name"])
        assert node["status"]["capacity"] == NODE_RESOURCES
        assert node["status"]["allocatable"] == NODE_RESOURCES
    pods = client.get("/api/v1/pods")["items"]
    assert [p["metadata"]["name"] for p in pods] == []
    print(f"reset took {elapsed:.2f}s")


def test_reset_reads_the_namespace_controllers_work_queue(lab, client, state):
    """reset's guard against the namespace controller (see gpushare.lab.purge) must really read
    its counters: were they renamed, the wait would pass without looking."""
    state.fresh()
    url = cluster._controller_metrics_url(lab)
    assert url is not None
    started, finished = purge.queue_counts(url)
    assert started == finished  # an idle lab: no namespace sync running
    _namespace(client, "doomed")
    client.delete("/api/v1/namespaces/doomed")
    # the controller holds a deleted namespace 5 s, then syncs it: its counters move
    started = purge.queue_counts(url)[0]
    _wait(lambda: purge.queue_counts(url)[0] > started, timeout=20, what="a namespace sync")
    _wait(lambda: client.get_or_none("/api/v1/namespaces/doomed") is None, what="doomed gone")
    assert purge.wait_namespace_controller(url) < 5


def test_unreadable_controller_is_looked_for_again_then_waited_for_blind(monkeypatch):
    """A port nobody listens on (a controller manager not started yet): reset polls for the
    counters, then waits blind, and says so in the log."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again when the block ends: connection refused
    monkeypatch.setattr(purge, "APPEAR_WAIT", 0.3)
    monkeypatch.setattr(purge, "BLIND_WAIT", 0.2)
    logged: list[str] = []
    waited = purge.wait_namespace_controller(f"https://127.0.0.1:{port}/metrics", log=logged.append)
    assert waited >= 0.5
    assert len(logged) == 1
    assert "blind" in logged[0]
    assert f"127.0.0.1:{port}" in logged[0]


def test_second_up_reuses_the_running_lab(lab):
    before = lab.running_components()
    assert set(before) == set(cluster.COMPONENT_BINARIES)
    t0 = time.monotonic()
    again = cluster.up(lab.name)
    print(f"warm up took {time.monotonic() - t0:.2f}s")
    assert again.running_components() == before  # same pids: nothing restarted


def test_cli_env_points_kubectl_at_the_lab(lab):
    out = subprocess.run(
        [sys.executable, "-m", "gpushare", "env", "--cluster", lab.name],
        capture_output=True,
        text=True,
        check=True,
    )
    script = out.stdout + "\nkubectl get nodes -o name\n"
    res = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")},
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [f"node/{n}" for n in LAB_NODES]


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.lab  # a lab of its own
def test_stop_keeps_data_and_down_leaves_no_process(tmp_path):
    """A throwaway second cluster: stop/up keeps its data, down ends every process.

    While it is stopped its ports stay reserved; a foreign process that takes one anyway
    makes ``up`` fail at once, naming the port, with the lab's data kept.
    """
    name = f"{TEST_CLUSTER}-lifecycle"
    lab2 = cluster.up(name)
    try:
        c = lab2.client()
        c.create("/api/v1/namespaces", {"metadata": {"name": "keep-me"}})
        pids = lab2.running_components()
        assert set(pids) == set(cluster.COMPONENT_BINARIES)
        # psutil.Process remembers each process's start time: a pid reused later by an
        # unrelated process does not count as "still running"
        before = [psutil.Process(p) for p in pids.values()]
        cluster.stop(name)
        assert not [p for p in before if _alive(p)]
        own = cluster.lab_ports(lab2)
        assert ports.recorded(lab2.dir) == own  # still promised to the stopped lab
        # labs created meanwhile get other ports, down past the stopped lab's own
        others: set[int] = set()
        for i in range(200):
            others |= set(ports.reserve(tmp_path / f"lab-{i}").values())
            if min(others) < min(own.values()):
                break
        for i in range(200):
            ports.release(tmp_path / f"lab-{i}")
        assert min(others) < min(own.values())
        assert not others & set(own.values())
        with socket.socket() as squatter:
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind(("127.0.0.1", own["etcdPort"]))
            squatter.listen()
            t0 = time.monotonic()
            with pytest.raises(cluster.ClusterError) as taken:
                cluster.up(name)
            assert time.monotonic() - t0 < 5
        assert f"port {own['etcdPort']} (etcd)" in str(taken.value)
        assert lab2.running_components() == {}
        cluster.up(name)
        assert lab2.client().get_or_none("/api/v1/namespaces/keep-me") is not None
        # right after up the controller manager's counters are not there yet: reset looks
        # for them again rather than waiting blind (purge.APPEAR_WAIT)
        t0 = time.monotonic()
        cluster.reset(name)
        took = time.monotonic() - t0
        print(f"reset right after up took {took:.2f}s")
        assert took <= 3
        assert lab2.client().get_or_none("/api/v1/namespaces/keep-me") is None
        running = [psutil.Process(p) for p in lab2.running_components().values()]
        assert len(running) == len(cluster.COMPONENT_BINARIES)
    finally:
        cluster.down(name)
    assert not cluster.Lab(name).dir.exists()
    assert not [p for p in running if _alive(p)]
    from gpushare.lab import procs

    assert procs.cluster_processes(cluster.Lab(name).dir) == []
    assert ports.recorded(cluster.Lab(name).dir) is None


def test_status_reports_components_and_versions(lab):
    out = subprocess.run(
        [sys.executable, "-m", "gpushare", "status", "--cluster", lab.name, "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    import json

    info = json.loads(out.stdout)
    assert info["versions"]["kubernetes"] == "v1.36.3"
    assert set(info["components"]) == set(cluster.COMPONENT_BINARIES)
    assert info["apiserver"].startswith("https://")
    assert Path(info["kubeconfig"]).is_file()


# --------------------------------------------------------------------------- misspelt names


def _labs_here(tmp_path: Path, *names: str) -> dict[str, str]:
    """A cache where the labs ``names`` exist (their folders and kubeconfigs, as kwokctl leaves
    them; none is running), as the environment of a command."""
    cache = tmp_path / "cache"
    for name in names:
        folder = cache / "kwok" / "clusters" / name
        folder.mkdir(parents=True)
        (folder / "kubeconfig.yaml").write_text("apiVersion: v1\nkind: Config\n")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return {**env, "GPUSHARE_CACHE": str(cache)}


def test_a_misspelt_cluster_is_never_created_and_the_closest_lab_is_named(tmp_path):
    """`GPUSHARE_CLUSTER=nc-lbb` while nc-lab exists: grade and snapshot say which labs exist
    and which one was meant; nothing makes nc-lbb."""
    env = {**_labs_here(tmp_path, "nc-lab", "other"), "GPUSHARE_CLUSTER": "nc-lbb"}
    clusters = Path(env["GPUSHARE_CACHE"]) / "kwok" / "clusters"
    for argv, doing in (
        (["grade", "--workdir", str(tmp_path)], "grade"),
        (["snapshot", "--workdir", str(tmp_path), "--out", str(tmp_path)], "capture"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "gpushare", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        said = proc.stderr.strip()
        assert said.count("\n") == 0, said  # one line
        assert f"could not {doing}: the lab nc-lbb does not exist" in said
        assert "The labs here: nc-lab, other. Did you mean nc-lab?" in said
        assert "GPUSHARE_CLUSTER=nc-lab" in said
        assert sorted(p.name for p in clusters.iterdir()) == ["nc-lab", "other"]


def test_make_grade_with_a_misspelt_cluster_creates_no_lab(tmp_path):
    env = {**_labs_here(tmp_path, "nc-lab"), "GPUSHARE_CLUSTER": "nc-lbb"}
    proc = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "grade", f"WORKDIR={tmp_path}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Did you mean nc-lab?" in proc.stderr
    assert not (Path(env["GPUSHARE_CACHE"]) / "kwok" / "clusters" / "nc-lbb").exists()


def test_with_no_lab_at_all_the_message_says_how_to_start_one(tmp_path, monkeypatch):
    from gpushare.lab import existing

    monkeypatch.setenv("GPUSHARE_CACHE", _labs_here(tmp_path)["GPUSHARE_CACHE"])
    said = existing.not_up("gpushare")
    assert "No lab exists here yet" in said and "make up" in said
    assert existing.closest("gpushar", ["gpushare", "x"]) == "gpushare"
    assert existing.closest("zzzz", ["gpushare"]) is None


def test_env_of_a_lab_that_does_not_exist_warns_and_names_the_closest(tmp_path):
    env = {**_labs_here(tmp_path, "nc-lab"), "GPUSHARE_CLUSTER": "nc-lbb"}
    proc = subprocess.run(
        [sys.executable, "-m", "gpushare", "env"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0 and "export GPUSHARE_CLUSTER=nc-lbb" in proc.stdout
    assert proc.stderr.startswith("gpushare: warning: the lab nc-lbb does not exist")
    assert "Did you mean nc-lab?" in proc.stderr
