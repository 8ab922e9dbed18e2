"""A lab's edges are its ``lab.toml``'s: nodes, seeds, dry-run resources, runtime packages and
its default language, read by :mod:`gpushare.lab.definition` and by no one else's guess."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpushare.grading.labstate import LabState
from gpushare.lab import definition, nodes
from gpushare.reports import messages
from gpushare.sandbox import runtime
from tests.helpers import ROOT

# lab-node-0 as `up` created it before the lab declared its nodes (the engine's literal then)
OLD_NODE_0 = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "lab-node-0",
        "labels": {
            "kubernetes.io/hostname": "lab-node-0",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "type": "kwok",
        },
        "annotations": {"kwok.x-k8s.io/node": "fake"},
    },
    "spec": {},
    "status": {
        "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"},
        "allocatable": {
            "cpu": "32",
            "memory": "256Gi",
            "pods": "110",
            "ephemeral-storage": "500Gi",
        },
    },
}


def _lab(tmp_path: Path, text: str, **files: str) -> Path:
    graders = tmp_path / "graders"
    graders.mkdir(exist_ok=True)
    (graders / "lab.toml").write_text(textwrap.dedent(text))
    for name, content in files.items():
        (graders / name).write_text(textwrap.dedent(content))
    return graders


def test_the_gpu_lab_declares_what_the_engine_assumed():
    lab = definition.load(ROOT / "graders" / "lab.toml")
    assert nodes.node_manifest(lab.nodes[0]) == OLD_NODE_0
    assert [n.name for n in lab.nodes] == ["lab-node-0", "lab-node-1", "lab-node-2"]
    assert lab.default_lang == "zh"
    assert lab.runtime_packages == ("yaml", "_yaml")
    assert lab.dry_run_kinds == {"Pod"} and lab.seeds == ()
    pod = {"apiVersion": "v1", "kind": "Pod"}
    assert lab.collection(pod, "team-a") == "/api/v1/namespaces/team-a/pods"


def test_a_lab_of_another_shape(tmp_path):
    graders = _lab(
        tmp_path,
        """\
        default_lang = "ko"
        [nodes]
        names = ["web-0", "db-0"]
        capacity = { cpu = "4", memory = "8Gi", pods = "20" }
        labels = { "kubernetes.io/hostname" = "{name}", tier = "web" }
        [nodes.node.db-0]
        labels = { tier = "db" }
        taints = [{ key = "dedicated", value = "db", effect = "NoSchedule" }]
        capacity = { memory = "64Gi" }
        [resources]
        Namespace = "namespaces"
        Role = "roles"
        Deployment = "deployments"
        [dry_run]
        kinds = ["Deployment"]
        [seed]
        files = ["seed.yaml"]
        [sandbox]
        runtime_packages = []
        """,
        **{
            "seed.yaml": """\
            apiVersion: v1
            kind: Namespace
            metadata: {name: shop}
            ---
            apiVersion: rbac.authorization.k8s.io/v1
            kind: Role
            metadata: {name: reader, namespace: shop}
            rules: []
            """
        },
    )
    lab = definition.load(graders / "lab.toml")
    web, db = lab.nodes
    assert web.labels == {"kubernetes.io/hostname": "web-0", "tier": "web"} and web.taints == ()
    assert db.labels == {"kubernetes.io/hostname": "db-0", "tier": "db"}
    assert db.capacity == {"cpu": "4", "memory": "64Gi", "pods": "20"}
    assert nodes.node_manifest(db)["spec"] == {
        "taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    }
    ns, role = lab.seeds
    assert lab.collection(ns, None) == "/api/v1/namespaces"
    assert lab.collection(role, "shop") == (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/roles"
    )
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment"}
    assert lab.collection(deployment, "shop") == "/apis/apps/v1/namespaces/shop/deployments"
    with pytest.raises(definition.LabDefinitionError, match="Pod"):
        lab.collection({"apiVersion": "v1", "kind": "Pod"}, "shop")
    assert lab.default_lang == "ko" and lab.runtime_packages == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[nodes]\nnames = []\n", "names must list"),
        ('default_lang = "english"\n[nodes]\nnames = ["a"]\n', "two-letter"),
        ('[nodes]\nnames = ["a"]\n[dry_run]\nkinds = ["Pod"]\n', "no plural"),
        ('[nodes]\nnames = ["a"]\n[nodes.node.b]\nlabels = {}\n', "a node of"),
        ('[nodes]\nnames = ["a"]\ntaints = [{ effect = "NoSchedule" }]\n', "taints"),
        ('[nodes]\nnames = ["a"]\n[seed]\nfiles = ["seed.yaml"]\n', "seed"),
    ],
)
def test_a_definition_the_engine_cannot_use_says_why(tmp_path, text, says):
    graders = _lab(tmp_path, text, **({"seed.yaml": "kind: Pod\nmetadata: {name: x}\n"}))
    with pytest.raises(definition.LabDefinitionError, match=says):
        definition.load(graders / "lab.toml")


def test_what_a_lab_leaves_out_it_does_not_get(tmp_path, monkeypatch):
    graders = _lab(tmp_path, '[nodes]\nnames = ["only"]\n')
    monkeypatch.setenv("GPUSHARE_GRADERS", str(graders))
    for var in ("GPUSHARE_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    lab = definition.load()
    assert lab.default_lang == "en" and messages.resolve_lang(None) == "en"
    assert runtime._packages() == []  # no PyYAML for a lab that names none
    state = LabState(None)  # no client: the lab's own slip is found before any request
    fetched = state._dry_run("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {}})
    assert fetched.unreadable and "[dry_run] kinds" in fetched.unreadable


def test_the_lab_names_the_default_language(tmp_path, monkeypatch):
    graders = _lab(tmp_path, 'default_lang = "ko"\n[nodes]\nnames = ["only"]\n')
    monkeypatch.setenv("GPUSHARE_GRADERS", str(graders))
    for var in ("GPUSHARE_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    assert messages.resolve_lang(None) == "ko" and messages.langs()[0] == "ko"


def test_a_snapshot_of_a_role_is_read_as_a_role_is_shaped():
    """A Role's rules name lists where a Pod's containers name a mapping (``resources``): the
    snapshot's shape check reads each by its kind, and a Pod's list stays refused."""
    from gpushare.submissions.snapshot import cluster_problem

    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    role = {"kind": "Role", "metadata": {"name": "r"}, "rules": rules}
    roles = {"kind": "RoleList", "items": [{"metadata": {"name": "r"}, "rules": rules}]}
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [rules[0]]}}
    assert cluster_problem({"role": {"path": "/x", "value": role}}) is None
    assert cluster_problem({"roles": {"path": "/x", "value": roles}}) is None
    assert cluster_problem({"pod": {"path": "/x", "value": pod}}) == (
        "answer 'pod': resources is not an object"
    )
    bad = {**role, "rules": [{"resources": "pods"}]}
    assert cluster_problem({"role": {"path": "/x", "value": bad}}) == (
        "answer 'role': resources is not a list of strings"
    )
