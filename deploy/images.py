"""``make images``: build the grading and lab images with podman, and run every check on them.

No container registry is reachable here, so the base is made from Debian packages: mmdebstrap
writes a bookworm root file system (python3 3.11.2, python3-venv, bubblewrap, ca-certificates)
and ``podman import`` makes it an image. On it:

* the grading image (``Containerfile``, ``--build-arg BASE=...``): the package, the graders and
  the step 6 samples, and exactly the Python packages of ``requirements/grade.lock``;
* the lab image for learners (``deploy/lab.Containerfile``): a builder stage builds the
  pinned control plane with ``gpushare setup``'s own build logic (the Go toolchain, module
  cache and build cache are the host's, mounted into that stage only), and the final image
  holds the binaries, kubectl, python3 with the locked packages, gpushare and
  ``/root/gpushare`` with ``k8s/``, ``bin/``, ``out/``; nothing compiles at run time.

Then, each a step of its own (``--steps``), all in containers:

* ``class``: a class of snapshots graded by the pods of the Job that ``deploy/job.py``
  prints, each run by podman with that pod's exact command and security context
  (``deploy/pod.py`` translates it field by field), merged, and ``grades.csv`` compared byte
  for byte with a host run;
* ``sandbox``: the same pod with one setting removed at a time: bubblewrap must fail and the
  refusal must name the cause and the setting (``gpushare.sandbox.diagnose``); and with a
  ``Localhost`` seccomp profile (``deploy/seccomp-bwrap.json``) instead of ``Unconfined``;
* ``lab``: the lab image's smoke test: ``make up``, the learner's kubectl, the reference
  solution (mounted for the test: the image holds none), ``make grade`` at 100, ``make
  submit``, and that snapshot graded 100 on the host.

Podman here needs two settings that are given in a ``containers.conf`` of our own (through
``CONTAINERS_CONF``, nothing global is changed): explicit rlimits (podman's defaults need
CAP_SYS_RESOURCE, which this machine does not give) and runc (crun 1.8 refuses the hybrid
cgroup layout). The host's CA store is mounted into build steps that download (pip, Go), so
a TLS-inspecting proxy's CA is trusted there without being copied into an image.

Re-runnable: every step starts from scratch in ``build/images/`` and replaces its image.
Figures (build times, sizes, the grading pods' time, the lab from ``up`` to 100) are printed
at the end and written to ``build/images/figures.json``. Exit 0 when every check passed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from deploy import job, pod  # noqa: E402  (deploy/job.py, deploy/pod.py)
from gpushare import version  # noqa: E402

VERSION = version()  # each image's tag and label: `gpushare --version`

BUILD = ROOT / "build" / "images"
VENV_BIN = ROOT / ".venv" / "bin"
HOST_PACKAGES = ("podman", "runc", "uidmap", "fuse-overlayfs", "slirp4netns", "mmdebstrap")
BASE_PACKAGES = ("python3", "python3-venv", "bubblewrap", "ca-certificates")
# keep the base small: no documentation, manual pages or translations
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
CONTAINERS_CONF = """\
# podman settings of `make images` (deploy/images.py); used through CONTAINERS_CONF only.
[containers]
# podman's default rlimits (nofile 1048576) need CAP_SYS_RESOURCE to be set
default_ulimits = ["nofile={nofile}:{nofile}", "nproc=4096:4096"]

[engine]
# crun 1.8 refuses a hybrid cgroup v1/v2 layout; runc runs there
runtime = "runc"
"""
# the pods of the class procedure, which share volumes: one host uid range for all (deploy/pod.py
# says why), outside the "containers" range below that --userns=auto takes from
USERNS_RANGE = (1_000_000_000, 65536)
# --userns=auto (hostUsers: false) takes uid ranges from the "containers" user's subordinate ids
SUBID_LINE = "containers:2147483647:2147483648"

figures: dict[str, Any] = {}
failures: list[str] = []


# --------------------------------------------------------------------------- small helpers


def say(message: str) -> None:
    print(f"[images] {message}", flush=True)


def check(ok: bool, what: str) -> bool:
    """Record one check's outcome and say it."""
    say(("ok      " if ok else "FAILED  ") + what)
    if not ok:
        failures.append(what)
    return ok


