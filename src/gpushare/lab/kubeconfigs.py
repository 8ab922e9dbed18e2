"""Which cluster a command talks to, and a client for it: kubeconfigs read as kubectl reads them.

Precedence, the same for ``gpushare grade``, ``pytest graders/`` and ``gpushare solve``:
``--kubeconfig FILE``, else ``$KUBECONFIG`` (a list of files, merged the way kubectl merges
them: the first file to set a key wins), else the lab cluster (``--cluster``), which is started
if it is not running. ``--context NAME`` picks a context, else the merged current-context.

A kubeconfig the user names is loaded by the official ``kubernetes`` package's loader, so every
way of logging in that it supports works here too: exec credential plugins (v1 and v1beta1),
token and tokenFile, client certificates and CAs as files or data, insecure-skip-tls-verify,
tls-server-name, proxy-url and HTTPS_PROXY/NO_PROXY; requests then go through its own
urllib3-based transport. The lab's own kubeconfig, which kwokctl writes for us (a CA, a client
certificate and a loopback server, nothing else), is read by the small client of
:mod:`gpushare.lab.kubeapi`: importing the official package costs about 0.2 s, which ``make bench``
shows is over half of a learner's whole grade.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpushare.lab.kubeapi import Client, KubeconfigError, Unreachable, Verbs, decode

LIVE_MISSING = (
    "a kubeconfig you name is read by the official kubernetes package, which is not installed "
    "here: pip install 'gpushare[live]' (make install does)"
)


@dataclass(frozen=True)
class Target:
    """The cluster a command judges, as it will be recorded in every result."""

    kubeconfig: str  # the file, or the KUBECONFIG list as given (``a:b``)
    source: str  # "--kubeconfig", "KUBECONFIG" or "lab"
    context: str | None = None
    cluster: str | None = None  # the lab cluster's name, when source == "lab"
    files: tuple[str, ...] = field(default=())

    @property
    def is_lab(self) -> bool:
        return self.source == "lab"


def resolve(
    kubeconfig: str | None = None,
    context: str | None = None,
    cluster: str | None = None,
    environ: dict[str, str] | None = None,
) -> Target:
    """Which kubeconfig a command uses, by kubectl's precedence; nothing is read yet."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        path = str(Path(kubeconfig).expanduser())
        return Target(path, "--kubeconfig", context, None, (path,))
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        files = tuple(str(Path(p).expanduser()) for p in listed)
        return Target(os.pathsep.join(files), "KUBECONFIG", context, None, files)
    from gpushare.lab.cluster import Lab, cluster_name

    lab = Lab(cluster_name(cluster))
    return Target(str(lab.kubeconfig), "lab", context, lab.name, (str(lab.kubeconfig),))


def lab_kubeconfig(path: str) -> bool:
    """Whether ``path`` is the kubeconfig of one of our lab clusters (kwokctl wrote it)."""
    from gpushare.locations import kwok_workdir

    p = Path(path).resolve()
    clusters = (kwok_workdir() / "clusters").resolve()
    return p.name == "kubeconfig.yaml" and p.parent.parent == clusters


@dataclass(frozen=True)
class Identity:
    """What was graded: recorded in results.json, JUnit properties and the terminal footer."""

    kubeconfig: str
    source: str
    context: str
    cluster: str
    server: str
    user: str

    def as_dict(self) -> dict[str, str]:
        return {
            "kubeconfig": self.kubeconfig,
            "kubeconfig_source": self.source,
            "context": self.context,
            "cluster": self.cluster,
            "server": self.server,
            "user": self.user,
        }


def connect(target: Target, timeout: float = 10.0) -> tuple[Any, Identity]:
    """A client for ``target`` and who it is; KubeconfigError when it cannot be used.

    Nothing is sent yet: the caller's first request tells whether the cluster answers.
    """
    if len(target.files) == 1 and lab_kubeconfig(target.files[0]):
        client = Client.from_kubeconfig(target.files[0], target.context, timeout=timeout)
        creds = client.creds  # read once: the names come with the server and keys
        identity = Identity(
            kubeconfig=target.kubeconfig,
            source=target.source,
            context=creds.context,
            cluster=creds.cluster,
            server=client.server,
            user=creds.user,
        )
        return client, identity
    client = OfficialClient.load(target, timeout=timeout)
    return client, client.identity


# --------------------------------------------------------------------------- official loader


