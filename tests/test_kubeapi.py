"""Our lean REST client against the official ``kubernetes`` client, on the same real lab.

gpushare reads the cluster with :mod:`gpushare.kubeapi` (the official client costs more than
half a second to import, a grade has one second). This proves the two see the same objects
and that errors are the apiserver's own.
"""

from __future__ import annotations

import pytest

from gpushare.kubeapi import ApiError, Client, KubeconfigError, load_kubeconfig


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