@contextlib.contextmanager
def timed(key: str) -> Iterator[None]:
    start = time.monotonic()
    yield
    figures[key] = round(time.monotonic() - start, 1)


def run(argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run a command, its output passed through unless captured; fail loudly by default."""
    kw.setdefault("check", True)
    kw.setdefault("text", True)
    return subprocess.run(list(argv), **kw)


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(BUILD / "containers.conf")}


def podman(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``podman ARGS`` with our containers.conf (rlimits, runc)."""
    return run(["podman", *args], env=podman_env(), **kw)


def image_size(tag: str) -> str:
    out = podman("image", "inspect", "--format", "{{.Size}}", tag, capture_output=True).stdout
    return f"{int(out.strip()) / 1e6:.0f} MB"


def fresh(path: Path) -> Path:
    """An empty folder at ``path`` (what a previous run left is removed)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def gpushare(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return run([str(VENV_BIN / "gpushare"), *args], **kw)


# --------------------------------------------------------------------------- steps


def step_packages(args: argparse.Namespace) -> None:
    """The host's tools (Debian packages) and podman's settings."""
    missing = [p for p in HOST_PACKAGES if shutil.which(_command_of(p)) is None]
    if missing:
        say(f"installing {' '.join(missing)} (apt-get)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if (
            run(
                ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
                env=env,
                check=False,
            ).returncode
            != 0
        ):
            run(["apt-get", "update", "-q"], env=env)
            run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], env=env)
    for name in ("/etc/subuid", "/etc/subgid"):
        path = Path(name)
        text = path.read_text() if path.exists() else ""
        if not re.search(r"^containers:", text, re.M):
            say(f"adding {SUBID_LINE} to {name} (for --userns=auto)")
            path.write_text(
                text + ("" if text.endswith("\n") or not text else "\n") + SUBID_LINE + "\n"
            )
    BUILD.mkdir(parents=True, exist_ok=True)
    nofile = int(run(["sh", "-c", "ulimit -Hn"], capture_output=True).stdout.strip() or 1024)
    (BUILD / "containers.conf").write_text(CONTAINERS_CONF.format(nofile=min(nofile, 65536)))
    figures["podman"] = run(["podman", "--version"], capture_output=True).stdout.strip()


def _command_of(package: str) -> str:
    return {"uidmap": "newuidmap"}.get(package, package)


def step_base(args: argparse.Namespace) -> None:
    """The base image, from Debian packages: mmdebstrap, then podman import."""
    tar = BUILD / "base.tar"
    tar.unlink(missing_ok=True)
    cmd = ["mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}"]
    cmd += [f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES]
    cmd += ["--dpkgopt=path-include=/usr/share/doc/*/copyright"]
    cmd += [args.suite, str(tar), args.mirror]
    say("base: " + shlex.join(cmd))
    with timed("base mmdebstrap (s)"):
        run(cmd)
    with timed("base import (s)"):
        podman("import", "--change", 'CMD ["/bin/bash"]', str(tar), args.base)
    tar.unlink()
    version = podman(
        "run",
        "--rm",
        args.base,
        "python3",
        "-c",
        "import platform; print(platform.python_version())",
        capture_output=True,
    ).stdout.strip()
    figures["base python3"] = version
    figures["base size"] = image_size(args.base)
    check(version.startswith("3.11."), f"the base's python3 is 3.11 ({version})")


def build_mounts(args: argparse.Namespace) -> list[str]:
    """What build steps that download see of the host: its CA store (read-only); with
    ``--no-cache``, no layer of an earlier build is reused."""
    return ["-v", f"{CA_BUNDLE}:{CA_BUNDLE}:ro", *(["--no-cache"] if args.no_cache else [])]


def step_grade_image(args: argparse.Namespace) -> None:
    with timed("grading image build (s)"):
        podman(
            "build",
            *build_mounts(args),
            "--build-arg",
            f"BASE={args.base}",
            "--build-arg",
            f"VERSION={VERSION}",
            "-t",
            args.grade,
            "-f",
            str(ROOT / "Containerfile"),
            str(ROOT),
        )
    figures["grading image size"] = image_size(args.grade)
    check(
        version_label(args.grade) == VERSION,
        f"the grading image's version label is {VERSION} ({version_label(args.grade)!r})",
    )
    listed = podman(
        "run", "--rm", args.grade, "pip", "list", "--format", "freeze", capture_output=True
    ).stdout
    installed = {line.split("==")[0].lower() for line in listed.split() if "==" in line}
    locked = {
        line.split("==")[0].lower()
        for line in (ROOT / args.lock).read_text().split()
        if "==" in line
    }
    extra = installed - locked - {"gpushare", "pip", "setuptools"}
    check(
        not extra and locked <= installed,
        f"the grading image holds exactly the lock's packages (extra: {sorted(extra)}, "
        f"missing: {sorted(locked - installed)})",
    )
    check("kubernetes" not in installed, "the grading image has no `kubernetes` package")


def version_label(image: str) -> str:
    """The ``org.opencontainers.image.version`` label of a built image."""
    return podman(
        "image", "inspect", "--format",
        '{{index .Labels "org.opencontainers.image.version"}}', image,
        capture_output=True,
    ).stdout.strip()  # fmt: skip


def go_env(name: str) -> str:
    return run(["go", "env", name], capture_output=True).stdout.strip()


def step_lab_image(args: argparse.Namespace) -> None:
    """The lab image: the control plane built in a builder stage from Go modules."""
    goroot, modcache, gocache = go_env("GOROOT"), go_env("GOMODCACHE"), go_env("GOCACHE")
    for path in (modcache, gocache):
        Path(path).mkdir(parents=True, exist_ok=True)
    mounts = [
        *build_mounts(args),
        "-v",
        f"{goroot}:/usr/local/go:ro",
        "-v",
        f"{modcache}:/go/pkg/mod",
        "-v",
        f"{gocache}:/root/.cache/go-build",
    ]
    build_args = ["--build-arg", f"BASE={args.base}", "--build-arg", f"VERSION={VERSION}"]
    for name in ("GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE"):
        build_args += ["--build-arg", f"{name}={go_env(name)}"]
    with timed("lab image build (s)"):
        podman(
            "build",
            *mounts,
            *build_args,
            "-t",
            args.lab,
            "-f",
            str(ROOT / "deploy" / "lab.Containerfile"),
            str(ROOT),
        )
    figures["lab image size"] = image_size(args.lab)
    label = version_label(args.lab)
    check(label == VERSION, f"the lab image's version label is {VERSION} ({label!r})")
    # the answer key is not in the learner's pod, nor a way to make it
    found = podman(
        "run", "--rm", args.lab, "bash", "-c",
        "cd /opt/gpushare && ls -d solutions 2>&1; find / -xdev -name solve.sh 2>/dev/null; "
        "make -n solve 2>&1 | tail -1",
        check=False, capture_output=True,
    ).stdout  # fmt: skip
    check(
        "No such file" in found and "solve.sh" not in found and "No rule" in found,
        f"the lab image has no solutions/, no solve.sh and no `make solve` ({found.strip()!r})",
    )


def make_class(out: Path) -> list[Path]:
    """A class from the project's real snapshots (``examples/`` and ``tests/recorded/``), each
    given a learner of its own (``tests/class_snapshots.respin``)."""
    from tests.class_snapshots import respin

    sources = sorted((ROOT / "examples").glob("*.gpushare.tgz"))
    sources += sorted((ROOT / "tests" / "recorded").glob("*.gpushare.tgz"))
    made = []
    for number, source in enumerate(sources):
        made.append(respin(source, out, f"learner-{number:02d}", source.name))
    for path in [out, *out.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return made


def printed_job(image: str, shards: int, expect: int) -> list[dict[str, Any]]:
    """The objects deploy/job.py prints, parsed from its very output (the bash procedure's
    ``<<'YAML'`` here-documents)."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        code = job.main(["--image", image, "--shards", str(shards), "--expect", str(expect)])
    check(code == 0, f"deploy/job.py prints the procedure (exit {code})")
    return [o for block in pod.printed_objects(text.getvalue()) for o in block]


def shared_grade_args(command: list[str]) -> list[str]:
    """The pod's ``class grade`` options less ``--out`` and ``--shard`` (a host run's)."""
    rest = command[command.index("/snapshots") + 1 :]
    out: list[str] = []
    skip = False
    for part in rest:
        if skip:
            skip = False
        elif part in ("--out", "--shard"):
            skip = True
        else:
            out.append(part)
    return out


def writable(path: Path) -> Path:
    """A folder the pod's user (some uid of its own user namespace) may write, as a claim
    with a 0777 export or an emptyDir is."""
    fresh(path).chmod(0o777)
    return path


def run_pod(
    spec: dict[str, Any],
    index: int,
    image: str,
    volumes: dict[str, str],
    *,
    drop: frozenset[str] = frozenset(),
    command: list[str] | None = None,
    profiles: Path = ROOT / "deploy",
    userns_range: tuple[int, int] | None = USERNS_RANGE,
) -> subprocess.CompletedProcess[str]:
    """Pod ``index`` of ``spec`` run with podman as the kubelet would: its init containers one
    after the other, then its container (``command`` replaces the container's), each a
    ``podman run`` of the same pod settings; the first that fails ends it. ``profiles`` is the
    folder of its Localhost seccomp profiles; ``userns_range``: see :func:`pod.run_args`."""
    if command is not None:
        spec = {**spec, "containers": [{**spec["containers"][0], "command": command}]}
    out, err = [], []
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        argv = pod.run_args(
            spec,
            index=index,
            image=image,
            volumes=volumes,
            drop=drop,
            localhost_profiles=str(profiles),
            userns_range=userns_range,
            container=container["name"],
        )
        say("pod: podman run " + shlex.join(argv))
        done = podman("run", *argv, check=False, capture_output=True)
        out.append(done.stdout)
        err.append(done.stderr)
        if done.returncode != 0:
            break
    return subprocess.CompletedProcess(["podman"], done.returncode, "".join(out), "".join(err))


def step_class(args: argparse.Namespace) -> None:
    """The printed Job's pods grade a class; their merged grades.csv is the host's, byte for
    byte."""
    work = fresh(BUILD / "class")
    subs = work / "snapshots"
    subs.mkdir()
    snaps = make_class(subs)
    figures["class size"] = len(snaps)
    (subs / job.READY).touch()  # what the procedure's loader does once all are in
    objects = printed_job(args.grade, args.shards, len(snaps))
    spec = pod.pod_spec(objects)
    command = spec["containers"][0]["command"]
    results = writable(work / "results")
    claims = claim_folders(objects, subs, results)
    grading_pods(args, spec, claims, work, len(snaps))
    merge_pod(args, spec, objects, claims, work)
    host = work / "host"
    with timed(f"host class grade, {len(snaps)} snapshots (s)"):
        done = gpushare(
            "class",
            "grade",
            str(subs),
            "--out",
            str(host),
            *shared_grade_args(command),
            check=False,
            capture_output=True,
        )
    check(done.returncode == 0, f"host class grade exit 0 ({done.stderr.strip()[-300:]!r})")
    pods_csv = results / "class" / "grades.csv"
    host_csv = host / "grades.csv"
    same = (
        pods_csv.is_file()
        and host_csv.is_file()
        and (pods_csv.read_bytes() == host_csv.read_bytes())
    )
    rows = len(host_csv.read_text().splitlines()) - 1 if host_csv.is_file() else 0
    check(
        same and rows == len(snaps),
        f"grades.csv of the pods == the host's, byte for byte ({rows} learners)",
    )
    check((results / "class" / "report.html").is_file(), "the merge wrote report.html")


def grading_pods(
    args: argparse.Namespace, spec: dict[str, Any], claims: dict[str, Path], work: Path, count: int
) -> None:
    """The Job's pods, one a shard, run side by side; each exits 0 with the sandbox."""
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.shards) as pool:
        shards = list(
            pool.map(
                lambda i: run_pod(
                    spec, i, args.grade, volumes_for(spec, claims, work / f"pod-{i}")
                ),
                range(args.shards),
            )
        )
    figures[f"grading pods, {count} snapshots, {args.shards} shards in parallel (s)"] = round(
        time.monotonic() - start, 1
    )
    for i, proc in enumerate(shards):
        log = work / f"pod-{i}.log"
        log.write_text(proc.stdout + proc.stderr)
        check(
            proc.returncode == 0,
            f"grading pod {i} exit 0 with the sandbox (got {proc.returncode}; log {log}: "
            f"{(proc.stdout + proc.stderr).strip()[-300:]!r})",
        )


