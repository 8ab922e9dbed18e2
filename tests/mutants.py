"""Broken submissions, each aimed at one check, as a learner who half-read the lab makes them.

Every mutant starts from the reference solution (cluster and work directory) and breaks one
thing; ``fails`` is the exact set of checks that must fail then, nothing more and nothing less.
Where a mistake cannot be made without a consequence in the same step (a namespace that does
not exist cannot hold the quota either), the set says so.

File mutants edit a copy of the solved work directory only. Cluster mutants change the lab
(with kubectl, as a learner would) and leave it dirty; the test re-solves before the next one.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpushare.labkit import Mutant
from tests.helpers import kubectl


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert text.count(old) >= count, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count))


def python_script(body: str) -> str:
    """A check-request.sh in Python, as many learners write it."""
    return "#!/usr/bin/env python3\nimport sys, yaml\n" + body


REFERENCE_LOOP = """
over = []
with open(sys.argv[1]) as fh:
    for doc in yaml.safe_load_all(fh):
        if not doc or doc.get("kind") != "Pod":
            continue
        for c in doc["spec"]["containers"]:
            res = c.get("resources") or {}
            n = max(int((res.get(p) or {}).get("nvidia.com/gpu", 0)) for p in SIDES)
            if n > LIMIT:
                over.append(f"OVER={c['name']}={n}")
