"""The lab cluster's lifecycle: up, down, reset, status, env.

kwokctl's binary runtime runs a real etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok-controller as local processes with our pinned binaries. kwokctl's own
``--wait`` can pass without the cluster being usable, so readiness is always polled here:
``/readyz`` of the apiserver, then every lab node Ready.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

import psutil
import yaml

from gpushare import versions
from gpushare.data import JsonObject
from gpushare.kube.errors import ApiError, KubeconfigError, Unreachable
from gpushare.kube.transport import Client
from gpushare.lab import binaries, definition, ports, procs, purge, startup
from gpushare.lab.nodes import node_manifest
from gpushare.locations import cluster_name, kwok_workdir, lab_dir

SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
# names of kwokctl's pid files under <cluster>/pids/
COMPONENT_BINARIES = startup.COMPONENTS
# Our kwokctl configuration: every component listens on loopback only (kwokctl's default is
# 0.0.0.0), and a user's own ~/.kwok/kwok.yaml is never merged into the lab. A create adds the
# lab's six ports (see :mod:`gpushare.lab.ports`).
KWOKCTL_CONFIG = """\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
"""
CREATE_ATTEMPTS = 2  # a component found its port taken behind the registry's back: again
START_TIMEOUT = 180.0  # a create or start under load (8 labs at once on 2 cores)


class ClusterError(RuntimeError):
    """The lab cluster cannot be brought to the asked state; the message says what to do."""


_log = binaries._log


@dataclass(frozen=True)
class Lab:
    """Where one named lab cluster lives on disk."""

    name: str

    @property
    def dir(self) -> Path:
        return lab_dir(self.name)

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig.yaml"

    def exists(self) -> bool:
        return self.kubeconfig.is_file()

    def running_components(self) -> dict[str, int]:
        """Component name -> pid, for the components whose pid file names a live process."""
        pids = {n: procs.pid_alive(self.dir / "pids" / f"{n}.pid") for n in COMPONENT_BINARIES}
        return {n: pid for n, pid in pids.items() if pid}

    def client(self, timeout: float = 5.0) -> Client:
        return Client.from_kubeconfig(self.kubeconfig, timeout=timeout)


# --------------------------------------------------------------------------- kwokctl


def _kwokctl_env(bins: dict[str, Path]) -> dict[str, str]:
    env = dict(os.environ)
    env["KWOK_WORKDIR"] = str(kwok_workdir())
    env["KWOK_KUBE_VERSION"] = versions.KUBERNETES
    env["KWOK_RUNTIME"] = "binary"
    if "kubectl" in bins:
        env["KWOK_KUBECTL_BINARY"] = str(bins["kubectl"])
    return env


def _config_path(lab: Lab) -> Path:
    return kwok_workdir() / "configs" / f"{lab.name}.yaml"


def _config_file(lab: Lab, ports: dict[str, int] | None = None) -> Path:
    """The lab's own kwokctl configuration file (one per lab: concurrent commands never share
    a file being rewritten), written aside and renamed into place."""
    text = KWOKCTL_CONFIG + "".join(f"  {k}: {v}\n" for k, v in (ports or {}).items())
    path = _config_path(lab)
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def _kwokctl_cmd(
    lab: Lab, bins: dict[str, Path], args: list[str], ports: dict[str, int] | None = None
) -> list[str]:
    kwokctl = bins.get("kwokctl")
    if kwokctl is None:
        raise ClusterError("kwokctl is not available: run `make setup` first")
    return [str(kwokctl), "--name", lab.name, "--config", str(_config_file(lab, ports)), *args]


def run(cmd: list[str], env: dict[str, str], timeout: float, what: str) -> CompletedProcess[str]:
    """Run ``cmd`` to its end with its output kept; ClusterError when it overstays ``timeout``."""
    try:
        return subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{what} did not finish in {timeout:.0f}s") from exc


def _kwokctl(lab: Lab, bins: dict[str, Path], *args: str, timeout: float = 120) -> None:
    cmd = _kwokctl_cmd(lab, bins, list(args))
    out = run(cmd, _kwokctl_env(bins), timeout, f"`kwokctl {' '.join(args)}`")
    if out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-15:])
        raise ClusterError(f"`kwokctl {' '.join(args)}` failed (exit {out.returncode}):\n{tail}")


def _create_args(bins: dict[str, Path]) -> list[str]:
    args = ["create", "cluster", "--runtime", "binary", "--kubeconfig", "", "--wait", "0s"]
    # The namespace controller needs ~100 API calls per namespace; at the default client QPS
    # (20) reset would wait ~6 s for it. A lab has one user: no limits needed.
    args.append("--disable-qps-limits")
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "etcd"):
        if name in bins:
            flag = "--kwok-controller-binary" if name == "kwok" else f"--{name}-binary"
            args += [flag, str(bins[name])]
    return args


# --------------------------------------------------------------------------- readiness


def wait_ready(client: Client, timeout: float, watch: Callable[[], None]) -> None:
    """Poll ``/readyz`` until the apiserver says ok; kwokctl's own wait is not trusted.
    ``watch`` is called on every poll: it raises when a component has died meanwhile."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        watch()
        try:
            if str(client.get("/readyz")).strip() == "ok":
                return
        except (ApiError, Unreachable) as exc:
            last = str(exc)
        time.sleep(0.1)
    raise ClusterError(f"the apiserver did not become ready in {timeout:.0f}s ({last})")