def merge_pod(
    args: argparse.Namespace,
    spec: dict[str, Any],
    objects: list[dict[str, Any]],
    claims: dict[str, Path],
    work: Path,
) -> None:
    """The printed merge pod (or a grading pod running the merge) exits 0."""
    printed_merge = pod.merge_spec(objects)
    merge_command = None
    if printed_merge is None:  # none printed (yet): the grading pod's, running the merge
        printed_merge = spec
        merge_command = [
            "sh",
            "-c",
            f"gpushare class merge {pod_results(spec)}/shard-* --out {pod_results(spec)}/class",
        ]
    figures["merge"] = "the printed merge pod" if merge_command is None else "grading pod + merge"
    with timed("merge pod (s)"):
        proc = run_pod(
            {k: v for k, v in printed_merge.items() if k != "initContainers"}
            if merge_command
            else printed_merge,
            0,
            args.grade,
            volumes_for(printed_merge, claims, work / "merge"),
            command=merge_command,
        )
        output = proc.stdout + proc.stderr
    check(proc.returncode == 0, f"merge pod exit 0 ({output.strip()[-300:]!r})")


def claim_folders(objects: list[dict[str, Any]], subs: Path, results: Path) -> dict[str, Path]:
    """The host folder of each claim the Job mounts: the read-only one holds the snapshots,
    the other the results (as the claims the README has the operator fill and read)."""
    spec = pod.pod_spec(objects)
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    out: dict[str, Path] = {}
    for volume in spec["volumes"]:
        claim = volume.get("persistentVolumeClaim")
        if claim:
            read_only = claim.get("readOnly") or mounts[volume["name"]].get("readOnly")
            out[claim["claimName"]] = subs if read_only else results
    return out


