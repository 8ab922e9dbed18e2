"""The class grade on Kubernetes, printed as a procedure (a bash script), for an operator.

Run from a checkout (where the images are built), with its venv::

    .venv/bin/python -m deploy.job --image IMAGE --shards N --expect M > class-job.sh
    .venv/bin/python -m deploy.job --image IMAGE --podman    # one machine, no Kubernetes

It lives here, not in the package: no learner, instructor or grading pod runs it, and the
grading image need not carry it. The procedure, in order, each step waiting for the one before
(:func:`procedure`); run again, it applies the same objects (``kubectl apply``) and replaces
what cannot be changed (an earlier run's Jobs and helper pods):

0. the namespace, labelled with the Pod Security level its grading pods need (``privileged``:
   the sandbox's ``Unconfined`` seccomp; ``restricted`` with ``--unsafe-no-sandbox``), then a
   wait for its ``default`` service account (no pod is admitted before it exists);
1. two claims, ReadWriteMany: the snapshots (filled in step 2, mounted read-only by the
   graders) and the results;
2. a loader pod that mounts the snapshots claim; the script streams the local folder into it
   (``tar | kubectl exec -i ... tar -x``, what ``kubectl cp`` does underneath, with tar's own
   unambiguous semantics), then writes the ready marker :data:`READY` and deletes the pod;
3. the Indexed Job: each pod waits for the marker (an init container, bounded by
   :data:`READY_WAIT`), then runs ``class grade --expect N``, which refuses (exit 2) a folder
   that does not hold exactly the N snapshots the script counted; exit 2 fails the index at
   once (``podFailurePolicy``), anything else is retried once (``backoffLimitPerIndex``);
4. the merge, a Job of one pod with a writable ``/tmp``;
5. a retriever pod that mounts the results read-only; the script streams ``class/`` out
   (grades.csv, report.html and every learner's results) and deletes the pod.

So the Job can never grade a half-copied folder: the marker is written only after tar ended
well, and the count is checked again by every pod.

Pod ``i`` of ``N`` runs ``gpushare class grade /snapshots --shard i/N --out /results/shard-i``
(``i`` from ``JOB_COMPLETION_INDEX``, which the Job controller sets from the pod's completion
index); every pod sees every snapshot and picks its own part, so no pod needs to know the
others. Two volumes: the snapshots, read-only, and the results, written. Once the Job is
complete, ``gpushare class merge /results/shard-* --out /results/class`` (from any pod or
machine that mounts the results) gives one ``grades.csv`` and one ``report.html``.

The sandbox of the learners' scripts (bubblewrap) needs three settings of the pod, each
proven necessary and enough with podman (``make images``, ``deploy/images.py``): a seccomp
profile that allows user namespaces (``Unconfined``: the runtimes' defaults refuse
``sethostname`` or the namespace itself; AppArmor likewise), ``/proc`` unmasked (``procMount:
Unmasked``: the kernel refuses the sandbox its own ``/proc`` while the runtime covers paths of
the container's), and so its own user namespace (``hostUsers: false``, which ``Unmasked``
requires and which makes the container's uids none of the node's). Nothing else: no
capability, no privilege escalation, a read-only root file system, not root. When one is
missing, :mod:`gpushare.sandbox.diagnose` names it in the refusal the pod logs.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

from deploy import pod
from gpushare import version
from gpushare.classroom import cli as class_cli
from gpushare.data import JsonObject
from gpushare.submissions.snapshot import SUFFIX

SNAPSHOTS = "/snapshots"
RESULTS = "/results"
READY = ".gpushare-ready"  # in the snapshots claim: written once every snapshot is in
READY_WAIT = 3600  # seconds a grading pod waits for it before it gives up (exit 2)
INDEX = "JOB_COMPLETION_INDEX"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# Every pod of the procedure: not root, and every container locked down as far as it can be
# (each object takes a copy: a caller may change its own).
_POD_USER = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
_LOCKED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}


def manifests(
    *,
    image: str,
    shards: int,
    name: str = "gpushare-class",
    namespace: str | None = None,
    snapshots_claim: str = "gpushare-snapshots",
    results_claim: str = "gpushare-results",
    claims: bool = True,
    storage_class: str | None = None,
    snapshots_size: str = "1Gi",
    results_size: str = "1Gi",
    cpu: str = "2",
    memory: str = "2Gi",
    grade_args: list[str] | None = None,
    unsafe_no_sandbox: bool = False,
) -> list[JsonObject]:
    """The objects to create: the two claims (unless ``claims`` is False), then the Job."""
    if shards < 1:
        raise ValueError("--shards must be at least 1")
    labels = {"app.kubernetes.io/name": "gpushare-class", "app.kubernetes.io/instance": name}
    meta: JsonObject = {"labels": labels}
    if namespace:
        meta["namespace"] = namespace
    # each pod its shard: the completion index, through the annotation the env names
    shard = ["--out", f"{RESULTS}/shard-$({INDEX})", "--shard", f"$({INDEX})/{shards}"]
    command = ["gpushare", "class", "grade", SNAPSHOTS, *shard, *(grade_args or [])]
    command += ["--unsafe-no-sandbox"] if unsafe_no_sandbox else []
    container = _grade_container(image, command, cpu, memory, unsafe_no_sandbox)
    claim_names = (snapshots_claim, results_claim)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, **meta},
        "spec": {
            "completionMode": "Indexed",
            "completions": shards,
            "parallelism": shards,
            "backoffLimitPerIndex": 1,
            "template": _pod_template(labels, container, claim_names, unsafe_no_sandbox),
            # a refusal (exit 2: not the expected snapshots, no sandbox) fails its index
            # without a retry that could only be refused again
            "podFailurePolicy": {
                "rules": [
                    {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [2]}},
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                ]
            },
        },
    }
    if not claims:
        return [job]
    sizes = ((snapshots_claim, snapshots_size), (results_claim, results_size))
    return [*_claims(sizes, meta, storage_class), job]


def _pod_template(
    labels: JsonObject, container: JsonObject, claims: tuple[str, str], unsafe_no_sandbox: bool
) -> JsonObject:
    """A grading pod: its own user namespace (unless without the sandbox), the claims mounted,
    and an init container that waits for the snapshots' marker."""
    snapshots_claim, results_claim = claims
    volumes = [
        {
            "name": "snapshots",
            "persistentVolumeClaim": {"claimName": snapshots_claim, "readOnly": True},
        },
        {"name": "results", "persistentVolumeClaim": {"claimName": results_claim}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
    ]
    return {
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": "Never",
            **({} if unsafe_no_sandbox else {"hostUsers": False}),
            "securityContext": {**_POD_USER},
            "containers": [container],
            "volumes": volumes,
            "initContainers": _wait_ready(container["image"]),
        },
    }