print("\\n".join(over) if over else "OK")
sys.exit(1 if over else 0)
"""


def script_variant(sides: str = '("limits", "requests")', limit: str = "1", loop: str = "") -> str:
    body = (loop or REFERENCE_LOOP).replace("SIDES", sides).replace("LIMIT", limit)
    return python_script(body)


def _m(id: str, fails: set[str], **kw: Any) -> Mutant:
    return Mutant(id, frozenset(fails), **kw)


# --- file mutants ---------------------------------------------------------------------


def _write(rel: str, text: str, mode: int | None = None) -> Callable[[Path], None]:
    def apply(wd: Path) -> None:
        (wd / rel).write_text(text)
        if mode is not None:
            (wd / rel).chmod(mode)

    return apply


FILE_MUTANTS = [
    _m(
        "1.2 file drifted from the cluster (replicas 2 in the file)",
        {"1.2"},
        files=lambda wd: edit(wd / "k8s/device-plugin-configs.yaml", "replicas: 4", "replicas: 2"),
    ),
    _m(
        "4.1 file asks 2 GPUs for plain-gpu, the cluster pod 1",
        {"4.1"},
        files=lambda wd: edit(wd / "k8s/mig-job.yaml", "nvidia.com/gpu: 1", "nvidia.com/gpu: 2"),
    ),
    _m(
        "4.2 mig-job pinned with nodeName in the file",
        {"4.2"},
        files=lambda wd: edit(
            wd / "k8s/mig-job.yaml", "spec:\n", "spec:\n  nodeName: lab-node-2\n"
        ),
    ),
    _m(
        "5.1 quota file says 3",
        {"5.1"},
        files=lambda wd: edit(wd / "k8s/gpu-quota.yaml", "gpu: 2", "gpu: 3"),
    ),
    _m(
        "5.4 team-over asks for cpu, not a GPU",
        {"5.4"},
        files=lambda wd: edit(wd / "k8s/team-over.yaml", "nvidia.com/gpu: 1", "cpu: 100m"),
    ),
    _m(
        "5.4 team-over asks for two GPUs (edited after the denial was captured)",
        {"5.4"},
        files=lambda wd: edit(wd / "k8s/team-over.yaml", "nvidia.com/gpu: 1", "nvidia.com/gpu: 2"),
    ),
    _m(
        "5.5 denial not captured (stdout only: empty file)",
        {"5.5"},
        files=_write("out/quota-denied.txt", ""),
    ),
    _m(
        "5.5 denial paraphrased",
        {"5.5"},
        files=_write("out/quota-denied.txt", "Error: quota exceeded for gpu-quota\n"),
    ),
    _m(
        "6.1 script not executable",
        {"6.1"},
        files=lambda wd: (wd / "bin/check-request.sh").chmod(stat.S_IRUSR | stat.S_IWUSR),
    ),
    _m(
        "6.2 script reads only requests",
        {"6.2", "6.5"},
        files=_write("bin/check-request.sh", script_variant(sides='("requests",)'), 0o755),
    ),
    _m(
        "6.3 script treats one GPU as over",
        {"6.3", "6.5"},
        files=_write("bin/check-request.sh", script_variant(limit="0"), 0o755),
    ),
    _m(
        # Only the sample has a file without any GPU: the unseen cases pack the lab's listed
        # features (several documents and containers, requests only, quoted quantities).
        "6.4 script gives up on a manifest without any GPU",
        {"6.4"},
        files=_write(
            "bin/check-request.sh",
            script_variant(
                loop='if "nvidia.com/gpu" not in open(sys.argv[1]).read():\n'
                '    sys.exit("no GPU request found")\n' + REFERENCE_LOOP
            ),
            0o755,
        ),
    ),
    _m(
        "6.5 script reads only the first YAML document",
        {"6.5"},
        files=_write(
            "bin/check-request.sh",
            script_variant(
                loop=REFERENCE_LOOP.replace("yaml.safe_load_all(fh)", "[yaml.safe_load(fh)]")
            ),
            0o755,
        ),
    ),
    _m(
        "6.5 script looks at the first container only",
        {"6.5"},
        files=_write(
            "bin/check-request.sh",
            script_variant(
                loop=REFERENCE_LOOP.replace(
                    'doc["spec"]["containers"]', 'doc["spec"]["containers"][:1]'
                )
            ),
            0o755,
        ),
    ),
    _m(
        "6.5 script misses quoted quantities",
        {"6.5"},
        files=_write(
            "bin/check-request.sh",
            script_variant(
                loop=REFERENCE_LOOP.replace(
                    'int((res.get(p) or {}).get("nvidia.com/gpu", 0))',
                    "(lambda v: v if isinstance(v, int) else 0)"
                    '((res.get(p) or {}).get("nvidia.com/gpu", 0))',
                )
            ),
            0o755,
        ),
    ),
    _m(
        "7.2 isolation table has a sixth key",
        {"7.2"},
        files=lambda wd: edit(
            wd / "out/isolation.txt",
            "MIG_FAULT_ISOLATION=yes\n",
            "MIG_FAULT_ISOLATION=yes\nMPS_FAULT_ISOLATION=no\n",
        ),
    ),
    _m(
        "7.3 MPS memory isolation taken for full",
        {"7.3"},
        files=lambda wd: edit(
            wd / "out/isolation.txt", "MPS_MEMORY_ISOLATION=partial", "MPS_MEMORY_ISOLATION=yes"
        ),
    ),
    _m(
        "8.1 batch-train pinned by nodeName",
        {"8.1"},
        files=lambda wd: edit(
            wd / "k8s/placement.yaml",
            "  nodeSelector:\n    nvidia.com/device-plugin.config: default\n",
            "  nodeName: lab-node-0\n",
        ),
    ),
    _m(
        "8.1 notebook placed by hostname label",
        {"8.1"},
        files=lambda wd: edit(
            wd / "k8s/placement.yaml",
            "nvidia.com/device-plugin.config: shared",
            "kubernetes.io/hostname: lab-node-1",
        ),
    ),
    _m(
        "8.3 placement.txt guessed (two nodes swapped)",
        {"8.3"},
        files=lambda wd: (wd / "out/placement.txt").write_text(
            "prod-inference=lab-node-2\nnotebook=lab-node-0\nbatch-train=lab-node-1\n"
        ),
    ),
    _m(
        "8.3 placement.txt misses a pod",
        {"8.3"},
        files=lambda wd: (wd / "out/placement.txt").write_text(
            "prod-inference=lab-node-2\nnotebook=lab-node-1\n"
        ),
    ),
]


# --- cluster mutants --------------------------------------------------------------------


def _k(lab: Any, *args: str, input: str | None = None) -> None:
    kubectl(lab, *args, input=input)


def _status(lab: Any, node: str, patch: str) -> None:
    _k(lab, "patch", "node", node, "--subresource=status", "--type=merge", "-p", patch)


def _reapply_cm(old: str, new: str, count: int = 1) -> Callable[[Any, Path], None]:
    def apply(lab: Any, wd: Path) -> None:
        edit(wd / "k8s/device-plugin-configs.yaml", old, new, count)
        _k(lab, "apply", "-f", str(wd / "k8s/device-plugin-configs.yaml"))

    return apply


def _recreate(
    ns: str,
    pod: str,
    rel: str,
    old: str,
    new: str,
    *,
    before: Callable[[Any], None] | None = None,
    only: bool = False,
) -> Callable[[Any, Path], None]:
    """Delete ``pod``, edit its file, optionally do ``before``, then apply the file again."""

    def apply(lab: Any, wd: Path) -> None:
        _k(lab, "delete", "pod", "-n", ns, pod, "--grace-period=0", "--force", "--wait=true")
        edit(wd / rel, old, new)
        if before:
            before(lab)
        _k(lab, "apply", "-f", str(wd / rel))

    return apply


def _cordon(*nodes: str) -> Callable[[Any], None]:
    def apply(lab: Any) -> None:
        for n in nodes:
            _k(lab, "cordon", n)

    return apply


def _delete_team_a(lab: Any, wd: Path) -> None:
    _k(lab, "delete", "namespace", "team-a", "--wait=true", "--timeout=60s")


def _batch_train_on_shared(lab: Any, wd: Path) -> None:
    """The cluster's batch-train came from an old manifest; the file and the record are right."""
    _k(lab, "delete", "pod", "-n", "gpu-share", "batch-train", "--grace-period=0", "--force")
    doc = (wd / "k8s/placement.yaml").read_text().split("---")[2]
    _k(lab, "apply", "-f", "-", input=doc.replace("config: default", "config: shared"))
    _k(lab, "wait", "-n", "gpu-share", "--for=condition=PodScheduled", "pod/batch-train")
    nodes = kubectl(
        lab,
        "get",
        "pod",
        "-n",
        "gpu-share",
        "prod-inference",
        "notebook",
        "batch-train",
        "-o",
        'jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}{"\\n"}{end}',
    ).stdout
    assert "batch-train=lab-node-1" in nodes, nodes
    (wd / "out/placement.txt").write_text(nodes)