def volumes_for(spec: dict[str, Any], claims: dict[str, Path], scratch: Path) -> dict[str, str]:
    """Host folders for each volume of ``spec``: its claims' folders, and a fresh writable
    folder under ``scratch`` for each ``emptyDir``."""
    out: dict[str, str] = {}
    for volume in spec.get("volumes", []):
        claim = volume.get("persistentVolumeClaim")
        if claim:
            out[volume["name"]] = str(claims[claim["claimName"]])
        elif "emptyDir" in volume:
            scratch.mkdir(parents=True, exist_ok=True)
            out[volume["name"]] = str(writable(scratch / volume["name"]))
        else:
            raise ValueError(f"volume {volume['name']!r}: a kind make images does not provide")
    return out


def pod_results(spec: dict[str, Any]) -> str:
    mounts = spec["containers"][0]["volumeMounts"]
    return next(m["mountPath"] for m in mounts if m["name"] == "results")


# Each case: what is changed in the printed pod, and what must follow (None: bwrap starts).
SANDBOX_CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("as printed", {}, None),
    ("without procMount: Unmasked", {"drop": {"procMount"}}, "proc-masked"),
    ("seccomp RuntimeDefault (podman's default profile)", {"drop": {"seccompProfile"}}, "seccomp"),
    (
        "seccomp Localhost: a profile that refuses new namespaces (as Docker's)",
        {"seccomp": "seccomp-no-userns.json"},
        "seccomp",
    ),
    (
        "seccomp Localhost: deploy/seccomp-bwrap.json (podman's default + sethostname)",
        {"seccomp": "seccomp-bwrap.json"},
        None,
    ),
    (
        "without hostUsers: false (Kubernetes refuses Unmasked without it)",
        {"drop": {"hostUsers"}},
        None,
    ),
]


