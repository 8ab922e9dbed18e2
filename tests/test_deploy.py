"""The printed Job's pod settings, and their translation to podman (deploy/pod.py) that
``make images`` runs: no podman needed here (CI skips the image builds, not these)."""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from deploy import job, pod

ROOT = Path(__file__).resolve().parents[1]

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


def test_the_grading_job_and_a_printed_merge_are_told_apart():
    objects = job.manifests(image="img", shards=2)
    assert pod.pod_spec(objects)["containers"][0]["command"][:3] == ["gpushare", "class", "grade"]
    assert pod.merge_spec(objects) is None
    merge = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"containers": [{"name": "m", "command": ["sh", "-c", "gpushare class merge x"]}]},
    }
    assert pod.merge_spec([*objects, merge]) is merge["spec"]
    assert pod.pod_spec([*objects, merge]) is pod.pod_spec(objects)


def test_pods_sharing_volumes_share_one_range():
    """What the kubelet's id-mapped volume mounts give: the files of the pods' uid 1000 have
    one owner on the volumes, whichever pod (user-namespaced or not) wrote them."""
    for spec in (_spec_of(), _spec_of(unsafe_no_sandbox=True)):
        args = pod.run_args(spec, index=0, image="img", volumes=VOLUMES, userns_range=(7, 9))
        assert args[args.index("--uidmap") + 1] == "0:7:9"
        assert args[args.index("--gidmap") + 1] == "0:7:9"
        assert "--userns=auto" not in args