def _grade_container(
    image: str, command: list[str], cpu: str, memory: str, unsafe_no_sandbox: bool
) -> JsonObject:
    """The container that grades one shard: locked down, but for what the sandbox needs
    (no seccomp or AppArmor profile of the runtime's, an unmasked /proc)."""
    profile = "RuntimeDefault" if unsafe_no_sandbox else "Unconfined"
    sandbox_needs = {} if unsafe_no_sandbox else {"procMount": "Unmasked"}
    return {
        "name": "grade",
        "image": image,
        "command": command,
        "env": [
            {
                "name": INDEX,
                "valueFrom": {
                    "fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}
                },
            },
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        ],
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"memory": memory},
        },
        "securityContext": {
            **_LOCKED,
            "seccompProfile": {"type": profile},
            "appArmorProfile": {"type": profile},
            **sandbox_needs,
        },
        "volumeMounts": [
            {"name": "snapshots", "mountPath": SNAPSHOTS, "readOnly": True},
            {"name": "results", "mountPath": RESULTS},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def _claims(
    sizes: tuple[tuple[str, str], ...], meta: JsonObject, storage_class: str | None
) -> list[JsonObject]:
    """The two claims, ReadWriteMany both: the loader writes the snapshots, every shard writes
    its results."""
    objects: list[JsonObject] = []
    for claim, size in sizes:
        spec: JsonObject = {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": size}},
        }
        if storage_class:
            spec["storageClassName"] = storage_class
        kind = {"apiVersion": "v1", "kind": "PersistentVolumeClaim"}
        objects.append({**kind, "metadata": {"name": claim, **meta}, "spec": spec})
    return objects


# --------------------------------------------------------------------------- the procedure


def _restricted(container: JsonObject) -> JsonObject:
    """A pod of the procedure that runs no learner's script: Pod Security ``restricted``."""
    container["securityContext"] = {**_LOCKED}
    return {
        "securityContext": {**_POD_USER, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }


def _wait_ready(image: str) -> list[JsonObject]:
    """The grading pods' init container: they start only once the loader marked the snapshots
    complete."""
    marker = f"{SNAPSHOTS}/{READY}"
    wait = (
        f'timeout {READY_WAIT} sh -c "until [ -e {marker} ]; do sleep 2; done" || '
        f'{{ echo "gpushare: no {marker} after {READY_WAIT} s: the snapshots were never '
        'marked complete (step 2 of the procedure)" >&2; exit 2; }'
    )
    init: list[JsonObject] = _restricted(
        {
            "name": "wait-ready",
            "image": image,
            "command": ["sh", "-c", wait],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            "volumeMounts": [{"name": "snapshots", "mountPath": SNAPSHOTS, "readOnly": True}],
        }
    )["containers"]
    return init


def _helper_pod(
    name: str,
    meta: JsonObject,
    image: str,
    claim: str,
    mount: str,
    read_only: bool,
    seconds: int,
) -> JsonObject:
    """A pod that only sleeps (bounded) while the script streams files in or out of it."""
    spec = _restricted(
        {
            "name": "files",
            "image": image,
            "command": ["sleep", str(seconds)],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            "volumeMounts": [
                {"name": "files", "mountPath": mount, **({"readOnly": True} if read_only else {})}
            ],
        }
    )
    volume = {"claimName": claim, **({"readOnly": True} if read_only else {})}
    spec.update(
        restartPolicy="Never",
        activeDeadlineSeconds=seconds,
        volumes=[{"name": "files", "persistentVolumeClaim": volume}],
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}, "spec": spec}


def merge_job(args: argparse.Namespace, meta: JsonObject) -> JsonObject:
    """``class merge`` of every shard, named one by one (a missing shard is an error, not a
    smaller class), with a writable ``/tmp`` and ``HOME`` there (Python's own temporary files)."""
    memory = args.memory
    command = [
        "gpushare",
        "class",
        "merge",
        *(f"{RESULTS}/shard-{i}" for i in range(args.shards)),
        "--out",
        f"{RESULTS}/class",
    ]
    spec = _restricted(
        {
            "name": "merge",
            "image": args.image,
            "command": command,
            "env": [
                {"name": "HOME", "value": "/tmp"},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            ],
            "resources": {"requests": {"cpu": "1", "memory": memory}, "limits": {"memory": memory}},
            "volumeMounts": [
                {"name": "results", "mountPath": RESULTS},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
        }
    )
    spec.update(
        restartPolicy="Never",
        volumes=[
            {"name": "results", "persistentVolumeClaim": {"claimName": args.results_claim}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        ],
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{args.name}-merge", **meta},
        "spec": {"backoffLimit": 1, "template": {"metadata": {}, "spec": spec}},
    }


@dataclass
class Step:
    """One step of the procedure: what it is for, the objects it creates, the shell after."""

    title: str
    objects: list[JsonObject] = field(default_factory=list)
    shell: list[str] = field(default_factory=list)
    before: list[str] = field(default_factory=list)  # an earlier run's leftovers removed


def procedure(args: argparse.Namespace) -> list[Step]:
    """The whole procedure of the command's options: the objects of :func:`manifests`, then
    the pods and commands around them."""
    objects = manifests(
        image=args.image,
        shards=args.shards,
        name=args.name,
        namespace=args.namespace,
        snapshots_claim=args.snapshots_claim,
        results_claim=args.results_claim,
        claims=not args.no_claims,
        storage_class=args.storage_class,
        snapshots_size=args.snapshots_size,
        results_size=args.results_size,
        cpu=args.cpu,
        memory=args.memory,
        grade_args=grade_args(args),
        unsafe_no_sandbox=args.unsafe_no_sandbox,
    )
    expect, image, shards, name = args.expect, args.image, args.shards, args.name
    if expect < 1:
        raise ValueError("--expect must be at least 1 (the number of snapshots to grade)")
    job = objects[-1]
    meta = {k: v for k, v in job["metadata"].items() if k != "name"}
    loader, merger, retriever = f"{name}-loader", f"{name}-merge", f"{name}-retriever"
    claims = objects[:-1]
    steps = [
        Step(
            f"0. The namespace, at Pod Security level {pod_security(args)!r} (its grading pods'"
            " needs), and its default service account (no pod is admitted before it).",
            [namespace_object(args)],
            [
                "for _ in $(seq 60); do k get serviceaccount default >/dev/null 2>&1 && break;"
                " sleep 1; done",
            ],
        ),
        Step(
            "1. The claims: the snapshots (filled in step 2, read-only to the graders) and the "
            "results.",
            claims,
            [] if claims else ["# (--no-claims: they exist already)"],
        ),
        _loader_step(loader, meta, image, args.snapshots_claim, expect),
        Step(
            f"3. The Indexed Job: {shards} pods, each waits for the marker, then grades its shard "
            f"of exactly {expect} snapshots.",
            [job],
            [f"wait_job {name}"],
            [f"k delete job {name} {merger} --ignore-not-found  # a Job cannot be changed"],
        ),
        Step(
            "4. The merge: one grades.csv and one report.html in the results claim's class/.",
            [merge_job(args, meta)],
            [f"wait_job {merger}"],
        ),
        _retriever_step(retriever, meta, image, args.results_claim),
    ]
    return steps


def _loader_step(loader: str, meta: JsonObject, image: str, claim: str, expect: int) -> Step:
    """Step 2: a helper pod that holds the snapshots' claim while the operator's tar fills it."""
    return Step(
        f"2. The loader: stream the {expect} snapshots into their claim, then mark them complete.",
        [_helper_pod(loader, meta, image, claim, SNAPSHOTS, False, 7200)],
        [
            f"k wait --for=condition=Ready pod/{loader} --timeout=15m",
            f"k exec {loader} -- rm -f {SNAPSHOTS}/{READY}",
            # the whole folder, its layout kept: a folder per learner, an LMS export's
            # names or a roster decide whose each snapshot is (classroom/identity.py)
            f'tar -cf - -C "$SNAPSHOTS" . | k exec -i {loader} -- tar -xf - -C {SNAPSHOTS}',
            f"k exec {loader} -- touch {SNAPSHOTS}/{READY}",
            f"k delete pod {loader} --wait=false",
        ],
        [f"k delete pod {loader} --ignore-not-found"],
    )


def _retriever_step(retriever: str, meta: JsonObject, image: str, claim: str) -> Step:
    """Step 5: a helper pod that holds the results' claim while the class folder is copied out."""
    return Step(
        '5. The results out: class/ into "$OUT" (grades.csv, report.html, every '
        "learner's results).",
        [_helper_pod(retriever, meta, image, claim, RESULTS, True, 3600)],
        [
            f"k wait --for=condition=Ready pod/{retriever} --timeout=15m",
            'mkdir -p "$OUT"',
            f'k exec {retriever} -- tar -cf - -C {RESULTS}/class . | tar -xf - -C "$OUT"',
            f"k delete pod {retriever} --wait=false",
            'echo "grades.csv:  $OUT/grades.csv"',
            'echo "report.html: $OUT/report.html"',
        ],
        [f"k delete pod {retriever} --ignore-not-found"],
    )


def pod_security(args: argparse.Namespace) -> str:
    """The Pod Security level the grading pods need: ``privileged`` for the sandbox's
    ``Unconfined`` seccomp (``baseline`` refuses it), ``restricted`` without the sandbox."""
    return "restricted" if args.unsafe_no_sandbox else "privileged"


def namespace_object(args: argparse.Namespace) -> JsonObject:
    """The namespace of the procedure, its Pod Security level enforced (and pinned to the
    latest policy, what the cluster's apiserver knows)."""
    level = pod_security(args)
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": args.namespace,
            "labels": {
                "app.kubernetes.io/name": "gpushare-class",
                "pod-security.kubernetes.io/enforce": level,
                "pod-security.kubernetes.io/enforce-version": "latest",
            },
        },
    }


HEREDOC = "YAML"  # the delimiter of each step's objects (deploy/pod.py reads them back)


def _yaml(objects: list[JsonObject]) -> str:
    # a copy that shares no dict: the labels written again, never as &id001/*id001
    plain = json.loads(json.dumps(objects))
    return yaml.safe_dump_all(plain, sort_keys=False, default_flow_style=False)


def render(steps: list[Step], args: argparse.Namespace, argv: str) -> str:
    """The procedure as a bash script: run it where kubectl reaches the cluster."""
    image, namespace, expect = args.image, args.namespace, args.expect
    ns = f" --namespace {shlex.quote(namespace)}"
    img = shlex.quote(image)
    lines = [
        "#!/usr/bin/env bash",
        f"# gpushare class grade on Kubernetes, printed by: {argv}",
        "#",
        "# Run it where kubectl reaches the cluster, with the folder of the class's snapshots:",
        "#   bash class-job.sh SNAPSHOTS_DIR [OUT_DIR]      (OUT_DIR: default ./class)",
        "# Each step waits for the one before; no pod grades before every snapshot is in. Run",
        "# again, it applies the same objects and replaces the Jobs and pods of a run before.",
        "# Cluster needs (README, 'Beyond one machine'): Kubernetes 1.33+ (backoffLimitPerIndex",
        "# GA; 1.29+ with it beta), a storage class with ReadWriteMany; the namespace (step 0)",
        f"# at Pod Security level {pod_security(args)!r} for the grading pods, which lets this",
        "# script create or label it.",
        "#",
        "# The image, once per gpushare release, from a checkout at that release (not run by",
        "# this script; its tag the version that `gpushare --version` prints):",
        f"#      podman build -t {img} --build-arg VERSION={version()} -f Containerfile .",
        f"#      podman push {img}",
        "#    (podman login to the registry first if it asks; a private registry also needs an",
        "#    imagePullSecret in the namespace)",
        "set -euo pipefail",
        'SNAPSHOTS="${1:?usage: bash class-job.sh SNAPSHOTS_DIR [OUT_DIR]}"',
        'OUT="${2:-class}"',
        f"EXPECT={expect}",
        f'k() {{ "${{KUBECTL:-kubectl}}"{ns} "$@"; }}',
        "wait_job() {  # until the Job is Complete (0) or Failed (1)",
        "    local state",
        "    while :; do",
        '        state="$(k get job "$1" -o '
        'jsonpath=\'{range .status.conditions[?(@.status=="True")]}{.type} {end}\')"',
        '        case " $state " in',
        '            *" Complete "*) echo "Job $1: complete"; return 0 ;;',
        f'            *" Failed "*) echo "Job $1 failed: kubectl{ns} describe job $1" >&2;'
        " return 1 ;;",
        "        esac",
        "        sleep 5",
        "    done",
        "}",
        f'found="$(find "$SNAPSHOTS" -type f -name \'*{SUFFIX}\' | wc -l)"',
        'if [ "$found" -ne "$EXPECT" ]; then',
        f'    echo "class-job: expected $EXPECT *{SUFFIX} in $SNAPSHOTS, found $found" >&2',
        "    exit 2",
        "fi",
    ]
    for step in steps:
        lines += ["", f"# {step.title}", *step.before]
        if step.objects:
            lines += [f"k apply -f - <<'{HEREDOC}'", _yaml(step.objects).rstrip("\n"), HEREDOC]
        lines += step.shell
    return "\n".join(lines) + "\n"


def grade_args(args: argparse.Namespace, snapshots: str = SNAPSHOTS) -> list[str]:
    """The ``class grade`` options each pod runs with (``snapshots``: where it mounts them)."""
    out = ["--expect", str(args.expect)] if args.expect else []
    out += ["--seed", str(args.seed)]
    out += ["--timeout", f"{args.timeout:g}"]
    out += ["--jobs", str(args.jobs or _cores(args.cpu))]
    if args.lang:
        out += ["--lang", args.lang]
    if args.all:
        out.append("--all")
    if args.deadline:
        out += ["--deadline", args.deadline]
    if args.roster:  # a file of the snapshots folder, copied in with it
        out += ["--roster", f"{snapshots}/{args.roster}"]
    return out


def _cores(cpu: str) -> int:
    """Worker processes for a CPU request: "2" -> 2, "1500m" -> 1 (at least 1)."""
    try:
        value = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
    except ValueError:
        return 1
    return max(1, int(value))


# --------------------------------------------------------------------------- without Kubernetes

SUBS, OUT = "/subs", "/out"  # the one-line run's two folders, in the container


def standalone_spec(args: argparse.Namespace) -> JsonObject:
    """The grading pod of :func:`manifests` as one container on one machine: the same security
    settings and limits (the very objects, not a copy of them), ``class grade SUBS --out OUT``
    with the class's options and no shard, the snapshots read-only, a scratch ``/tmp``."""
    (job,) = manifests(
        image=args.image,
        shards=1,
        claims=False,
        cpu=args.cpu,
        memory=args.memory,
        grade_args=grade_args(args, SUBS),
        unsafe_no_sandbox=args.unsafe_no_sandbox,
    )
    spec: JsonObject = job["spec"]["template"]["spec"]
    container = spec["containers"][0]
    options = container["command"][container["command"].index("--shard") + 2 :]
    container["args"] = ["gpushare", "class", "grade", SUBS, "--out", OUT, *options]
    del container["command"]
    container["env"] = [e for e in container["env"] if e["name"] != INDEX]
    container["volumeMounts"] = [
        {"name": "snapshots", "mountPath": SUBS, "readOnly": True},
        {"name": "results", "mountPath": OUT},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    spec.pop("initContainers")  # nothing to wait for: the folder is there
    return spec


def podman_line(args: argparse.Namespace) -> str:
    """``podman run`` of :func:`standalone_spec` (translated by :func:`deploy.pod.run_args`,
    as ``make images`` runs the Job's pods), the folders ``./subs`` and ``./out``."""
    argv = pod.run_args(
        standalone_spec(args),
        index=0,
        image=args.image,
        volumes={"snapshots": "$PWD/subs", "results": "$PWD/out"},
    )
    words = ["podman", "run"]
    for arg in argv:  # "$PWD" left to the operator's shell, everything else quoted
        words.append(f'"{arg}"' if arg.startswith("$PWD/") else shlex.quote(arg))
    return " ".join(words)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m deploy.job",
        description="Print the procedure (bash) that grades a class of snapshots on Kubernetes, "
        "or with --podman the one container run that grades it on one machine.",
    )
    parser.add_argument(
        "--podman",
        action="store_true",
        help="print one podman run instead: snapshots in ./subs, the class written to ./out "
        "(mkdir out && chmod 777 out first: the container's user is none of this machine's)",
    )
    parser.add_argument(
        "--image",
        help="the grading image (Containerfile), tagged with the version; default with "
        f"--podman: localhost/gpushare-grade:{version()}, what make images builds",
    )
    parser.add_argument("--shards", type=int, metavar="N", help="pods, one shard each")
    parser.add_argument(
        "--expect",
        type=int,
        metavar="N",
        help="the number of snapshot files of the class: nothing is graded unless all are in",
    )
    parser.add_argument(
        "--roster",
        metavar="FILE",
        help="CSV file,learner: whose each snapshot is; a path inside SNAPSHOTS_DIR",
    )
    parser.add_argument(
        "--deadline", metavar="TIME", help="flag snapshots captured after this ISO 8601 time"
    )
    parser.add_argument("--name", default="gpushare-class", help="the Job's name")
    parser.add_argument(
        "--namespace",
        default="gpushare",
        help="namespace of the Job and its claims, created or labelled by step 0 (default "
        "gpushare)",
    )
    parser.add_argument("--snapshots-claim", default="gpushare-snapshots", metavar="NAME")
    parser.add_argument("--results-claim", default="gpushare-results", metavar="NAME")
    parser.add_argument(
        "--no-claims", action="store_true", help="the claims exist: print the Job alone"
    )
    parser.add_argument("--storage-class", help="storage class of the claims")
    parser.add_argument("--snapshots-size", default="1Gi", metavar="SIZE")
    parser.add_argument("--results-size", default="1Gi", metavar="SIZE")
    parser.add_argument("--cpu", default="2", help="CPU request of a pod (default 2)")
    parser.add_argument("--memory", default="2Gi", help="memory of a pod (default 2Gi)")
    class_cli.add_grade_options(
        parser,
        lang_help="language of feedback and report (default: zh)",
        jobs_default="the CPU request",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.podman:
        args.image = args.image or f"localhost/gpushare-grade:{version()}"
        print(podman_line(args))
        return 0
    missing = [f"--{o}" for o in ("image", "shards", "expect") if getattr(args, o) is None]
    if missing:
        parser.error(f"the procedure needs {', '.join(missing)}")
    try:
        steps = procedure(args)
    except ValueError as exc:
        print(f"deploy.job: {exc}", file=sys.stderr)
        return 2
    argv_said = shlex.join(
        ["python", "-m", "deploy.job", *(sys.argv[1:] if argv is None else argv)]
    )
    sys.stdout.write(render(steps, args, argv_said))
    return 0


if __name__ == "__main__":
    sys.exit(main())