def step_sandbox(args: argparse.Namespace) -> None:
    """Which pod settings let bubblewrap start, and the refusal's words when one is missing."""
    from gpushare.sandbox import diagnose

    work = fresh(BUILD / "sandbox")
    subs = work / "snapshots"
    subs.mkdir()
    shutil.copy(ROOT / "examples" / "reference.gpushare.tgz", subs)
    for path in [subs, *subs.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    write_no_userns_profile(work / "seccomp-no-userns.json")
    shutil.copy(ROOT / "deploy" / "seccomp-bwrap.json", work / "seccomp-bwrap.json")
    (subs / job.READY).touch()
    objects = printed_job(args.grade, 1, 1)
    spec = pod.pod_spec(objects)
    causes = [v for v in vars(diagnose).values() if isinstance(v, diagnose.Cause)]
    recorded = []
    for name, change, expected in SANDBOX_CASES:
        case = json.loads(json.dumps(spec))
        if "seccomp" in change:
            case["containers"][0]["securityContext"]["seccompProfile"] = {
                "type": "Localhost",
                "localhostProfile": change["seccomp"],
            }
        done = run_pod(
            case,
            0,
            args.grade,
            volumes_for(
                case, claim_folders(objects, subs, writable(work / "results")), work / "pod"
            ),
            drop=frozenset(change.get("drop", ())),
            profiles=work,
            userns_range=None,  # one pod: hostUsers as printed (--userns=auto), or dropped
        )
        stderr = done.stderr.strip()
        # the cause named in the pod's own refusal (diagnosed in the pod, with what it sees)
        said = [c for c in causes if str(c) in stderr]
        recorded.append({"case": name, "exit": done.returncode, "stderr": stderr[-2000:]})
        if expected is None:
            scores = [
                json.loads(path.read_text()).get("score")
                for path in (work / "results").rglob("results.json")
            ]
            check(
                done.returncode == 0 and scores == [100],
                f"sandbox {name}: bwrap starts, the reference scores 100 in it "
                f"(exit {done.returncode}, scores {scores}: {stderr[-300:]!r})",
            )
        else:
            line = next((ln for ln in stderr.splitlines() if "bubblewrap" in ln), stderr[-300:])
            check(
                done.returncode == 2 and [c.key for c in said] == [expected],
                f"sandbox {name}: refused (exit {done.returncode}), cause {expected}: {line}",
            )
    (work / "cases.json").write_text(json.dumps(recorded, indent=2) + "\n")


def write_no_userns_profile(path: Path) -> None:
    """podman's default seccomp profile made to refuse new namespaces as Docker's does:
    ``unshare`` and ``clone`` with a namespace flag get EPERM, ``clone3`` ENOSYS (so that
    libc falls back to ``clone``)."""
    profile = json.loads(Path("/usr/share/containers/seccomp.json").read_text())
    profile["defaultErrnoRet"], profile["defaultErrno"] = 1, "EPERM"
    for rule in profile["syscalls"]:
        rule["names"] = [n for n in rule["names"] if n not in ("clone", "clone3", "unshare")]
    namespaces = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
    profile["syscalls"] += [
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": namespaces, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
        },
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
    ]
    path.write_text(json.dumps(profile, indent=1) + "\n")


