"""The cluster side of ``gpushare watch``: one apiserver watch per read the checks declare.

Each read a step module declares (``READS``, ``HINT_READS``: key -> GET path) is followed by a
watch of the same objects (``?watch=1`` on the collection, with ``fieldSelector=metadata.name``
for a single object), so a change reaches the screen as an event instead of by polling every
object. A watch that ends (the server's ``timeoutSeconds``, an apiserver restart, ``410 Gone``)
is listed and watched again; while the apiserver cannot be reached the watcher says so once and
retries every :data:`RETRY` seconds, reading the kubeconfig again each time (a lab made anew has
new keys). Whether the apiserver answers is asked apart, every :data:`BEAT` seconds (``GET
/version`` on a new connection): an apiserver shutting down keeps its open watches for a while
and refuses new requests at once, and the screen should say so at once (API concepts,
"Efficient detection of changes": https://kubernetes.io/docs/reference/using-api/api-concepts/).
It speaks through ``http.client``: a watch is one long response read line by line, which our
own grade transport (:mod:`gpushare.kube.transport`, request and answer) does not do.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from gpushare.kube.config import Credentials, Target, load_kubeconfig
from gpushare.kube.errors import KubeconfigError

RETRY = 0.5  # seconds between attempts while the apiserver cannot be reached
BEAT = 1.0  # seconds between two questions of whether the apiserver answers
WATCH_SECONDS = 45  # the server ends each watch after this; it is then watched again
READ_TIMEOUT = 75.0  # a stream silent for longer than the server's own end is a lost one
CLOSE_WAIT = 1.0  # seconds, in all, that close() waits for the watchers to end


@dataclass(frozen=True)
class Event:
    """What the watchers tell the loop: ``change`` (a key's objects changed, or may have while
    it was not watched), ``lost`` (the apiserver cannot be reached) or ``back`` (it answers
    again); the last two have no key."""

    kind: str
    key: str


def watchable(path: str) -> tuple[str, dict[str, str]]:
    """The collection path and query that watch what ``path`` GETs.

    ``/api/v1/namespaces/ns/configmaps/name`` is one object: its collection with
    ``fieldSelector=metadata.name=name``. A collection (``/api/v1/nodes``,
    ``/api/v1/namespaces/ns/pods``, ``/api/v1/pods?fieldSelector=...``) is watched as it is.
    """
    url = urlsplit(path)
    params = dict(parse_qsl(url.query, keep_blank_values=True))
    parts = [p for p in url.path.split("/") if p]
    prefix = 2 if parts[:1] == ["api"] else 3  # api/v1 or apis/group/version
    rest = parts[prefix:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # namespaces/<ns>/<resource>[/<name>]
    if len(rest) == 2:  # <resource>/<name>: one object
        name = rest[1]
        selector = f"metadata.name={name}"
        params["fieldSelector"] = (
            f"{params['fieldSelector']},{selector}" if params.get("fieldSelector") else selector
        )
        collection = parts[: len(parts) - 1]
        return "/" + "/".join(collection), params
    return url.path, params


class ClusterWatch:
    """Watchers for ``paths`` (key -> GET path), each in a thread, telling ``events``."""

    def __init__(self, target: Target, paths: dict[str, str], events: queue.Queue[Event]):
        self.target = target
        self.paths = paths
        self.events = events
        self._stop = threading.Event()
        self._conns: dict[str, http.client.HTTPConnection] = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._follow, args=(key,), name=f"watch {key}", daemon=True)
            for key in paths
        ]
        self._threads.append(threading.Thread(target=self._beat, name="watch beat", daemon=True))

    def start(self) -> ClusterWatch:
        for t in self._threads:
            t.start()
        return self

    def close(self) -> None:
        """Stop every watcher: their streams are shut, so none waits for its next event.

        A watcher between its check of the stop and its connection has no socket to shut
        yet, and then waits on its stream until the server's next event. Such threads are
        daemons, so the joins share one :data:`CLOSE_WAIT` instead of 2 s each in turn (eight
        threads could hold a Ctrl-C for 16 s)."""
        self._stop.set()
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        end = time.monotonic() + CLOSE_WAIT
        for t in self._threads:
            t.join(timeout=max(0.0, end - time.monotonic()))

    def _credentials(self) -> Credentials:
        if len(self.target.files) != 1:
            raise KubeconfigError("gpushare watch reads one kubeconfig file, not a list")
        return load_kubeconfig(self.target.files[0], self.target.context)

    def _beat(self) -> None:
        """Tell ``lost`` when the apiserver stops answering and ``back`` when it answers again
        (the watchers list and watch again by themselves, and tell what changed)."""
        lost = False
        while not self._stop.is_set():
            try:
                creds = self._credentials()
                conn = self._open("/version", creds)
                conn.timeout = 3.0
                self._get(conn, creds, "/version", {}).read()
                if lost:
                    lost = False
                    self.events.put(Event("back", ""))
            except (OSError, http.client.HTTPException, KubeconfigError, ValueError):
                if self._stop.is_set():
                    return
                if not lost:
                    lost = True
                    self.events.put(Event("lost", ""))
            finally:
                self._drop("/version")
            self._stop.wait(BEAT)

    def _follow(self, key: str) -> None:
        collection, params = watchable(self.paths[key])
        version: str | None = None
        while not self._stop.is_set():
            try:
                creds = self._credentials()
                conn = self._open(key, creds)
                if version is None:  # listed: the collection's resourceVersion starts the watch
                    listed = json.loads(
                        self._get(conn, creds, collection, {**params, "limit": "1"}).read()
                    )
                    meta = (listed.get("metadata") or {}) if isinstance(listed, dict) else {}
                    version = str(meta.get("resourceVersion") or "0")
                    self.events.put(Event("change", key))  # what it missed, or its first look
                watch = {
                    **params,
                    "watch": "1",
                    "resourceVersion": version,
                    "allowWatchBookmarks": "true",
                    "timeoutSeconds": str(WATCH_SECONDS),
                }
                version = self._stream(self._get(conn, creds, collection, watch), version, key)
            except (OSError, http.client.HTTPException, KubeconfigError, ValueError):
                version = None  # listed again once it answers (the beat tells the screen)
                if self._stop.wait(RETRY):
                    return
            finally:
                self._drop(key)

    def _open(self, key: str, creds: Credentials) -> http.client.HTTPConnection:
        url = urlsplit(creds.server)
        host = url.hostname or "localhost"
        conn = (
            http.client.HTTPSConnection(
                host, url.port or 443, timeout=READ_TIMEOUT, context=creds.ssl_context
            )
            if url.scheme == "https"
            else http.client.HTTPConnection(host, url.port or 80, timeout=READ_TIMEOUT)
        )
        with self._lock:
            self._conns[key] = conn
        if self._stop.is_set():
            raise OSError("stopped")
        return conn

    def _drop(self, key: str) -> None:
        with self._lock:
            conn = self._conns.pop(key, None)
        if conn is not None:
            conn.close()

    def _get(
        self,
        conn: http.client.HTTPConnection,
        creds: Credentials,
        path: str,
        params: dict[str, str],
    ) -> http.client.HTTPResponse:
        prefix = urlsplit(creds.server).path.rstrip("/")
        headers = {"Accept": "application/json"}
        if creds.token:
            headers["Authorization"] = "Bearer " + creds.token
        conn.request(
            "GET", prefix + path + "?" + urlencode(params, quote_via=quote), headers=headers
        )
        answer = conn.getresponse()
        if answer.status != 200:
            body = answer.read(4096).decode("utf-8", "replace")
            raise http.client.HTTPException(f"HTTP {answer.status} {answer.reason}: {body[:200]}")
        return answer

    def _stream(self, answer: http.client.HTTPResponse, version: str, key: str) -> str | None:
        """Follow one watch's answer from ``version``; the version to go on from, or None to
        list again (the version is too old: ``410 Gone``)."""
        while not self._stop.is_set():
            raw = answer.readline(1 << 24)
            if not raw:
                return version  # the server ended this watch: watch again from here
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            kind = event.get("type") if isinstance(event, dict) else None
            obj = event.get("object") if isinstance(event, dict) else None
            meta = (obj.get("metadata") or {}) if isinstance(obj, dict) else {}
            if kind == "ERROR":
                return None
            if meta.get("resourceVersion"):
                version = str(meta["resourceVersion"])
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.events.put(Event("change", key))
        return version
