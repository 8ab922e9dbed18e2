"""The ports of the lab clusters on this machine, chosen so that labs created at once never collide.

kwokctl picks a component's port itself, counting down from 32766 and skipping the ports that
are busy at that moment. Two creates started together therefore pick the same ports, and the
slower one's etcd dies with ``bind: address already in use``. Here a lab's six ports are chosen
under a machine-wide lock, written to a registry before kwokctl runs, and handed to kwokctl
explicitly. They stay promised to the lab until ``down``: kwokctl wrote them into a stopped
lab's component flags, and ``up`` restarts it on the same ones.

The registry lives under /tmp, not in the per-user cache: ports belong to the machine (to its
network namespace), and a lab of another user or of another ``GPUSHARE_CACHE`` must see the
same reservations. ``GPUSHARE_PORTS_DIR`` moves it (e.g. containers that share a network
namespace but not /tmp). A process that binds one of our ports without asking the registry is
still possible; ``cluster`` then sees the component die and retries with other ports.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from gpushare.data import JsonObject

# kwokctl option (KwokctlConfiguration.options, v1alpha1) -> the component that listens there.
# These are all the ports the binary runtime opens with our configuration (secure port only,
# no kubectl proxy, metrics-server, dashboard, prometheus or jaeger).
PORT_OPTIONS = {
    "etcdPort": "etcd",
    "etcdPeerPort": "etcd",
    "kubeApiserverPort": "kube-apiserver",
    "kubeControllerManagerPort": "kube-controller-manager",
    "kubeSchedulerPort": "kube-scheduler",
    "kwokControllerPort": "kwok-controller",
}
# Below the kernel's ephemeral range (32768+, so no outgoing connection holds them) and below
# kwokctl's own 32766-and-down, so a plain `kwokctl create` next to us does not race us either.
FIRST_PORT, LAST_PORT = 31999, 20000
# A reservation whose cluster directory never appeared is dropped once its process is gone, or
# after this long in any case.
ORPHAN_AFTER = 600.0


class PortError(RuntimeError):
    """No usable port, or a port a lab needs is taken; the message names the port."""


def registry_dir() -> Path:
    return Path(os.environ.get("GPUSHARE_PORTS_DIR") or "/tmp/gpushare-ports")


def _entry_path(cluster_dir: Path) -> Path:
    key = hashlib.sha256(str(cluster_dir.resolve()).encode()).hexdigest()[:20]
    return registry_dir() / f"{key}.json"


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """The machine-wide lock over the registry (held for milliseconds: never around kwokctl)."""
    root = registry_dir()
    if not root.is_dir():
        with contextlib.suppress(FileExistsError):
            root.mkdir(parents=True)
            # every user's labs share it; sticky: nobody removes another user's entries
            os.chmod(root, 0o1777)
    path = root / "lock"
    try:
        # no O_CREAT on an existing file: in a sticky /tmp directory the kernel refuses it for a
        # file another user owns (fs.protected_regular)
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            os.fchmod(fd, 0o666)
        except FileExistsError:
            fd = os.open(path, os.O_RDWR)
    except PermissionError as exc:
        raise PortError(f"cannot open the port registry lock {path}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _entries() -> list[tuple[Path, JsonObject]]:
    out = []
    for path in registry_dir().glob("*.json"):
        try:
            entry = json.loads(path.read_text())
            entry["ports"] = {k: int(v) for k, v in entry["ports"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # half-written by a crash before the rename: never happens, but harmless
        out.append((path, entry))
    return out


def _stale(entry: JsonObject) -> bool:
    try:
        if Path(entry["cluster_dir"]).exists():
            return False
    except OSError:  # a directory we may not look into: someone's live lab
        return False
    age = time.time() - float(entry.get("time", 0))
    return not psutil.pid_exists(int(entry.get("pid", 0))) or age > ORPHAN_AFTER


def _live_entries() -> list[tuple[Path, JsonObject]]:
    live = []
    for path, entry in _entries():
        if _stale(entry):
            try:
                path.unlink()
                continue
            except OSError:  # another user's entry (sticky directory): keep avoiding its ports
                pass
        live.append((path, entry))
    return live


def _write(cluster_dir: Path, ports: dict[str, int]) -> None:
    path = _entry_path(cluster_dir)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    entry = {"cluster_dir": str(cluster_dir.resolve()), "ports": ports, "pid": os.getpid()}
    tmp.write_text(json.dumps({**entry, "time": time.time()}))
    os.chmod(tmp, 0o644)
    tmp.replace(path)


def bindable(port: int) -> bool:
    """Whether a component could listen on ``port`` now (loopback and the wildcard address).
    Go sets SO_REUSEADDR on its listeners: a port whose old connections linger in TIME_WAIT
    is free for the component, and so here."""
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    return False
                raise
    return True


def reserve(cluster_dir: Path, avoid: frozenset[int] = frozenset()) -> dict[str, int]:
    """Choose and record free ports for a lab about to be created in ``cluster_dir``, but not
    those of ``avoid`` (that just failed for this lab, taken behind the registry's back)."""
    with _locked():
        own = _entry_path(cluster_dir)
        used = {p for path, e in _live_entries() if path != own for p in e["ports"].values()}
        free: list[int] = []
        for port in range(FIRST_PORT, LAST_PORT, -1):
            if port not in used and port not in avoid and bindable(port):
                free.append(port)
                if len(free) == len(PORT_OPTIONS):
                    chosen = dict(zip(PORT_OPTIONS, free, strict=True))
                    _write(cluster_dir, chosen)
                    return chosen
    raise PortError(f"no free ports left between {LAST_PORT} and {FIRST_PORT}")


def claim(cluster_dir: Path, ports: dict[str, int]) -> None:
    """Before a stopped lab starts again on its ``ports``: make sure they are still its own,
    else :class:`PortError` naming the port, its component and who holds it, so that ``up``
    fails at once instead of starting a component that cannot bind."""
    with _locked():
        own = _entry_path(cluster_dir)
        for path, entry in _live_entries():
            for option, port in entry["ports"].items():
                if path != own and port in ports.values():
                    mine = next(k for k, v in ports.items() if v == port)
                    raise PortError(
                        f"port {port} ({PORT_OPTIONS.get(mine, mine)}) of this lab is now "
                        f"reserved by the lab in {entry['cluster_dir']} ({option})"
                    )
        for option, port in ports.items():
            if not bindable(port):
                raise PortError(
                    f"port {port} ({PORT_OPTIONS.get(option, option)}) of this lab is taken"
                    f"{holder(port)}"
                )
        _write(cluster_dir, ports)


def release(cluster_dir: Path) -> None:
    """Forget the lab's ports (after ``down``, or after a create that left nothing behind)."""
    with _locked():
        _entry_path(cluster_dir).unlink(missing_ok=True)


def recorded(cluster_dir: Path) -> dict[str, int] | None:
    """The ports the registry holds for this lab, if any (made ints by :func:`_entries`)."""
    own = _entry_path(cluster_dir)
    return next((entry["ports"] for path, entry in _entries() if path == own), None)


def holder(port: int) -> str:
    """`` by pid N (name)`` for the process listening on ``port``, when it can be seen (root,
    or one's own process)."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return ""
    for conn in conns:
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            if conn.pid is None:
                return ""
            try:
                return f" by pid {conn.pid} ({psutil.Process(conn.pid).name()})"
            except psutil.Error:
                return f" by pid {conn.pid}"
    return ""
