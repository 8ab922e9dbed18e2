"""Our lean REST client against the official ``kubernetes`` client, on the same real lab.

gpushare reads the lab's own kubeconfig with :mod:`gpushare.kube.transport` (the official
client's imports would take a grade over half the kubectl script's time: docs/performance.md,
"The small client"). This proves the two see the same objects and that errors are the
apiserver's own.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from typing import ClassVar

import pytest

from gpushare.kube.config import Credentials, load_kubeconfig
from gpushare.kube.errors import ApiError, KubeconfigError, Unreachable
from gpushare.kube.transport import Client


def test_same_view_as_the_official_client(lab, client, subtests):
    kubernetes = pytest.importorskip("kubernetes")
    api = kubernetes.client.CoreV1Api(
        kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig))
    )
    with subtests.test("nodes"):
        ours = {
            n["metadata"]["name"]: n["status"]["capacity"]
            for n in client.get("/api/v1/nodes")["items"]
        }
        theirs = {n.metadata.name: n.status.capacity for n in api.list_node().items}
        assert ours == theirs
    with subtests.test("namespaces"):
        ours = sorted(n["metadata"]["name"] for n in client.get("/api/v1/namespaces")["items"])
        assert ours == sorted(n.metadata.name for n in api.list_namespace().items)
    with subtests.test("version"):
        assert client.get("/version")["gitVersion"] == "v1.36.3"


def test_errors_carry_the_apiserver_status(client):
    assert client.get_or_none("/api/v1/namespaces/does-not-exist") is None
    with pytest.raises(ApiError) as err:
        client.create("/api/v1/namespaces", {"metadata": {"name": "Not_Valid"}}, dry_run=True)
    assert err.value.status == 422
    assert "Not_Valid" in err.value.message


def test_bad_kubeconfigs_are_clear(tmp_path):
    with pytest.raises(KubeconfigError, match="cannot read"):
        load_kubeconfig(tmp_path / "missing")
    bad = tmp_path / "bad"
    bad.write_text("clusters: [\n")
    with pytest.raises(KubeconfigError, match="not valid YAML"):
        load_kubeconfig(bad)
    nocontext = tmp_path / "nocontext"
    nocontext.write_text("apiVersion: v1\nkind: Config\ncurrent-context: x\n")
    with pytest.raises(KubeconfigError, match="no context named 'x'"):
        Client.from_kubeconfig(nocontext)


# --- the HTTP/1.1 client itself, against the standard library's HTTP server -----------------


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers the way servers do: with a length, chunked, to the end of the connection, and
    by closing a kept-alive connection without a word (the keep-alive race we retry once)."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []

    def log_message(self, *_args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        if self.path.startswith("/length"):
            self._send(200, b'{"way": "length"}', Content_Length="17")
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b'{"way": ', b'"chunked", "pad": "' + b"x" * 70000 + b'"}'):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/until-close":
            self._send(200, b'{"way": "close"}', Connection="close")
            self.close_connection = True
        elif self.path == "/error":
            body = json.dumps({"reason": "Forbidden", "message": "no, thanks"}).encode()
            self._send(403, body, Content_Length=str(len(body)))
        elif self.path == "/drop":
            self._send(200, b"{}", Content_Length="2")
            self.close_connection = True  # no "Connection: close": the client learns late

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        body = json.dumps({"got": json.loads(self.rfile.read(length))}).encode()
        self._send(201, body, Content_Length=str(len(body)))


@pytest.fixture
def http_client():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Handler.seen = []
    creds = Credentials(
        server=f"http://127.0.0.1:{server.server_port}", ssl_context=None, token=None
    )
    client = Client(creds, timeout=5)
    yield client
    client.close()
    server.shutdown()
    server.server_close()


def test_bodies_by_length_chunked_and_until_close(http_client):
    assert http_client.get("/length") == {"way": "length"}
    chunked = http_client.get("/chunked")
    assert chunked["way"] == "chunked" and len(chunked["pad"]) == 70000
    assert http_client.get("/until-close") == {"way": "close"}
    assert http_client.get("/length") == {"way": "length"}  # a new connection after close
    assert http_client.create("/things", {"a": [1, "ü"]}) == {"got": {"a": [1, "ü"]}}


def test_query_parameters_are_percent_encoded(http_client):
    http_client.get("/length", labelSelector="app in (a,b),x!=y", fieldSelector="a=b&c")
    assert _Handler.seen[-1] == (
        "/length?labelSelector=app%20in%20%28a%2Cb%29%2Cx%21%3Dy&fieldSelector=a%3Db%26c"
    )


def test_a_dropped_keep_alive_connection_is_retried_once(http_client):
    assert http_client.get("/drop") == {}
    assert http_client.get("/length") == {"way": "length"}  # the first try hits a closed socket
    assert _Handler.seen == ["/drop", "/length"]


def test_error_status_keeps_the_servers_message(http_client):
    with pytest.raises(ApiError) as err:
        http_client.get("/error")
    assert (err.value.status, err.value.reason, err.value.message) == (
        403,
        "Forbidden",
        "no, thanks",
    )


def test_nothing_listening_is_unreachable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    creds = Credentials(server=f"https://127.0.0.1:{port}", ssl_context=None, token=None)
    with pytest.raises(Unreachable):
        Client(creds, timeout=2).get("/version")


def test_a_hung_apiserver_costs_the_cluster_read_one_timeout():
    """The read is sequential: after one query times out the others fail at once, so a hung
    apiserver costs one timeout, not one per query (counted as connections, not timed)."""
    from gpulab import QUERIES
    from gpushare.grading.labstate import LabState

    accepted: list[socket.socket] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept_and_hang() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])  # never answered
            except OSError:
                continue

    acceptor = threading.Thread(target=accept_and_hang)
    acceptor.start()
    try:
        creds = Credentials(
            server=f"http://127.0.0.1:{listener.getsockname()[1]}", ssl_context=None, token=None
        )
        state = LabState(Client(creds, timeout=0.5), reads=QUERIES).start()
        errors = {key: state.get(key).unreadable for key in {**QUERIES, **LabState.BASE}}
        state.close()
    finally:
        stop.set()
        acceptor.join()
        for conn in accepted:
            conn.close()
        listener.close()
    assert all(errors.values()), errors
    assert len(accepted) == 1
