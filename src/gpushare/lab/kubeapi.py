"""A small, fast Kubernetes REST client: kubeconfig in, JSON out.

Why not the official ``kubernetes`` package here: importing it costs more than half a second,
and a full grade must finish in under one. Grading and the lab lifecycle only need GET, a few
writes and server-side dry-run, over one keep-alive HTTPS connection per thread, so this module
speaks the REST API directly with the standard library. It even speaks HTTP/1.1 itself (a
request line, headers, a Content-Length or chunked body): ``http.client`` drags in the
``email`` package, some 30 ms of a grade that has to fit in half a second.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class ApiError(Exception):
    """The apiserver answered with an error status (its Status message is kept verbatim)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class Unreachable(Exception):
    """No apiserver answered at ``server``."""

    def __init__(self, server: str, detail: str) -> None:
        super().__init__(f"cannot reach the Kubernetes API at {server}: {detail}")
        self.server = server
        self.detail = detail


class KubeconfigError(Exception):
    """The kubeconfig is missing or unusable."""


@dataclass
class Credentials:
    """Where the apiserver is and how to prove who we are."""

    server: str
    ssl_context: ssl.SSLContext | None
    token: str | None
    # the names the kubeconfig gives them, as every grade records what it judged
    context: str = ""
    cluster: str = ""
    user: str = ""


def _materialize(entry: dict[str, Any], key: str, base: Path, keep: list[int]) -> str | None:
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

    def pick(kind: str, name: str | None) -> dict[str, Any]:
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
    tmp: list[int] = []
    ctx_ssl = None
    try:
        if server.startswith("https"):
            # Not ssl.create_default_context(): loading the system CA store costs ~0.2 s, and a
            # cluster's kubeconfig names its own CA (only without one is the system store used).
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


class _Disconnected(Exception):
    """The server closed a keep-alive connection before answering: retry once on a new one."""


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_MAX_LINE = 64 * 1024


def _quote(value: str) -> str:
    """Percent-encode a query component (RFC 3986 unreserved characters stay as they are)."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in value.encode())


def _split_server(server: str) -> tuple[bool, str, int, str]:
    """(https, host, port, path prefix) of ``https://host:port/prefix``."""
    scheme, sep, rest = server.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise KubeconfigError(f"server {server!r} is not an http(s) URL")
    netloc, _, prefix = rest.partition("/")
    https = scheme == "https"
    host, port = netloc, 443 if https else 80
    if netloc.startswith("["):  # [::1]:6443
        host, _, tail = netloc[1:].partition("]")
        if tail.startswith(":"):
            port = int(tail[1:])
    elif netloc.count(":") == 1:
        host, _, port_text = netloc.partition(":")
        port = int(port_text)
    return https, host or "localhost", port, ("/" + prefix).rstrip("/")


class _Connection:
    """One keep-alive HTTP/1.1 connection: just what the apiserver's JSON answers need."""

    def __init__(self, host: str, port: int, timeout: float, context: ssl.SSLContext | None):
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.reader = sock.makefile("rb")
        name = f"[{host}]" if ":" in host else host
        self.host = name if port in (80, 443) else f"{name}:{port}"

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def exchange(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, str, bytes, bool]:
        """Send one request, return (status, reason, body, keep_alive)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        status_line = self.reader.readline(_MAX_LINE)
        if not status_line:
            raise _Disconnected("the server closed the connection")
        version, _, rest = status_line.decode("latin-1").strip().partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or not code.isdigit():
            raise OSError(f"not an HTTP answer: {status_line[:80]!r}")
        fields: dict[str, str] = {}
        while True:
            line = self.reader.readline(_MAX_LINE)
            if not line:
                raise OSError("the connection closed inside the headers")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("latin-1").partition(":")
            fields[name.strip().lower()] = value.strip()
        status = int(code)
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            data = b""
        elif "chunked" in fields.get("transfer-encoding", "").lower():
            data = self._chunked()
        elif "content-length" in fields:
            data = self._exactly(int(fields["content-length"]))
        else:  # no length: the body runs to the end of the connection
            data = self.reader.read()
            fields["connection"] = "close"
        keep_alive = fields.get("connection", "").lower() != "close"
        return status, reason, data, keep_alive

    def _exactly(self, n: int) -> bytes:
        data = self.reader.read(n)
        if len(data) != n:
            raise OSError(f"the connection closed after {len(data)} of {n} body bytes")
        return data

    def _chunked(self) -> bytes:
        parts = []
        while True:
            size_line = self.reader.readline(_MAX_LINE)
            size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
            if size == 0:
                while self.reader.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self._exactly(size))
            self._exactly(2)  # CRLF after each chunk


def decode(status: int, reason: str, raw: bytes | None) -> Any:
    """An apiserver's answer: JSON (or text), or ApiError with its Status reason and message."""
    text = (raw or b"").decode("utf-8", "replace")
    if status >= 400:
        try:
            answer = json.loads(text)
            raise ApiError(status, answer.get("reason", ""), answer.get("message", text))
        except (ValueError, AttributeError):
            raise ApiError(status, reason, text) from None
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class Verbs:
    """The calls gpushare makes, in terms of a client's ``request`` (ours or the official)."""

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Any:
        raise NotImplementedError

    def get(self, path: str, **params: str) -> Any:
        return self.request("GET", path, params=params or None)

    def get_or_none(self, path: str) -> Any:
        """GET, but a 404 is ``None`` rather than an error: absence is an answer in grading."""
        try:
            return self.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, path: str, body: Any, *, dry_run: bool = False) -> Any:
        return self.request("POST", path, body, params={"dryRun": "All"} if dry_run else None)

    def replace(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str, *, grace: int | None = None) -> Any:
        params = {"gracePeriodSeconds": str(grace)} if grace is not None else None
        try:
            return self.request("DELETE", path, params=params)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise


class Client(Verbs):
    """Thread-safe: each thread keeps its own keep-alive connection."""

    def __init__(self, creds: Credentials, timeout: float = 10.0) -> None:
        self.creds = creds
        self.timeout = timeout
        self._https, self._host, self._port, self._prefix = _split_server(creds.server)
        self._local = threading.local()

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str], context: str | None = None, timeout: float = 10.0
    ) -> Client:
        return cls(load_kubeconfig(path, context), timeout=timeout)

    @property
    def server(self) -> str:
        return self.creds.server

    def _conn(self) -> _Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            context = self.creds.ssl_context if self._https else None
            conn = _Connection(self._host, self._port, self.timeout, context)
            self._local.conn = conn
        conn.sock.settimeout(self.timeout)
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Any:
        """One API call; JSON in and out. Retries once on a dropped keep-alive connection."""
        url = self._prefix + path
        if params:
            url += "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in params.items())
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        if self.creds.token:
            headers["Authorization"] = "Bearer " + self.creds.token
        for attempt in (1, 2):
            try:
                conn = self._conn()
                status, reason, raw, keep_alive = conn.exchange(method, url, headers, data)
                if not keep_alive:
                    self.close()
                break
            except (_Disconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if attempt == 2:
                    raise Unreachable(self.server, str(exc)) from exc
            except (OSError, ValueError) as exc:  # ValueError: a malformed length or chunk size
                self.close()
                raise Unreachable(self.server, str(exc) or type(exc).__name__) from exc
        return decode(status, reason, raw)