def _node_ready(node: JsonObject) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def ensure_nodes(
    client: Client, timeout: float = 60.0, watch: Callable[[], None] | None = None
) -> None:
    """Create missing lab nodes (the lab's ``lab.toml``), then wait until all are Ready."""
    specs = definition.load().nodes
    existing = {n["metadata"]["name"] for n in client.get("/api/v1/nodes").get("items", [])}
    for spec in specs:
        if spec.name not in existing:
            try:
                client.create("/api/v1/nodes", node_manifest(spec))
            except ApiError as exc:
                if exc.status != 409:
                    raise
    deadline = time.monotonic() + timeout
    while True:
        if watch is not None:
            watch()
        nodes = {n["metadata"]["name"]: n for n in client.get("/api/v1/nodes").get("items", [])}
        not_ready = [s.name for s in specs if not (s.name in nodes and _node_ready(nodes[s.name]))]
        if not not_ready:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"nodes not Ready after {timeout:.0f}s: {', '.join(not_ready)}")
        time.sleep(0.1)


def ensure_seeds(client: Client, *, again: bool = False) -> None:
    """Create the objects the lab seeds (``lab.toml`` ``[seed]``) that are missing, in their
    order; ``again`` (after a reset): one that is still there (cluster-scoped, or in a
    namespace reset keeps) is deleted first, so it is the seed's again. A namespace is never
    deleted here: reset has purged the lab's, and a system one stays."""
    lab = definition.load()
    for obj in lab.seeds:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") if obj.get("kind") != "Namespace" else None
        collection = lab.collection(obj, namespace)
        if again and obj.get("kind") != "Namespace":
            client.delete(f"{collection}/{meta.get('name')}")
        try:
            client.create(collection, obj)
        except ApiError as exc:
            if exc.status != 409:
                raise


# --------------------------------------------------------------------------- lifecycle


@contextlib.contextmanager
def _lab_lock(lab: Lab) -> Iterator[None]:
    """One lifecycle command at a time per lab: a second ``up`` of the same name waits for the
    first and then finds it running, instead of creating it twice."""
    path = kwok_workdir() / "locks" / f"{lab.name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        yield