def step_lab(args: argparse.Namespace) -> None:
    """The lab image as a learner's pod: up, kubectl, solve, grade 100, submit, host 100."""
    work = fresh(BUILD / "lab")
    name = "gpushare-lab-smoke"
    start_lab_pod(name, work, args.lab)
    try:

        def sh(script: str) -> subprocess.CompletedProcess[str]:
            return podman("exec", name, "bash", "-lc", script, check=False, capture_output=True)

        start = time.monotonic()
        up = sh("cd /opt/gpushare && make up")
        figures["lab: make up (s)"] = round(time.monotonic() - start, 1)
        check(
            up.returncode == 0
            and "compil" not in (up.stdout + up.stderr).lower()
            and "building" not in (up.stdout + up.stderr).lower(),
            f"lab: `make up` works and compiles nothing ({(up.stdout + up.stderr)[-300:]!r})",
        )
        nodes = sh('eval "$(gpushare env)" && kubectl get nodes -o name')
        check(
            nodes.returncode == 0
            and nodes.stdout.split() == ["node/lab-node-0", "node/lab-node-1", "node/lab-node-2"],
            f"lab: the learner's kubectl lists the three nodes ({nodes.stdout.split()})",
        )
        solve = sh(
            "cd /opt/gpushare && GPUSHARE_SOLUTIONS=/opt/solutions gpushare solve "
            "--workdir /root/gpushare"
        )
        check(solve.returncode == 0, f"lab: solve, mounted ({solve.stderr[-300:]!r})")
        grade = sh(
            "cd /opt/gpushare && make grade GRADE_ARGS='--lang en --json /tmp/r.json' "
            ">/dev/null && python3 -c \"import json; print(json.load(open('/tmp/r.json'))"
            "['score'])\""
        )
        figures["lab: from `make up` to 100 (s)"] = round(time.monotonic() - start, 1)
        check(
            grade.stdout.strip() in ("100", "100.0"),
            f"lab: make grade scores 100 ({grade.stdout.strip()!r} {grade.stderr[-300:]!r})",
        )
        submit = sh("cd /opt/gpushare && make submit LEARNER=smoke OUT=/handin")
        files = sorted(work.glob("smoke-*.gpushare.tgz"))
        check(
            submit.returncode == 0 and len(files) == 1,
            f"lab: make submit wrote one snapshot ({submit.stderr[-300:]!r})",
        )
        if files:
            host_grades_100(files[0], work / "host.json")
        sh("cd /opt/gpushare && .venv/bin/gpushare down")
    finally:
        podman("rm", "-f", "-t", "2", name, check=False, capture_output=True)


