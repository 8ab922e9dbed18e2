"""``gpushare class job``: the class grade as a Kubernetes Indexed Job, printed as YAML.

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
import shlex
import sys
from typing import Any

SNAPSHOTS = "/snapshots"
RESULTS = "/results"
INDEX = "JOB_COMPLETION_INDEX"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


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
) -> list[dict[str, Any]]:
    """The objects to create: the two claims (unless ``claims`` is False), then the Job."""
    if shards < 1:
        raise ValueError("--shards must be at least 1")
    labels = {"app.kubernetes.io/name": "gpushare-class", "app.kubernetes.io/instance": name}
    meta: dict[str, Any] = {"labels": labels}
    if namespace:
        meta["namespace"] = namespace
    command = [
        "gpushare",
        "class",
        "grade",
        SNAPSHOTS,
        "--out",
        f"{RESULTS}/shard-$({INDEX})",
        "--shard",
        f"$({INDEX})/{shards}",
        *(grade_args or []),
    ]
    if unsafe_no_sandbox:
        command.append("--unsafe-no-sandbox")
    profile = "RuntimeDefault" if unsafe_no_sandbox else "Unconfined"
    sandbox_needs = {} if unsafe_no_sandbox else {"procMount": "Unmasked"}
    container = {
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
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
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
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, **meta},
        "spec": {
            "completionMode": "Indexed",
            "completions": shards,
            "parallelism": shards,
            "backoffLimitPerIndex": 1,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    **({} if unsafe_no_sandbox else {"hostUsers": False}),
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "runAsGroup": 1000,
                        "fsGroup": 1000,
                    },
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "snapshots",
                            "persistentVolumeClaim": {
                                "claimName": snapshots_claim,
                                "readOnly": True,
                            },
                        },
                        {"name": "results", "persistentVolumeClaim": {"claimName": results_claim}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
                    ],
                },
            },
        },
    }
    objects: list[dict[str, Any]] = []
    if claims:
        for claim, mode, size in (
            (snapshots_claim, "ReadOnlyMany", snapshots_size),
            (results_claim, "ReadWriteMany", results_size),
        ):
            spec: dict[str, Any] = {
                "accessModes": [mode],
                "resources": {"requests": {"storage": size}},
            }
            if storage_class:
                spec["storageClassName"] = storage_class
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": claim, **meta},
                    "spec": spec,
                }
            )
    objects.append(job)
    return objects


def render(objects: list[dict[str, Any]], shards: int, results_claim: str) -> str:
    import yaml

    head = (
        f"# gpushare class grade as an Indexed Job of {shards} pods.\n"
        f"# Copy the snapshots into the claim mounted at {SNAPSHOTS}, then "
        "`kubectl apply -f` this.\n"
        f"# When the Job is complete, on anything that mounts {results_claim}:\n"
        f"#   gpushare class merge {RESULTS}/shard-* --out {RESULTS}/class\n"
    )

    class Plain(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # the labels repeated, not &id001/*id001
            return True

    return head + yaml.dump_all(objects, Dumper=Plain, sort_keys=False, default_flow_style=False)


def grade_args(args: argparse.Namespace) -> list[str]:
    """The ``class grade`` options each pod runs with."""
    out = ["--seed", str(args.seed), "--timeout", f"{args.timeout:g}"]
    out += ["--jobs", str(args.jobs or _cores(args.cpu))]
    if args.lang:
        out += ["--lang", args.lang]
    if args.all:
        out.append("--all")
    return out


def _cores(cpu: str) -> int:
    """Worker processes for a CPU request: "2" -> 2, "1500m" -> 1 (at least 1)."""
    try:
        value = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
    except ValueError:
        return 1
    return max(1, int(value))


def run_cli(args: argparse.Namespace) -> int:
    try:
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
    except ValueError as exc:
        print(f"gpushare: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render(objects, args.shards, args.results_claim))
    return 0


def pod_command(objects: list[dict[str, Any]]) -> str:
    """The Job's pod command as a shell line (for documentation and tests)."""
    job = objects[-1]
    return shlex.join(job["spec"]["template"]["spec"]["containers"][0]["command"])