def _loader_log() -> Any:
    """A logging handler collecting what the official loader logs: it logs a failed exec
    plugin and goes on. (``logging`` is imported here: only the official path needs it.)"""
    import logging

    class LoaderLog(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    return LoaderLog()


def _interactive_plugin(user: dict[str, Any]) -> str | None:
    """The command of an exec plugin that needs a person at a terminal, when none is here."""
    exec_conf = user.get("exec") or {}
    if exec_conf.get("interactiveMode") != "Always":
        return None
    if sys.stdin.isatty() and sys.stdout.isatty():
        return None
    return str(exec_conf.get("command") or "?")


class OfficialClient(Verbs):
    """The same calls as :class:`gpushare.lab.kubeapi.Client`, over the official package.

    Thread-safe: urllib3's pool is. Errors become ours: an answer with an error status is an
    :class:`ApiError`, no answer at all is :class:`Unreachable`.
    """

    def __init__(self, api_client: Any, identity: Identity, timeout: float) -> None:
        self.api = api_client
        self.identity = identity
        self.timeout = timeout

    @classmethod
    def load(cls, target: Target, timeout: float = 10.0) -> OfficialClient:
        try:
            from kubernetes import client as k8s_client
            from kubernetes import config as k8s_config
            from kubernetes.config.config_exception import ConfigException
        except ImportError:  # the `live` extra: grading images and Gradescope go without it
            raise KubeconfigError(LIVE_MISSING) from None

        missing = [f for f in target.files if not Path(f).is_file()]
        if missing and len(missing) == len(target.files):
            raise KubeconfigError(f"kubeconfig not found: {', '.join(missing)} ({target.source})")
        import logging

        log = _loader_log()
        root = logging.getLogger()
        root.addHandler(log)
        try:
            contexts, _ = k8s_config.list_kube_config_contexts(target.kubeconfig)
            # kubectl: the first file to set current-context wins (the Python merger lets
            # the last one win), so the current context is chosen here and passed explicitly
            docs = _documents(target)
            wanted = target.context or next(
                (d["current-context"] for d in docs if d.get("current-context")), None
            )
            chosen = next((c for c in contexts if c.get("name") == wanted), None)
            if target.context and chosen is None:
                names = ", ".join(c.get("name", "?") for c in contexts) or "none"
                raise KubeconfigError(
                    f"context {target.context!r} is not in {target.kubeconfig} (contexts: {names})"
                )
            if not chosen:
                raise KubeconfigError(
                    f"{target.kubeconfig} has no current-context; pass --context NAME"
                )
            ctx = chosen.get("context") or {}
            user_name = str(ctx.get("user") or "")
            user = _user_entry(docs, user_name)
            interactive = _interactive_plugin(user)
            if interactive:
                raise KubeconfigError(
                    f"user {user_name!r} logs in with {interactive!r}, which needs an interactive "
                    "login (exec interactiveMode: Always) and no terminal is attached; log in "
                    "first and pass a kubeconfig with a token, or run from a terminal"
                )
            configuration = k8s_client.Configuration()
            k8s_config.load_kube_config(
                config_file=target.kubeconfig,
                context=chosen["name"],
                client_configuration=configuration,
                persist_config=False,
            )
        except ConfigException as exc:
            raise KubeconfigError(f"kubeconfig {target.kubeconfig}: {exc}") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KubeconfigError(f"kubeconfig {target.kubeconfig} is unusable: {exc}") from None
        finally:
            root.removeHandler(log)
        if user.get("exec") and not (
            configuration.api_key.get("BearerToken") or configuration.cert_file
        ):
            why = "; ".join(log.lines) or "it gave neither a token nor a client certificate"
            raise KubeconfigError(f"the exec credential plugin of user {user_name!r} failed: {why}")
        identity = Identity(
            kubeconfig=target.kubeconfig,
            source=target.source,
            context=str(chosen["name"]),
            cluster=str(ctx.get("cluster") or ""),
            server=configuration.host,
            user=user_name,
        )
        return cls(k8s_client.ApiClient(configuration), identity, timeout)

    @property
    def server(self) -> str:
        return self.identity.server

    def close(self) -> None:
        """Connections are pooled by urllib3 and shared by threads: nothing per thread."""

    def shutdown(self) -> None:
        self.api.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Any:
        import urllib3

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            serialized = self.api.param_serialize(
                method,
                path,
                query_params=list((params or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            method_, url, sent_headers, *rest = serialized
            # client-go trims a token (a tokenFile usually ends with a newline); the official
            # Python loader does not, and urllib3 then refuses the header
            if isinstance(sent_headers.get("authorization"), str):
                sent_headers["authorization"] = sent_headers["authorization"].strip()
            response = self.api.call_api(
                method_, url, sent_headers, *rest, _request_timeout=self.timeout
            )
            raw = response.read()
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(self.server, _reason(exc)) from None
        except OSError as exc:
            raise Unreachable(self.server, str(exc)) from None
        except Exception as exc:
            from kubernetes.client.exceptions import ApiException

            if isinstance(exc, ApiException) and not exc.status:  # TLS and friends
                raise Unreachable(self.server, str(exc.reason)) from None
            raise
        return decode(response.status, response.reason or "", raw)


def _documents(target: Target) -> list[dict[str, Any]]:
    """The kubeconfig files of ``target`` as mappings, in kubectl's order (unreadable: none)."""
    import yaml

    docs = []
    for f in target.files:
        try:
            doc = yaml.safe_load(Path(f).read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    return docs


def _user_entry(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The merged ``users[name].user`` (first file wins, as kubectl merges)."""
    for doc in docs:
        for item in doc.get("users") or []:
            if isinstance(item, dict) and item.get("name") == name:
                return item.get("user") or {}
    return {}


def _reason(exc: Exception) -> str:
    """urllib3 wraps the cause (refused, reset, timed out) in MaxRetryError: show the cause."""
    inner = getattr(exc, "reason", None)
    return str(inner or exc) or type(exc).__name__