def up(name: str | None = None, ports: dict[str, int] | None = None) -> Lab:
    """Create, restart or reuse the lab; afterwards the apiserver is ready and nodes Ready.

    ``ports`` (kwokctl option -> port, all six of :data:`gpushare.lab.ports.PORT_OPTIONS`) fixes a
    new lab's ports instead of reserving free ones; used by tests that provoke a conflict.
    """
    lab = Lab(cluster_name(name))
    if _reuse(lab):
        return lab
    bins = binaries.ensure()
    with _lab_lock(lab):
        if _reuse(lab):
            return lab
        start = time.monotonic()
        if lab.exists():
            _log(f"starting the stopped cluster {lab.name}")
            _start_stopped(lab, bins)
        else:
            _log(
                f"creating cluster {lab.name} "
                f"(kwok {versions.KWOK}, Kubernetes {versions.KUBERNETES})"
            )
            _create(lab, bins, ports)
    _log(f"lab {lab.name} is up in {time.monotonic() - start:.1f}s")
    return lab


def _reuse(lab: Lab) -> bool:
    """A running lab: make sure of its nodes and use it as it is."""
    if not lab.exists():
        return False
    try:
        client = lab.client(timeout=2.0)
        if str(client.get("/readyz")).strip() == "ok":
            ensure_nodes(client)
            ensure_seeds(client)
            return True
    except (ApiError, Unreachable, KubeconfigError):
        pass
    return False


def _create(lab: Lab, bins: dict[str, Path], fixed: dict[str, int] | None) -> None:
    """Create the lab on reserved ports; on failure leave nothing of it (no process, no folder).

    A component that finds its port taken (by a process that ignores the registry) makes us
    try again on other ports, unless the ports were fixed by the caller.
    """
    if lab.dir.exists():  # left by a create that was killed before it wrote the kubeconfig
        _discard(lab)
    avoid: set[int] = set()
    for attempt in range(1, CREATE_ATTEMPTS + 1):
        try:
            chosen = dict(fixed) if fixed else ports.reserve(lab.dir, frozenset(avoid))
        except ports.PortError as exc:
            raise ClusterError(str(exc)) from exc
        try:
            _start(lab, bins, _create_args(bins), chosen, "create cluster")
            return
        except BaseException as exc:
            _discard(lab)  # whatever ended the create (a Ctrl-C too), nothing of it is left
            if not isinstance(exc, startup.StartError):
                raise
            if exc.port is None or fixed or attempt == CREATE_ATTEMPTS:
                raise ClusterError(f"lab {lab.name} could not be created: {exc}") from exc
            _log(f"{exc.component}: port {exc.port} is taken; trying other ports")
            avoid.add(exc.port)


def _start_stopped(lab: Lab, bins: dict[str, Path]) -> None:
    """Start a stopped lab on its own ports (its data kept), or say at once which is taken."""
    if procs.cluster_processes(lab.dir):  # half running (a component died): start afresh
        _log(f"stopping what is left of {lab.name} first")
        _stop_components(lab, bins)
    try:
        if recorded := lab_ports(lab):
            ports.claim(lab.dir, recorded)
    except ports.PortError as exc:
        raise ClusterError(
            f"lab {lab.name} cannot start: {exc}. Free that port, or delete the lab "
            f"(`gpushare down --cluster {lab.name}`, its data is lost) and `up` again"
        ) from exc
    try:
        _start(lab, bins, ["start", "cluster", "--wait", "0s"], None, "start cluster")
    except BaseException as exc:
        _stop_components(lab, bins)  # whatever ended the start, nothing of it keeps running
        if isinstance(exc, startup.StartError):
            raise ClusterError(f"lab {lab.name} could not start: {exc}") from exc
        raise


def _start(
    lab: Lab, bins: dict[str, Path], args: list[str], ports: dict[str, int] | None, what: str
) -> None:
    """kwokctl create/start watched, then readiness watched: a dead component ends it at once."""
    deadline = time.monotonic() + START_TIMEOUT
    cmd = _kwokctl_cmd(lab, bins, args, ports)
    watch = startup.Watch(lab.dir)
    startup.run_kwokctl(cmd, _kwokctl_env(bins), watch, deadline, what)
    client = lab.client()
    wait_ready(client, max(deadline - time.monotonic(), 5.0), watch.check)
    ensure_nodes(client, timeout=max(deadline - time.monotonic(), 5.0), watch=watch.check)
    ensure_seeds(client)