def team_over_without_namespace(*args: str) -> Callable[[Any, Path], None]:
    """team-over.yaml with no ``metadata.namespace``, applied with ``args`` (``-n team-a``, or
    nothing: the current namespace, ``default``), its answer captured with ``2>&1``."""

    def apply(lab: Any, wd: Path) -> None:
        edit(wd / "k8s/team-over.yaml", "  namespace: team-a\n", "")
        text = (wd / "k8s/team-over.yaml").read_text()
        out = kubectl(lab, "apply", *args, "-f", "-", input=text, check=False)
        (wd / "out/quota-denied.txt").write_text(out.stdout + out.stderr)

    return apply


def _pending_team_pod(lab: Any, wd: Path) -> None:
    _k(lab, "delete", "pod", "-n", "team-a", "team-a-2", "--grace-period=0", "--force")
    doc = (wd / "k8s/team-pods.yaml").read_text().split("---")[1]
    _k(lab, "apply", "-f", "-", input=doc.replace("config: shared", "config: nowhere"))


CLUSTER_MUTANTS = [
    _m("1.1 team-a never created", {"1.1", "5.1", "5.2", "5.3", "5.4"}, cluster=_delete_team_a),
    _m(
        "1.3 default config has an unknown migStrategy",
        {"1.3"},
        cluster=_reapply_cm("migStrategy: none", "migStrategy: auto"),
    ),
    _m(
        "1.4 shared does not refuse multi-slice requests",
        {"1.4"},
        cluster=_reapply_cm(
            "failRequestsGreaterThanOne: true", "failRequestsGreaterThanOne: false"
        ),
    ),
    _m(
        "1.5 replicas 2, node count derived from it (2 x 2)",
        {"1.5"},
        cluster=lambda lab, wd: (
            _reapply_cm("replicas: 4", "replicas: 2")(lab, wd),
            _status(
                lab,
                "lab-node-1",
                '{"status":{"capacity":{"nvidia.com/gpu":"4"},'
                '"allocatable":{"nvidia.com/gpu":"4"}}}',
            ),
        ),
    ),
    _m(
        "2.4 replicas 2 but 8 hard-coded on lab-node-1",
        {"1.5", "2.4"},
        cluster=_reapply_cm("replicas: 4", "replicas: 2"),
    ),
    _m(
        "1.6 default config shares too",
        {"1.6"},
        cluster=_reapply_cm(
            "  default: |-\n    version: v1\n",
            "  default: |-\n    version: v1\n    sharing:\n      timeSlicing:\n        resources:\n"
            "          - name: nvidia.com/gpu\n            replicas: 2\n",
        ),
    ),
    _m(
        "1.3 default sets a deviceListStrategy the plugin does not have",
        {"1.3"},
        cluster=_reapply_cm(
            "    flags:\n      migStrategy: none\n  shared",
            "    flags:\n      migStrategy: none\n      plugin:\n"
            "        deviceListStrategy: volume\n  shared",
        ),
    ),
    _m(
        "1.3 shared names the resource in upper case (nvidia.com/GPU)",
        {"1.3", "1.5"},
        cluster=_reapply_cm(
            "          - name: nvidia.com/gpu\n", "          - name: nvidia.com/GPU\n"
        ),
    ),
    _m(
        "1.5 shared renames nvidia.com/gpu (renameByDefault: true)",
        {"1.5"},
        cluster=_reapply_cm(
            "        failRequestsGreaterThanOne: true\n",
            "        failRequestsGreaterThanOne: true\n        renameByDefault: true\n",
        ),
    ),
    _m(
        "2.1 lab-node-0 label missing",
        {"2.1"},
        cluster=lambda lab, wd: _k(
            lab, "label", "node", "lab-node-0", "nvidia.com/device-plugin.config-"
        ),
    ),
    _m(
        "2.2 lab-node-1 label typo",
        {"2.2"},
        cluster=lambda lab, wd: _k(
            lab,
            "label",
            "node",
            "lab-node-1",
            "nvidia.com/device-plugin.config=share",
            "--overwrite",
        ),
    ),
    _m(
        "2.3 allocatable forgotten on lab-node-0",
        {"2.3"},
        cluster=lambda lab, wd: _status(
            lab, "lab-node-0", '{"status":{"allocatable":{"nvidia.com/gpu":null}}}'
        ),
    ),
    _m(
        "2.4 forgot to multiply (2 on lab-node-1)",
        {"2.4"},
        cluster=lambda lab, wd: _status(
            lab,
            "lab-node-1",
            '{"status":{"capacity":{"nvidia.com/gpu":"2"},"allocatable":{"nvidia.com/gpu":"2"}}}',
        ),
    ),
    _m(
        "3.1 MIG strategy single",
        {"3.1"},
        cluster=lambda lab, wd: _k(
            lab, "label", "node", "lab-node-2", "nvidia.com/mig.strategy=single", "--overwrite"
        ),
    ),
    _m(
        "3.2 three MIG slices advertised",
        {"3.2"},
        cluster=lambda lab, wd: _status(
            lab,
            "lab-node-2",
            '{"status":{"capacity":{"nvidia.com/mig-1g.10gb":"3"},'
            '"allocatable":{"nvidia.com/mig-1g.10gb":"3"}}}',
        ),
    ),
    _m(
        "3.3 plain GPU left on the MIG node",
        {"3.3"},
        cluster=lambda lab, wd: _status(
            lab,
            "lab-node-2",
            '{"status":{"capacity":{"nvidia.com/gpu":"1"},"allocatable":{"nvidia.com/gpu":"1"}}}',
        ),
    ),
    _m(
        "4.2 plain-gpu given a nodeSelector",
        {"4.2"},
        cluster=_recreate(
            "gpu-share",
            "plain-gpu",
            "k8s/mig-job.yaml",
            "  name: plain-gpu\n  namespace: gpu-share\nspec:\n",
            "  name: plain-gpu\n  namespace: gpu-share\nspec:\n  nodeSelector:\n"
            "    nvidia.com/device-plugin.config: shared\n",
        ),
    ),
    _m(
        "4.3 mig-job never scheduled (MIG node cordoned)",
        {"4.3"},
        cluster=_recreate(
            "gpu-share",
            "mig-job",
            "k8s/mig-job.yaml",
            "kind: Pod",
            "kind: Pod",
            before=_cordon("lab-node-2"),
        ),
    ),
    _m(
        "4.4 plain-gpu never scheduled (GPU nodes cordoned)",
        {"4.4"},
        cluster=_recreate(
            "gpu-share",
            "plain-gpu",
            "k8s/mig-job.yaml",
            "kind: Pod",
            "kind: Pod",
            before=_cordon("lab-node-0", "lab-node-1"),
        ),
    ),
    _m(
        "5.2 quota raised to 3 in the cluster only",
        {"5.1", "5.2", "5.4"},
        cluster=lambda lab, wd: _k(
            lab,
            "patch",
            "resourcequota",
            "gpu-quota",
            "-n",
            "team-a",
            "--type=merge",
            "-p",
            '{"spec":{"hard":{"requests.nvidia.com/gpu":"3"}}}',
        ),
    ),
    _m("5.3 one team pod left Pending", {"5.3"}, cluster=_pending_team_pod),
    _m(
        "5.4 team-over.yaml sets no namespace and went to default",
        {"5.4", "5.5"},
        cluster=team_over_without_namespace(),
    ),
    _m(
        "7.1 mps config keeps timeSlicing too",
        {"7.1"},
        cluster=_reapply_cm(
            "    sharing:\n      mps:\n",
            "    sharing:\n      timeSlicing:\n        resources:\n"
            "          - name: nvidia.com/gpu\n            replicas: 4\n      mps:\n",
        ),
    ),
    _m(
        "7.1 mps config with migStrategy mixed, which the plugin refuses",
        {"7.1"},
        cluster=_reapply_cm(
            "  mps: |-\n    version: v1\n",
            "  mps: |-\n    version: v1\n    flags:\n      migStrategy: mixed\n",
        ),
    ),
    _m("8.2 batch-train running on the shared node", {"8.2"}, cluster=_batch_train_on_shared),
]


