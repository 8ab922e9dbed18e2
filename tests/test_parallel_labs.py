"""Many labs on one machine (issue 8): created at once they all come up; a port conflict fails
fast, names the port and leaves nothing behind. Real kwok labs, real sockets, real processes.
"""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from gpushare.lab import cluster, ports, procs
from gpushare.lab import nodes as lab_nodes
from tests.helpers import TEST_CLUSTER, _gpushare

LAB_NODES = lab_nodes.load().names

pytestmark = pytest.mark.lab  # every test here creates labs of its own

PARALLEL = 8


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _listen(port: int) -> socket.socket:
    """Take ``port`` the way a foreign server would (it knows nothing of our registry)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def _assert_nothing_left(name: str) -> None:
    lab = cluster.Lab(name)
    assert not lab.dir.exists(), f"{lab.dir} is left"
    assert procs.cluster_processes(lab.dir) == []
    assert ports.recorded(lab.dir) is None


def test_eight_labs_created_at_once_all_come_up_then_all_go(capsys):
    names = [f"{TEST_CLUSTER}-par{i}" for i in range(PARALLEL)]
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(PARALLEL) as pool:
            ups = list(pool.map(lambda n: _gpushare("up", "--cluster", n, timeout=300), names))
        elapsed = time.monotonic() - t0
        for name, res in zip(names, ups, strict=True):
            assert res.returncode == 0, f"{name}: {res.stderr}"
        seen_ports: set[int] = set()
        components: list[psutil.Process] = []
        for name in names:
            lab = cluster.Lab(name)
            client = lab.client(timeout=10)
            assert client.get("/readyz") == "ok"
            nodes = client.get("/api/v1/nodes")["items"]
            assert sorted(n["metadata"]["name"] for n in nodes) == list(LAB_NODES)
            assert all(cluster._node_ready(n) for n in nodes)
            own = cluster.lab_ports(lab)
            assert set(own) == set(ports.PORT_OPTIONS)
            assert not seen_ports & set(own.values()), f"{name} shares a port"
            seen_ports |= set(own.values())
            pids = lab.running_components()
            assert set(pids) == set(cluster.COMPONENT_BINARIES)
            components += [psutil.Process(p) for p in pids.values()]
    finally:
        with ThreadPoolExecutor(PARALLEL) as pool:
            downs = list(pool.map(lambda n: _gpushare("down", "--cluster", n, timeout=300), names))
    for name, res in zip(names, downs, strict=True):
        assert res.returncode == 0, f"{name}: {res.stderr}"
        _assert_nothing_left(name)
    assert [p.pid for p in components if _alive(p)] == []
    with capsys.disabled():
        print(f"\n{PARALLEL} labs created at once: all Ready in {elapsed:.1f}s")


def test_a_port_given_to_a_lab_but_taken_fails_fast_and_names_it(capsys):
    """The caller fixes the ports and one is taken: no retry, the port in the message."""
    name = f"{TEST_CLUSTER}-clash"
    lab = cluster.Lab(name)
    fixed = ports.reserve(lab.dir)  # six free ports, as a create would get them
    sock = _listen(fixed["etcdPort"])
    t0 = time.monotonic()
    try:
        with pytest.raises(cluster.ClusterError) as failed:
            cluster.up(name, ports=fixed)
        elapsed = time.monotonic() - t0
    finally:
        sock.close()
        cluster.down(name)  # in case the assertions below fail: nothing may stay behind
    message = str(failed.value)
    assert f"port {fixed['etcdPort']}" in message
    assert "etcd" in message
    assert "address already in use" in message  # quoted from etcd's own log
    assert elapsed < 15, f"took {elapsed:.1f}s"
    _assert_nothing_left(name)
    with capsys.disabled():
        print(f"\na create whose etcd port is taken failed in {elapsed:.1f}s: {message[:160]}")


def test_a_port_taken_after_its_reservation_is_retried_on_other_ports(monkeypatch):
    """A foreign process takes the reserved etcd port before kwokctl starts etcd: the create
    sees etcd die, removes everything of that attempt and comes up on other ports."""
    name = f"{TEST_CLUSTER}-retry"
    real_reserve = ports.reserve
    held: list[socket.socket] = []

    def reserve_then_lose_one(cluster_dir: Path, avoid: frozenset[int] = frozenset()):
        chosen = real_reserve(cluster_dir, avoid)
        if not held:
            held.append(_listen(chosen["etcdPort"]))
        return chosen

    monkeypatch.setattr(ports, "reserve", reserve_then_lose_one)
    try:
        lab = cluster.up(name)
        taken = held[0].getsockname()[1]
        assert lab.client().get("/readyz") == "ok"
        assert taken not in cluster.lab_ports(lab).values()
        assert cluster.lab_ports(lab) == ports.recorded(lab.dir)
    finally:
        for sock in held:
            sock.close()
        cluster.down(name)
    _assert_nothing_left(name)


def test_a_port_taken_on_every_attempt_fails_after_the_last(monkeypatch, capsys):
    """The retry is bounded: each attempt is cleaned up and fails fast (15 s each at most,
    the bound of one provoked conflict), and the message names the last port."""
    name = f"{TEST_CLUSTER}-busy"
    real_reserve = ports.reserve
    held: list[socket.socket] = []
    taken: list[int] = []

    def reserve_and_lose(cluster_dir: Path, avoid: frozenset[int] = frozenset()):
        chosen = real_reserve(cluster_dir, avoid)
        held.append(_listen(chosen["etcdPort"]))
        taken.append(chosen["etcdPort"])
        return chosen

    monkeypatch.setattr(ports, "reserve", reserve_and_lose)
    t0 = time.monotonic()
    try:
        with pytest.raises(cluster.ClusterError) as failed:
            cluster.up(name)
        elapsed = time.monotonic() - t0
    finally:
        for sock in held:
            sock.close()
        cluster.down(name)
    assert len(held) == cluster.CREATE_ATTEMPTS
    assert f"port {taken[-1]}" in str(failed.value)
    assert elapsed < 15 * cluster.CREATE_ATTEMPTS, f"took {elapsed:.1f}s"
    _assert_nothing_left(name)
    with capsys.disabled():
        print(f"\n{cluster.CREATE_ATTEMPTS} attempts, each etcd port taken: {elapsed:.1f}s")
