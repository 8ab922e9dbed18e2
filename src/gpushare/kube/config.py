"""Which cluster a command talks to, and who we are there: kubeconfigs read as kubectl reads them.

Precedence (``gpushare grade``, ``pytest graders/``, ``gpushare solve``): ``--kubeconfig FILE``,
else ``$KUBECONFIG`` (files merged as kubectl merges them: the first to set a key wins), else
the lab cluster's kubeconfig (``--cluster``, else ``GPUSHARE_CLUSTER``, else ``gpushare``);
``--context NAME``, else the merged current-context. Resolving reads and starts nothing: a lab
that is not up is graded as not up. Also here: the lab's own kubeconfig (kwokctl writes a CA,
a client certificate and a loopback server) parsed for our small client.
"""

from __future__ import annotations

import base64
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpushare.data import JsonObject
from gpushare.kube.errors import KubeconfigError
from gpushare.locations import cluster_name, kwok_workdir, lab_dir

# A kubeconfig entry (a cluster, a user, a context): YAML whose keys kubectl defines.
Entry = JsonObject


@dataclass(frozen=True)
class Target:
    """The cluster a command judges, as it will be recorded in every result."""

    kubeconfig: str  # the file, or the KUBECONFIG list as given (``a:b``)
    source: str  # "--kubeconfig", "KUBECONFIG" or "lab"
    context: str | None = None
    cluster: str | None = None  # the lab cluster's name, when source == "lab"
    files: tuple[str, ...] = ()

    @property
    def is_lab(self) -> bool:
        return self.source == "lab"


def resolve(
    kubeconfig: str | None = None,
    context: str | None = None,
    cluster: str | None = None,
) -> Target:
    """Which kubeconfig a command uses, by kubectl's precedence; nothing is read yet."""
    if kubeconfig:
        path = str(Path(kubeconfig).expanduser())
        return Target(path, "--kubeconfig", context, None, (path,))
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        files = tuple(str(Path(p).expanduser()) for p in listed)
        return Target(os.pathsep.join(files), "KUBECONFIG", context, None, files)
    name = cluster_name(cluster)
    path = str(lab_dir(name) / "kubeconfig.yaml")
    return Target(path, "lab", context, name, (path,))


def lab_kubeconfig(path: str) -> bool:
    """Whether ``path`` is the kubeconfig of one of our lab clusters (kwokctl wrote it)."""
    p = Path(path).resolve()
    clusters = (kwok_workdir() / "clusters").resolve()
    return p.name == "kubeconfig.yaml" and p.parent.parent == clusters


@dataclass(frozen=True)
class Identity:
    """What was graded, in results.json, JUnit properties and the terminal footer (in this
    order)."""

    kubeconfig: str
    kubeconfig_source: str  # a Target's source
    context: str
    cluster: str
    server: str
    user: str


# --------------------------------------------------------------------------- the lab's own file


@dataclass
class Credentials:
    """Where the apiserver is and how to prove who we are (the small client's view)."""

    server: str
    ssl_context: ssl.SSLContext | None
    token: str | None
    # the names the kubeconfig gives them, as every grade records what it judged
    context: str = ""
    cluster: str = ""
    user: str = ""


def _materialize(entry: Entry, key: str, base: Path, keep: list[int]) -> str | None:
    """A file path for ``key`` or ``key-data``; the latter lives in memory only (a memfd).

    OpenSSL wants paths; ``/proc/self/fd/N`` of an anonymous in-memory file is one, and a
    client key never touches the disk.
    """
    if entry.get(f"{key}-data"):
        fd = os.memfd_create(f"gpushare-{key}", os.MFD_CLOEXEC)
        keep.append(fd)
        os.write(fd, base64.b64decode(entry[f"{key}-data"]))
        return f"/proc/self/fd/{fd}"
    if entry.get(key):
        p = Path(entry[key]).expanduser()
        return str(p if p.is_absolute() else base / p)
    return None


def _tls(p: Path, cluster: Entry, user: Entry) -> ssl.SSLContext:
    """The TLS context of an https cluster: its CA (or none checked), the user's certificate."""
    tmp: list[int] = []
    try:
        # Not ssl.create_default_context(): it would trust the system CA store too, and a
        # kubeconfig that names its cluster's CA trusts that CA alone, as kubectl does
        # (only without one is the system store used).
        ctx_ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if cluster.get("insecure-skip-tls-verify"):
            ctx_ssl.check_hostname = False
            ctx_ssl.verify_mode = ssl.CERT_NONE
        else:
            ca = _materialize(cluster, "certificate-authority", p.parent, tmp)
            if ca:
                ctx_ssl.load_verify_locations(ca)
            else:
                ctx_ssl.load_default_certs()
        cert = _materialize(user, "client-certificate", p.parent, tmp)
        key = _materialize(user, "client-key", p.parent, tmp)
        if cert:
            ctx_ssl.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise KubeconfigError(f"kubeconfig {p}: unusable TLS material: {exc}") from exc
    finally:
        for fd in tmp:
            os.close(fd)
    return ctx_ssl


def load_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> Credentials:
    """Read server, TLS material and token of ``context`` (default: current-context)."""
    p = Path(path).expanduser()
    try:
        doc = yaml.load(p.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {p}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {p} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {p} is empty or not a mapping")

    def pick(kind: str, name: str | None) -> Entry:
        for item in doc.get(kind + "s") or []:
            if item.get("name") == name:
                return item.get(kind) or {}
        raise KubeconfigError(f"kubeconfig {p} has no {kind} named {name!r}")

    context_name = context or doc.get("current-context")
    ctx = pick("context", context_name)
    cluster = pick("cluster", ctx.get("cluster"))
    user = pick("user", ctx.get("user")) if ctx.get("user") else {}
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(f"kubeconfig {p}: cluster has no server")
    ctx_ssl = _tls(p, cluster, user) if server.startswith("https") else None
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(user["tokenFile"]).read_text().strip()
    return Credentials(
        server=server.rstrip("/"),
        ssl_context=ctx_ssl,
        token=token,
        context=str(context_name or ""),
        cluster=str(ctx.get("cluster") or ""),
        user=str(ctx.get("user") or ""),
    )