# --- valid alternatives -----------------------------------------------------------------

AFFINITY = """  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - key: {key}
                operator: In
                values: [{value}]
"""


def _alternative_solutions(dst: Path) -> Path:
    from gpushare.locations import solutions_dir

    """A copy of solutions/ written the other correct ways a learner may choose."""
    shutil.copytree(solutions_dir(), dst)
    k8s = dst / "workdir" / "k8s"
    # `|` instead of `|-`, and no namespace in the ConfigMap file (applied with -n)
    edit(k8s / "device-plugin-configs.yaml", ": |-", ": |", count=3)
    edit(k8s / "device-plugin-configs.yaml", "  namespace: gpu-share\n", "")
    edit(
        dst / "solve.sh",
        "kubectl apply -f k8s/device-plugin-configs.yaml",
        "kubectl apply -n gpu-share -f k8s/device-plugin-configs.yaml",
    )
    # node affinity instead of nodeSelector, quoted quantities, requests and limits both
    placement = (k8s / "placement.yaml").read_text()
    for key, value in [
        ("nvidia.com/mig.strategy", "mixed"),
        ("nvidia.com/device-plugin.config", "shared"),
        ("nvidia.com/device-plugin.config", "default"),
    ]:
        placement = placement.replace(
            f"  nodeSelector:\n    {key}: {value}\n",
            AFFINITY.format(key=key, value=value),
            1,
        )
    placement = placement.replace("nvidia.com/gpu: 1", 'nvidia.com/gpu: "1"')
    # a kind: List holding the three pods
    docs = [d.strip() for d in placement.split("---")]
    items = "\n".join("  - " + "\n    ".join(d.splitlines()) for d in docs)
    (k8s / "placement.yaml").write_text(f"apiVersion: v1\nkind: List\nitems:\n{items}\n")
    edit(
        k8s / "mig-job.yaml",
        "        limits:\n          nvidia.com/gpu: 1",
        '        requests:\n          nvidia.com/gpu: "1"\n        limits:\n'
        '          nvidia.com/gpu: "1"',
    )
    # the check script in plain Python instead of bash
    (dst / "workdir" / "bin" / "check-request.sh").write_text(
        "#!/usr/bin/env python3\n"
        "import sys\nimport yaml\n\n"
        "bad = []\n"
        "for doc in yaml.safe_load_all(open(sys.argv[1])):\n"
        "    if not isinstance(doc, dict) or doc.get('kind') != 'Pod':\n"
        "        continue\n"
        "    for c in doc.get('spec', {}).get('containers', []):\n"
        "        r = c.get('resources') or {}\n"
        "        n = max(int(r.get(s, {}).get('nvidia.com/gpu', 0) or 0)\n"
        "                for s in ('limits', 'requests'))\n"
        "        if n > 1:\n"
        "            bad.append(f\"OVER={c['name']}={n}\")\n"
        "for line in bad:\n    print(line)\n"
        "if not bad:\n    print('OK')\n"
        "sys.exit(1 if bad else 0)\n"
    )
    # a different GPU product label
    edit(
        dst / "solve.sh",
        "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.product=A100-80GB",
    )
    return dst


