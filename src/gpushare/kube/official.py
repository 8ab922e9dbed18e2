"""The verbs over the official ``kubernetes`` package: every kubeconfig a user names.

Its loader is kubectl's peer: exec credential plugins (v1, v1beta1), token and tokenFile,
certificates and CAs as files or data, insecure-skip-tls-verify, tls-server-name, proxy-url,
HTTPS_PROXY/NO_PROXY; requests go through its urllib3 transport. It is the optional extra
``live`` (``make install`` installs it), imported only when a client is loaded: grading
snapshots (the grading image, Gradescope) goes without it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import yaml

from gpushare.data import Json, Untyped
from gpushare.kube.config import Entry, Identity, Target
from gpushare.kube.errors import KubeconfigError, Unreachable
from gpushare.kube.verbs import Params, Verbs

LIVE_MISSING = (
    "a kubeconfig you name is read by the official kubernetes package, which is not installed "
    "here: pip install 'gpushare[live]' (make install does)"
)


class OfficialClient(Verbs):
    """The same calls as :class:`gpushare.kube.transport.Client`, over the official package.

    Thread-safe: urllib3's pool is shared by threads (so nothing to close per thread). Errors
    become ours: an error status is an :class:`ApiError`, no answer at all :class:`Unreachable`.
    """

    def __init__(self, api_client: Untyped, identity: Identity, timeout: float) -> None:
        """``api_client``: a ``kubernetes.client.ApiClient``."""
        self.api = api_client
        self.identity = identity
        self.server = identity.server
        self.timeout = timeout

    @classmethod
    def load(cls, target: Target, timeout: float = 10.0) -> OfficialClient:
        try:  # lazy: 0.19 s of imports, for the kubeconfigs a user names only (module docstring)
            from logging.handlers import BufferingHandler

            from kubernetes import client as k8s_client
            from kubernetes import config as k8s_config
            from kubernetes.config.config_exception import ConfigException
        except ImportError:  # the `live` extra: grading images and Gradescope go without it
            raise KubeconfigError(LIVE_MISSING) from None

        missing = [f for f in target.files if not Path(f).is_file()]
        if missing and len(missing) == len(target.files):
            raise KubeconfigError(f"kubeconfig not found: {', '.join(missing)} ({target.source})")
        # the loader logs a failed exec plugin and goes on: what it logs is kept, for the error
        log = BufferingHandler(capacity=sys.maxsize)
        log.setLevel(logging.WARNING)
        root = logging.getLogger()
        root.addHandler(log)
        try:
            contexts, _ = k8s_config.list_kube_config_contexts(target.kubeconfig)  # type: ignore[no-untyped-call]  # kubernetes has no types
            docs = _documents(target)
            chosen = _chosen(target, contexts, _current_context(target, docs))
            ctx = chosen.get("context") or {}
            user_name = str(ctx.get("user") or "")
            user = _user_entry(docs, user_name)
            _refuse_interactive(user_name, user)
            configuration = k8s_client.Configuration()
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]  # kubernetes has no types
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
            logged = "; ".join(record.getMessage() for record in log.buffer)
            why = logged or "it gave neither a token nor a client certificate"
            raise KubeconfigError(f"the exec credential plugin of user {user_name!r} failed: {why}")
        identity = Identity(
            kubeconfig=target.kubeconfig,
            kubeconfig_source=target.source,
            context=str(chosen["name"]),
            cluster=str(ctx.get("cluster") or ""),
            server=configuration.host,
            user=user_name,
        )
        return cls(k8s_client.ApiClient(configuration), identity, timeout)

    def shutdown(self) -> None:
        self.api.close()

    def _send(
        self, method: str, path: str, body: Json, headers: dict[str, str], params: Params
    ) -> tuple[int, str, bytes | None]:
        # lazy as in load(), which has imported them: no cost here
        import urllib3
        from kubernetes.client.exceptions import ApiException

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
        except ApiException as exc:
            if not exc.status:  # TLS and friends
                raise Unreachable(self.server, str(exc.reason)) from None
            raise
        return response.status, response.reason or "", raw


def _reason(exc: Exception) -> str:
    """urllib3 wraps the cause (refused, reset, timed out) in MaxRetryError: show the cause."""
    inner = getattr(exc, "reason", None)
    return str(inner or exc) or type(exc).__name__


def _chosen(target: Target, contexts: list[Untyped], wanted: str | None) -> Untyped:
    """The context entry to use: ``--context``'s, else the current-context's."""
    chosen = next((c for c in contexts if c.get("name") == wanted), None)
    if target.context and chosen is None:
        names = ", ".join(c.get("name", "?") for c in contexts) or "none"
        raise KubeconfigError(
            f"context {target.context!r} is not in {target.kubeconfig} (contexts: {names})"
        )
    if not chosen:
        raise KubeconfigError(f"{target.kubeconfig} has no current-context; pass --context NAME")
    return chosen


def _refuse_interactive(user_name: str, user: Entry) -> None:
    """A login that asks at a terminal would hang a grade: refuse it, saying what to do."""
    exec_conf = user.get("exec") or {}
    if exec_conf.get("interactiveMode") != "Always":
        return
    if sys.stdin.isatty() and sys.stdout.isatty():
        return
    raise KubeconfigError(
        f"user {user_name!r} logs in with {str(exec_conf.get('command') or '?')!r}, which needs "
        "an interactive login (exec interactiveMode: Always) and no terminal is attached; log "
        "in first and pass a kubeconfig with a token, or run from a terminal"
    )


# --------------------------------------------------------------------------- a user's files


def _documents(target: Target) -> list[Entry]:
    """The kubeconfig files of ``target`` as mappings, in kubectl's order (unreadable: none)."""
    docs = []
    for f in target.files:
        try:
            doc = yaml.safe_load(Path(f).read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    return docs


def _current_context(target: Target, docs: list[Entry]) -> str | None:
    """``--context``, else the first file's current-context (kubectl: the first to set it wins;
    the official Python merger lets the last one win, so we choose and pass it explicitly)."""
    return target.context or next(
        (d["current-context"] for d in docs if d.get("current-context")), None
    )


def _user_entry(docs: list[Entry], name: str) -> Entry:
    """The merged ``users[name].user`` (first file wins, as kubectl merges)."""
    for doc in docs:
        for item in doc.get("users") or []:
            if isinstance(item, dict) and item.get("name") == name:
                return item.get("user") or {}
    return {}
