"""The printed Job's pod settings, and their translation to podman (deploy/pod.py) that
``make images`` runs: no podman needed here (CI skips the image builds, not these)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gpushare.classroom import job

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("deploy_pod", ROOT / "deploy" / "pod.py")
assert _spec is not None and _spec.loader is not None
pod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pod)

VOLUMES = {"snapshots": "/h/subs", "results": "/h/results", "tmp": "/h/tmp"}


def _spec_of(**kw) -> dict:
    return pod.pod_spec(job.manifests(image="img", shards=2, grade_args=["--seed", "0"], **kw))


def test_the_printed_pod_asks_for_what_bubblewrap_needs_and_nothing_more():
    spec = _spec_of()
    sc = spec["containers"][0]["securityContext"]
    assert spec["hostUsers"] is False
    assert sc["procMount"] == "Unmasked"
    assert sc["seccompProfile"] == {"type": "Unconfined"}
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 1000


def test_without_the_sandbox_the_pod_keeps_the_runtime_defaults():
    spec = _spec_of(unsafe_no_sandbox=True)
    sc = spec["containers"][0]["securityContext"]
    assert "hostUsers" not in spec and "procMount" not in sc
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_pod_becomes_podman_flags_field_by_field():
    args = pod.run_args(_spec_of(), index=1, image="img", volumes=VOLUMES)
    line = " ".join(args)
    for flag in (
        "--userns=auto",
        "--user 1000:1000",
        "--group-add 1000",
        "--security-opt no-new-privileges",
        "--cap-drop=all",
        "--read-only --read-only-tmpfs=false",
        "--security-opt unmask=ALL",
        "--security-opt seccomp=unconfined",
        "--security-opt apparmor=unconfined",
        "--memory 2g",
        "-e JOB_COMPLETION_INDEX=1",
        "-v /h/subs:/snapshots:ro",
        "-v /h/results:/results ",
        "-v /h/tmp:/tmp",
    ):
        assert flag in line, flag
    entry = args.index("--entrypoint")
    assert args[entry + 1 : entry + 3] == ["gpushare", "img"]
    assert args[entry + 3 :] == [
        "class",
        "grade",
        "/snapshots",
        "--out",
        "/results/shard-1",
        "--shard",
        "1/2",
        "--seed",
        "0",
    ]


@pytest.mark.parametrize(
    ("setting", "flag"),
    [
        ("hostUsers", "--userns=auto"),
        ("procMount", "unmask=ALL"),
        ("seccompProfile", "seccomp=unconfined"),
        ("appArmorProfile", "apparmor=unconfined"),
    ],
)
def test_a_setting_left_out_is_its_flag_left_out(setting, flag):
    full = pod.run_args(_spec_of(), index=0, image="img", volumes=VOLUMES)
    less = pod.run_args(_spec_of(), index=0, image="img", volumes=VOLUMES, drop={setting})
    assert flag in " ".join(full) and flag not in " ".join(less)
    assert len(full) - len(less) in (1, 2)


def test_a_localhost_profile_is_read_from_the_kubelet_folder_given():
    spec = _spec_of()
    spec["containers"][0]["securityContext"]["seccompProfile"] = {
        "type": "Localhost",
        "localhostProfile": "seccomp-bwrap.json",
    }
    args = pod.run_args(spec, index=0, image="img", volumes=VOLUMES, localhost_profiles="/k")
    assert "seccomp=/k/seccomp-bwrap.json" in args
    with pytest.raises(ValueError):
        pod.run_args(spec, index=0, image="img", volumes=VOLUMES)


def test_kubelet_expansion_of_commands():
    env = {"A": "1"}
    assert pod.expand("x-$(A)/$(B)", env) == "x-1/$(B)"
    assert pod.expand("$$(A)", env) == "$(A)"


def test_what_cannot_be_translated_is_refused():
    spec = _spec_of()
    with pytest.raises(ValueError, match="volume 'tmp'"):
        pod.run_args(spec, index=0, image="img", volumes={"snapshots": "/a", "results": "/b"})
    with pytest.raises(ValueError, match="unknown settings"):
        pod.run_args(spec, index=0, image="img", volumes=VOLUMES, drop={"privileged"})


def test_the_shipped_seccomp_profile_allows_what_bwrap_needs():
    """deploy/seccomp-bwrap.json: podman's default profile, which already allows unshare,
    clone and mount, plus sethostname and setdomainname (bwrap's --hostname)."""
    profile = json.loads((ROOT / "deploy" / "seccomp-bwrap.json").read_text())
    allowed = {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("includes") and not rule.get("args")
        for name in rule["names"]
    }
    assert {"sethostname", "unshare", "clone", "mount", "pivot_root"} <= allowed
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