def test_init_containers_and_pod_level_profiles():
    spec = _spec_of()
    spec["initContainers"] = [
        {"name": "wait", "command": ["sh", "-c", "true"], "securityContext": {"runAsUser": 7}}
    ]
    spec["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    del spec["containers"][0]["securityContext"]["seccompProfile"]
    args = pod.run_args(spec, index=0, image="img", volumes=VOLUMES, container="wait")
    assert "--user" in args and args[args.index("--user") + 1] == "7:1000"
    assert "seccomp=unconfined" in args  # the pod's profile, for every container
    assert args[-3:] == ["img", "-c", "true"]
    with pytest.raises(ValueError, match="no container"):
        pod.run_args(spec, index=0, image="img", volumes=VOLUMES, container="nope")


def test_kubelet_expansion_of_commands():
    env = {"A": "1"}
    assert pod.expand("x-$(A)/$(B)", env) == "x-1/$(B)"
    assert pod.expand("$$(A)", env) == "$(A)"


def test_what_cannot_be_translated_is_refused():
    spec = _spec_of()
    with pytest.raises(ValueError, match="volume 'results'"):
        pod.run_args(spec, index=0, image="img", volumes={"snapshots": "/a", "tmp": "/b"})
    with pytest.raises(ValueError, match="unknown settings"):
        pod.run_args(spec, index=0, image="img", volumes=VOLUMES, drop={"privileged"})


def test_an_empty_dir_without_a_host_folder_is_a_tmpfs_of_its_size():
    args = pod.run_args(
        _spec_of(), index=0, image="img", volumes={"snapshots": "/a", "results": "/b"}
    )
    at = args.index("--tmpfs")
    assert args[at + 1] == "/tmp:rw,exec,nosuid,nodev,mode=1777,size=1g"


def _podman(*extra: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "deploy.job", "--podman", *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.count("\n") == 1 and done.stderr == ""  # one line
    return shlex.split(done.stdout)


def _flags(argv: list[str], image: str) -> list[str]:
    """The security and resource flags of a ``podman run`` (before the image): its folders
    (``-v``, ``--tmpfs``) and environment (``-e``) left out, which differ by design."""
    words = argv[: argv.index(image)]
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("-v", "--tmpfs", "-e", "--entrypoint"):
            skip = True
        else:
            out.append(word)
    return out


def test_the_one_line_run_has_exactly_the_grading_pods_settings():
    """The podman line for a machine without Kubernetes: the Job's grading pod as
    deploy/pod.py translates it for make images, less only its shard and its claims."""
    image = "registry.example/gpushare-grade:0.1.0"
    line = _podman("--image", image, "--expect", "30", "--lang", "en")
    assert line[:3] == ["podman", "run", "--rm"]
    pods = pod.run_args(
        pod.pod_spec(job.manifests(image=image, shards=1, grade_args=["--expect", "30"])),
        index=0, image=image, volumes=VOLUMES,
    )  # fmt: skip
    assert _flags(line[2:], image) == _flags(pods, image)
    for needed in ("--userns=auto", "unmask=ALL", "seccomp=unconfined", "--cap-drop=all"):
        assert needed in " ".join(line), needed
    # the volumes: the snapshots read-only, the class written, a scratch /tmp
    assert "$PWD/subs:/subs:ro" in line and "$PWD/out:/out" in line
    assert line[line.index("--tmpfs") + 1].startswith("/tmp:rw,exec")
    # the image's own entrypoint-less CMD replaced by the grade itself
    assert line[line.index(image) + 1 :] == [
        "gpushare", "class", "grade", "/subs", "--out", "/out", "--expect", "30",
        "--seed", "0", "--timeout", "60", "--jobs", "2", "--lang", "en",
    ]  # fmt: skip
    # the shell expands $PWD: the printed words are quoted for it
    assert '"$PWD/subs:/subs:ro"' in subprocess.run(
        [sys.executable, "-m", "deploy.job", "--podman"], capture_output=True, text=True,
        cwd=ROOT, check=True,
    ).stdout  # fmt: skip


def test_the_one_line_run_defaults_to_the_image_make_images_tags_with_the_version():
    from gpushare import version

    line = _podman()
    assert f"localhost/gpushare-grade:{version()}" in line
    sandboxless = _podman("--unsafe-no-sandbox")
    assert "--userns=auto" not in sandboxless and "--unsafe-no-sandbox" in sandboxless


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


# --- on the lab's real apiserver (Kubernetes 1.36): what the cluster accepts ----------------


def _pod(spec: dict, namespace: str, name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def _localhost_seccomp(spec: dict) -> dict:
    """The printed pod with deploy/seccomp-bwrap.json as a Localhost profile and the node's
    default AppArmor profile (what a namespace at Pod Security "baseline" admits)."""
    spec = json.loads(json.dumps(spec))
    sc = spec["containers"][0]["securityContext"]
    sc["seccompProfile"] = {"type": "Localhost", "localhostProfile": "gpushare/seccomp-bwrap.json"}
    del sc["appArmorProfile"]
    return spec


def test_the_cluster_takes_the_pod_settings_at_the_pod_security_level_the_readme_says(lab):
    """Server-side dry-runs of the printed pod: the apiserver keeps hostUsers: false and
    procMount: Unmasked (a disabled feature would drop them silently), refuses Unmasked
    without hostUsers: false, and Pod Security admits the printed pod at "privileged" only,
    the Localhost-profile variant at "baseline" (policy 1.35+), neither at "restricted"."""
    from tests.helpers import kubectl

    spec = _spec_of()
    base = f"deploy-{os.getpid()}"
    levels = ("privileged", "baseline", "restricted")
    for level in levels:
        kubectl(lab, "create", "namespace", f"{base}-{level}")
        kubectl(lab, "label", "namespace", f"{base}-{level}",
                f"pod-security.kubernetes.io/enforce={level}")  # fmt: skip
    try:
        # a pod is admitted once the namespace's default service account exists (made by the
        # controller manager shortly after the namespace)
        deadline = time.monotonic() + 30
        for level in levels:
            while kubectl(lab, "get", "serviceaccount", "default", "-n", f"{base}-{level}",
                          check=False).returncode != 0:  # fmt: skip
                assert time.monotonic() < deadline, "no default service account after 30 s"
                time.sleep(0.2)

        def dry_run(pod_spec: dict, level: str):
            return kubectl(
                lab, "create", "--dry-run=server", "-o", "json", "-f", "-",
                input=_pod(pod_spec, f"{base}-{level}", "grade-0"), check=False,
            )  # fmt: skip

        done = dry_run(spec, "privileged")
        assert done.returncode == 0, done.stderr
        kept = json.loads(done.stdout)["spec"]
        assert kept["hostUsers"] is False
        assert kept["containers"][0]["securityContext"]["procMount"] == "Unmasked"

        without = json.loads(json.dumps(spec))
        del without["hostUsers"]
        refused = dry_run(without, "privileged")
        assert refused.returncode != 0
        assert "`hostUsers` must be false to use `Unmasked`" in refused.stderr

        refused = dry_run(spec, "baseline")
        assert refused.returncode != 0 and "seccompProfile" in refused.stderr, refused.stderr
        assert dry_run(_localhost_seccomp(spec), "baseline").returncode == 0
        refused = dry_run(_localhost_seccomp(spec), "restricted")
        assert refused.returncode != 0 and "procMount" in refused.stderr, refused.stderr
    finally:
        for level in levels:
            kubectl(lab, "delete", "namespace", f"{base}-{level}", "--wait=false", check=False)


def _through_the_first_job(script: str) -> str:
    """The printed script as printed, up to the apply of its first Job (the grading one), less
    the loader's streaming: ``kubectl exec`` and a Ready pod need a kubelet, and kwok runs no
    container. Every other line (the count, the namespace, its wait, the claims, the loader's
    and the Job's applies, the leftovers' deletes) runs as printed."""
    preamble, *sections = script.split("\n\n# ")
    kept = [preamble]
    for section in sections:
        lines = section.split("\n")
        if lines[0].startswith(("2. ", "3. ")):  # the loader's and the Job's: to their YAML
            lines = lines[: lines.index(job.HEREDOC, 1) + 1]
        kept.append("\n".join(lines))
        if lines[0].startswith("3. "):
            break
    return "\n\n# ".join(kept) + "\n"


def test_the_printed_script_creates_its_namespace_and_runs_again_on_a_fresh_cluster(lab, tmp_path):
    """On a cluster without the namespace, the printed procedure creates it at the Pod Security
    level it prints, and the apiserver accepts every object through the grading Job, whose pods
    its admission lets the Job controller create; run a second time, it passes again."""
    from gpushare.lab import binaries
    from tests.helpers import kubectl

    ns = f"fresh-{os.getpid()}"
    assert kubectl(lab, "get", "namespace", ns, check=False).returncode != 0
    proc = subprocess.run(
        [sys.executable, "-m", "deploy.job", "--image", "registry.example/gpushare-grade:0.1.0",
         "--shards", "2", "--expect", "1", "--namespace", ns],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=True,
    )  # fmt: skip
    script = tmp_path / "class-job.sh"
    script.write_text(_through_the_first_job(proc.stdout))
    assert "wait_job gpushare-class" not in script.read_text()
    assert "kind: Job" in script.read_text() and "k exec" not in script.read_text()
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy2(ROOT / "examples" / "reference.gpushare.tgz", subs)
    env = {
        **os.environ,
        "KUBECTL": str(binaries.find("kubectl")),
        "KUBECONFIG": str(lab.kubeconfig),
    }
    try:
        for run in ("first", "again"):
            done = subprocess.run(
                ["bash", str(script), str(subs)], capture_output=True, text=True, env=env,
                timeout=180,
            )  # fmt: skip
            assert done.returncode == 0, (run, done.stdout, done.stderr)
            assert "job.batch/gpushare-class created" in done.stdout, (run, done.stdout)
            made = json.loads(kubectl(lab, "get", "namespace", ns, "-o", "json").stdout)
            labels = made["metadata"]["labels"]
            assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
            # the Job controller's pods, admitted by Pod Security at the namespace's level
            deadline = time.monotonic() + 60
            while True:
                pods = json.loads(
                    kubectl(lab, "get", "pods", "-n", ns, "-l", "job-name=gpushare-class",
                            "-o", "json").stdout
                )["items"]  # fmt: skip
                if len(pods) == 2:
                    break
                events = kubectl(lab, "get", "events", "-n", ns, check=False).stdout
                assert time.monotonic() < deadline, f"no grading pods after 60 s:\n{events}"
                time.sleep(0.5)
            assert "pod/gpushare-class-loader created" in done.stdout
        # the learners' lab pod: admitted at the level the namespace has
        admitted = kubectl(
            lab, "create", "--dry-run=server", "-n", ns, "-f", "-",
            input=json.dumps(lab_pod()), check=False,
        )  # fmt: skip
        assert admitted.returncode == 0, admitted.stderr
    finally:
        kubectl(lab, "delete", "namespace", ns, "--wait=false", check=False)


# --- the images' build: what each Containerfile copies (no image built here) ----------------


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether ``.containerignore`` keeps ``path`` out of the build context (its patterns as
    podman reads them: a folder's pattern holds what is under it, ``**/`` any depth)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatch(p, pattern[3:]) for p in parts):
                return True
        elif any(fnmatch.fnmatch(p, pattern.rstrip("/")) for p in prefixes):
            return True
    return False


def _context() -> list[str]:
    """The build context: the checkout's files less what ``.containerignore`` leaves out."""
    lines = (ROOT / ".containerignore").read_text().splitlines()
    patterns = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return [f for f in tracked if (ROOT / f).is_file() and not _ignored(f, patterns)]


def _copied(containerfile: Path) -> list[str]:
    """The files the image's last stage copies from the build context (``COPY`` without
    ``--from``), their paths in the context."""
    text = containerfile.read_text().replace("\\\n", " ")
    last = text.split("\nFROM ")[-1]
    sources = []
    for line in last.splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            sources += [w.rstrip("/") for w in words[1:-1] if not w.startswith("--")]
    assert sources, f"no COPY read in {containerfile.name}"
    context = _context()
    # a source the context lacks (ignored, or never there) would fail the build
    lacking = [s for s in sources if not any(f == s or f.startswith(f"{s}/") for f in context)]
    assert lacking == [], f"{containerfile.name} copies what the build context has not"
    return [f for f in _context() if any(f == s or f.startswith(f"{s}/") for s in sources)]


def test_the_learners_image_holds_no_reference_solution_nor_a_way_to_make_it(tmp_path):
    """The lab image's files, as its Containerfile copies them from the build context: no
    solutions/, no file of it under another name, and the Makefile it ships has no ``solve``
    target (which the checkout's has, beside its solutions/)."""
    shipped = _copied(ROOT / "deploy" / "lab.Containerfile")
    assert {"Makefile", "graders/lab.toml", "src/gpushare/cli.py"} <= set(shipped)
    assert not [f for f in _context() if f.startswith("solutions/")]  # not even in the context
    assert not [f for f in shipped if f.startswith(("solutions/", "tests/", "examples/"))]
    answers = {
        (ROOT / f).read_bytes()
        for f in subprocess.run(
            ["git", "ls-files", "solutions"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    }
    assert len(answers) >= 5
    assert not [f for f in shipped if (ROOT / f).read_bytes() in answers]
    # the image's tree of those files: `make solve` there has no rule
    for f in shipped:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, tmp_path / f)
    made = subprocess.run(["make", "-n", "solve"], cwd=tmp_path, capture_output=True, text=True)
    assert made.returncode != 0 and "No rule to make target 'solve'" in made.stderr, made
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    made = subprocess.run(["make", "-n", "solve"], cwd=tmp_path, capture_output=True, text=True)
    assert made.returncode == 0 and "gpushare solve --workdir" in made.stdout, made


def test_the_grading_image_copies_no_solution_either():
    shipped = _copied(ROOT / "Containerfile")
    assert "graders/lab.toml" in shipped and "examples/reference.gpushare.tgz" in shipped
    assert not [f for f in shipped if f.startswith("solutions/")]


def test_make_images_tags_each_image_with_the_version():
    from deploy import images

    from gpushare import version

    args = images.parser().parse_args([])
    assert args.grade == f"localhost/gpushare-grade:{version()}"
    assert args.lab == f"localhost/gpushare-lab:{version()}"


def test_each_image_carries_the_version_in_its_label():
    """What ``make images`` builds is labelled with the version its tag carries (images.py
    passes ``--build-arg VERSION``, tags ``...:VERSION``; checked on the built lab image)."""
    for containerfile in (ROOT / "Containerfile", ROOT / "deploy" / "lab.Containerfile"):
        last = containerfile.read_text().split("\nFROM ")[-1]
        assert "ARG VERSION" in last and "org.opencontainers.image.version=$VERSION" in last


def lab_pod(learner: str = "ada", version: str = "0.1.0") -> dict:
    """deploy/lab-pod.yaml filled in as its own comment says (sed of LEARNER_ID, VERSION)."""
    text = (ROOT / "deploy" / "lab-pod.yaml").read_text()
    return yaml.safe_load(text.replace("LEARNER_ID", learner).replace("VERSION", version))


def test_the_lab_pod_has_the_sandboxs_settings_and_no_way_into_the_cluster():
    made = lab_pod()
    spec = made["spec"]
    (lab,) = spec["containers"]
    grading = pod.pod_spec(job.manifests(image="img", shards=1))
    needs = grading["containers"][0]["securityContext"]
    assert spec["hostUsers"] is grading["hostUsers"] is False
    for key in ("procMount", "seccompProfile", "appArmorProfile"):
        assert lab["securityContext"][key] == needs[key], key
    assert spec["automountServiceAccountToken"] is False
    assert made["metadata"]["name"] == "lab-ada"
    assert {"name": "GPUSHARE_LEARNER", "value": "ada"} in lab["env"]
    assert lab["image"].endswith(":0.1.0") and "VERSION" not in json.dumps(made)
    assert [m["mountPath"] for m in lab["volumeMounts"]] == ["/root/gpushare"]