def lab_ports(lab: Lab) -> dict[str, int]:
    """The ports kwokctl recorded for the lab (its ``kwok.yaml``), by kwokctl option name."""
    try:
        docs = list(yaml.safe_load_all((lab.dir / "kwok.yaml").read_text()))
    except (OSError, yaml.YAMLError):
        return {}
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "KwokctlConfiguration":
            options = doc.get("options") or {}
            return {k: int(options[k]) for k in ports.PORT_OPTIONS if options.get(k)}
    return {}


def _discard(lab: Lab) -> None:
    """Remove every trace of a lab whose create failed: processes, folder, port reservation.

    Its processes are killed by pid, not through ``kwokctl delete``: a new lab has no data to
    shut down gracefully, and kwokctl's own start costs seconds on a loaded machine.
    """
    try:
        if lab.dir.exists():
            victims = procs.cluster_processes(lab.dir)
            procs.kill(victims)
            _settle(lab, victims)
            shutil.rmtree(lab.dir, ignore_errors=True)
    finally:
        _forget(lab)


def _forget(lab: Lab) -> None:
    """Once the lab is gone: its ports are free again, and its kwokctl configuration goes."""
    ports.release(lab.dir)
    _config_path(lab).unlink(missing_ok=True)


def _stop_components(lab: Lab, bins: dict[str, Path]) -> None:
    known = procs.cluster_processes(lab.dir)
    try:
        _kwokctl(lab, bins, "stop", "cluster", timeout=60)
    except ClusterError as exc:
        _log(f"kwokctl stop failed, ending the processes by pid: {exc}")
    _settle(lab, known)


def down(name: str | None = None) -> list[int]:
    """Delete the cluster; return pids that had to be ended by hand after kwokctl."""
    lab = Lab(cluster_name(name))
    with _lab_lock(lab):
        known = procs.cluster_processes(lab.dir) if lab.dir.exists() else []
        if lab.dir.exists():
            try:
                bins = binaries.ensure(["kwokctl", "kubectl"], build=False)
                _kwokctl(lab, bins, "delete", "cluster", timeout=60)
            except (ClusterError, binaries.BinaryError) as exc:
                _log(f"kwokctl delete failed, ending the processes by pid: {exc}")
        ended = _settle(lab, known)
        shutil.rmtree(lab.dir, ignore_errors=True)
        _forget(lab)
    return ended


def _settle(lab: Lab, known: list[psutil.Process]) -> list[int]:
    """After kwokctl stopped the components: none may be left; pids we had to end ourselves."""
    ended, left = procs.settle(lab.dir, known)
    if left:
        raise ClusterError(f"processes of the cluster are still alive: {left}")
    return ended


def stop(name: str | None = None) -> None:
    """Stop the components but keep the data and the ports (``up`` brings it back on them).

    kwokctl signals the components and returns; the apiserver's graceful shutdown can outlive
    it, so we wait until none is left (ending stragglers by pid) before saying it stopped.
    """
    lab = Lab(cluster_name(name))
    bins = binaries.ensure(["kwokctl", "kubectl"], build=False)
    with _lab_lock(lab):
        _stop_components(lab, bins)


def reset(name: str | None = None, client: Client | None = None, timeout: float = 30.0) -> None:
    """Back to the fresh lab without restarting the control plane.

    Lab namespaces are emptied and removed by :mod:`gpushare.lab.purge` (no 5 s wait for the
    namespace controller), and it returns only once no sync of that controller could still
    delete in a new namespace of an old name (see there); in ``default``, the pods, quotas,
    limit ranges and ConfigMaps a learner may have put there go too; nodes are made fresh.
    """
    lab = Lab(cluster_name(name))
    client = client or lab.client()
    lab_namespaces = _lab_namespaces(client)
    for kind in ("pods", "resourcequotas", "limitranges"):
        purge.delete_collection(client, f"/api/v1/namespaces/default/{kind}")
    for cm in client.get("/api/v1/namespaces/default/configmaps").get("items", []):
        if cm["metadata"]["name"] != "kube-root-ca.crt":
            client.delete(f"/api/v1/namespaces/default/configmaps/{cm['metadata']['name']}")
    leftovers = purge.purge(client, lab_namespaces)
    if leftovers:
        _log(f"waiting for the namespace controller (objects with finalizers: {leftovers[:5]})")
    _reset_nodes(client)
    deadline = time.monotonic() + timeout
    while left := _lab_namespaces(client):
        if time.monotonic() > deadline:
            raise ClusterError(f"namespaces still terminating after {timeout:.0f}s: {left}")
        time.sleep(0.1)
    try:
        purge.wait_namespace_controller(_controller_metrics_url(lab), log=_log)
    except TimeoutError as exc:
        raise ClusterError(f"reset: {exc}") from exc
    ensure_nodes(client)
    ensure_seeds(client, again=True)