def start_lab_pod(name: str, work: Path, image: str) -> None:
    """The lab image's container, as a learner's pod: ``work`` is where it hands in."""
    podman("rm", "-f", name, check=False, capture_output=True)
    podman(
        "run",
        "-d",
        "--name",
        name,
        "-v",
        f"{work}:/handin",
        # the reference solution for this smoke test only: the image holds none
        "-v",
        f"{ROOT / 'solutions'}:/opt/solutions:ro",
        image,
        "sleep",
        "3600",
        capture_output=True,
    )


def host_grades_100(snapshot: Path, out: Path) -> None:
    """The snapshot a learner's pod handed in grades 100 on the host, with no cluster."""
    host = gpushare(
        "grade",
        "--snapshot",
        str(snapshot),
        "--lang",
        "en",
        "--json",
        str(out),
        check=False,
        capture_output=True,
    )
    score = json.loads(out.read_text()).get("score") if out.is_file() else None
    check(
        host.returncode == 0 and score == 100,
        f"lab: the submitted snapshot grades 100 on the host (got {score})",
    )


STEPS = {
    "packages": step_packages,
    "base": step_base,
    "grade-image": step_grade_image,
    "lab-image": step_lab_image,
    "class": step_class,
    "sandbox": step_sandbox,
    "lab": step_lab,
}


def parser() -> argparse.ArgumentParser:
    """The options of ``make images`` (``IMAGES_ARGS``); each image tagged with the version."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--steps",
        default=",".join(STEPS),
        help=f"comma-separated, in this order: {','.join(STEPS)}",
    )
    parser.add_argument("--base", default="localhost/gpushare-base:bookworm")
    parser.add_argument("--grade", default=f"localhost/gpushare-grade:{VERSION}")
    parser.add_argument("--lab", default=f"localhost/gpushare-lab:{VERSION}")
    parser.add_argument("--suite", default="bookworm")
    parser.add_argument("--mirror", default="http://deb.debian.org/debian")
    parser.add_argument("--lock", default="requirements/grade.lock")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument(
        "--no-cache", action="store_true", help="build every layer again (for build times)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        print(f"images: unknown steps {unknown}; known: {', '.join(STEPS)}", file=sys.stderr)
        return 2
    BUILD.mkdir(parents=True, exist_ok=True)
    if "packages" not in steps and not (BUILD / "containers.conf").exists():
        steps.insert(0, "packages")  # podman's settings are needed by every other step
    for name in STEPS:
        if name in steps:
            say(f"--- {name}")
            with timed(f"step {name} (s)"):
                try:
                    STEPS[name](args)
                except subprocess.CalledProcessError as exc:
                    check(False, f"step {name}: {shlex.join(exc.cmd)} exited {exc.returncode}")
    (BUILD / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    say("--- figures")
    for key, value in figures.items():
        say(f"{key:<60} {value}")
    say(f"{len(failures)} check(s) failed" if failures else "every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