def play_alternatives(lab: Any, state: Any, tmp_path: Path) -> Path:
    """The lab solved the other correct ways a learner may choose; returns the work dir."""
    from gpushare.lab import solve

    state.fresh()
    workdir = tmp_path / "alt"
    solve.solve(
        workdir,
        kubeconfig=str(lab.kubeconfig),
        solutions=_alternative_solutions(tmp_path / "solutions"),
    )
    state.dirty()
    # learner-written text files: CRLF, trailing spaces, comments, another order, extra lines
    (workdir / "out/isolation.txt").write_bytes(
        b"# my table\r\nMIG_FAULT_ISOLATION = yes  \r\nMIG_MEMORY_ISOLATION=yes\r\n\r\n"
        b"MPS_MEMORY_ISOLATION=partial\r\nTIMESLICING_FAULT_ISOLATION=no\r\n"
        b"TIMESLICING_MEMORY_ISOLATION=no"
    )
    lines = (workdir / "out/placement.txt").read_text().splitlines()
    (workdir / "out/placement.txt").write_text("\r\n".join(reversed(lines)) + "  \r\n")
    denied = (workdir / "out/quota-denied.txt").read_text()
    (workdir / "out/quota-denied.txt").write_text(
        "$ kubectl apply -f k8s/team-over.yaml\n" + denied
    )
    return workdir


# --- hostile files ----------------------------------------------------------------------

HOSTILE_FILE_FAILS = {"4.1", "4.2", "5.1", "5.4", "5.5", "7.2", "7.3", "8.3"}


def break_files(workdir: Path) -> None:
    """Binary, non-UTF-8, FIFO, directory, /dev/zero behind a link: each costs its checks."""
    (workdir / "out/isolation.txt").write_bytes(b"\x00\x01\x02binary")
    (workdir / "out/placement.txt").write_bytes(b"notebook=lab-node-1\n\xff\xfe\n")
    (workdir / "out/quota-denied.txt").unlink()
    os.mkfifo(workdir / "out/quota-denied.txt")
    (workdir / "k8s/mig-job.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: mig-job: x\nspec: {}\n"
    )
    (workdir / "k8s/gpu-quota.yaml").unlink()
    (workdir / "k8s/gpu-quota.yaml").mkdir()
    os.symlink("/dev/zero", workdir / "k8s/team-over.yaml.tmp")
    (workdir / "k8s/team-over.yaml").unlink()
    os.rename(workdir / "k8s/team-over.yaml.tmp", workdir / "k8s/team-over.yaml")