def _lab_namespaces(client: Client) -> list[str]:
    names = [n["metadata"]["name"] for n in client.get("/api/v1/namespaces").get("items", [])]
    return [n for n in names if n not in SYSTEM_NAMESPACES]


def _controller_metrics_url(lab: Lab) -> str | None:
    port = lab_ports(lab).get("kubeControllerManagerPort")
    return f"https://127.0.0.1:{port}/metrics" if port else None


def _reset_nodes(client: Client) -> None:
    """Each lab node back to the labels, taints and capacity ``lab.toml`` gives it."""
    lab = definition.load()
    for node in client.get("/api/v1/nodes").get("items", []):
        name = node["metadata"]["name"]
        spec = lab.node(name)
        if spec is None:
            client.delete(f"/api/v1/nodes/{name}")
            continue
        labels = _exactly(node["metadata"].get("labels"), spec.labels)
        taints = [dict(t) for t in spec.taints] or None
        client.merge_patch(
            f"/api/v1/nodes/{name}",
            {"metadata": {"labels": labels}, "spec": {"taints": taints, "unschedulable": None}},
        )
        status = node.get("status") or {}
        patch = {f: _exactly(status.get(f), spec.capacity) for f in ("capacity", "allocatable")}
        client.merge_patch(f"/api/v1/nodes/{name}/status", {"status": patch})


def _exactly(current: JsonObject | None, want: dict[str, str]) -> dict[str, str | None]:
    """A merge patch that leaves a map holding exactly ``want``: every other key nulled."""
    return {**{k: None for k in current or {} if k not in want}, **want}


def env_lines(name: str | None = None) -> list[str]:
    """``export`` lines so that a plain ``kubectl`` in the learner's shell talks to the lab."""
    lab = Lab(cluster_name(name))
    lines = [f"export KUBECONFIG={lab.kubeconfig}", f"export GPUSHARE_CLUSTER={lab.name}"]
    kubectl = binaries.find("kubectl")
    if kubectl is not None:
        lines.append(f'export PATH="{kubectl.parent}:$PATH"')
    return lines


def status(name: str | None = None) -> JsonObject:
    """What runs, where the kubeconfig is, the pinned versions; cheap, never starts anything."""
    lab = Lab(cluster_name(name))
    info: JsonObject = {
        "cluster": lab.name,
        "directory": str(lab.dir),
        "exists": lab.exists(),
        "kubeconfig": str(lab.kubeconfig),
        "components": lab.running_components() if lab.exists() else {},
        "versions": {
            "kwok": versions.KWOK,
            "kubernetes": versions.KUBERNETES,
            "etcd": versions.ETCD,
        },
        "binaries": {
            n: (str(p) if (p := binaries.cached_path(n)).exists() else None)
            for n in versions.COMPONENTS
        },
        "apiserver": None,
        "nodes": {},
    }
    if lab.exists():
        try:
            client = lab.client(timeout=2.0)
            info["apiserver"] = client.server if client.get("/readyz") == "ok" else "not ready"
            for node in client.get("/api/v1/nodes").get("items", []):
                info["nodes"][node["metadata"]["name"]] = (
                    "Ready" if _node_ready(node) else "NotReady"
                )
        except (ApiError, Unreachable, KubeconfigError) as exc:
            info["apiserver"] = f"unreachable ({exc})"
    return info
