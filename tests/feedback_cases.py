"""Every check's failure feedback, from real submissions: recorded once, rendered anywhere.

A *case* is a submission a learner could make: the reference solution with one mistake (the
mutants of ``tests/mutants.py``, plus cases aimed at every other way a check can fail: a config
value written as a mapping, a misspelt field, a crashing script, a hostname selector...). To
record, each case is played on a real lab (kubectl, as the learner would), and the cluster's
answers are kept exactly as gpushare reads them (:meth:`LabState.export`, server-side dry-runs
included) together with the work directory's files::

    .venv/bin/python -m tests.feedback_cases record --cluster h-lang   # needs a live lab

The recording (``tests/data/feedback-cases.json.gz``) is real data, replayed with
:meth:`LabState.recorded` and a real :class:`Workdir`; the learner's script is run for real by
the sandbox. So the feedback of every case can be rendered without a cluster, in all three
languages: by ``tests/test_feedback.py`` (which searches it for internals) and by
``make feedback-book`` (which writes it into one file for a native-level reader)::

    .venv/bin/python -m tests.feedback_cases book --out build/feedback-book.md
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import shutil
import stat
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulab import HINT_QUERIES, QUERIES
from gpulab.requestruns import RequestRuns
from gpushare.grading.checks import CheckFailed
from gpushare.grading.runner import Check, load_checks
from gpushare.locations import default_fixtures
from gpushare.reports import messages
from gpushare.submissions.workdir import Workdir

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "tests" / "data" / "feedback-cases.json.gz"
GRADERS = ROOT / "graders"
SEED = 7
LAB_WORKDIR = "/root/gpushare"  # the learner's work dir in the lab (LAB.md)
ALL = "*"  # a case's ``fails``: every check


# --- cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One submission: the solved lab and work dir with ``files`` and ``cluster`` applied.

    ``fresh``: start from a lab that was reset and never solved, and an empty work dir.
    ``fails``: the checks this submission must fail, exactly (``{ALL}``: all of them).
    """

    id: str
    fails: frozenset[str]
    files: Callable[[Path], None] | None = None
    cluster: Callable[[Any, Path], None] | None = None
    fresh: bool = False


def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert text.count(old) >= count, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count))


def _write(rel: str, text: str, mode: int = 0o644) -> Callable[[Path], None]:
    def apply(wd: Path) -> None:
        (wd / rel).parent.mkdir(parents=True, exist_ok=True)
        (wd / rel).write_text(text)
        (wd / rel).chmod(mode)

    return apply


def _file(rel: str, old: str, new: str) -> Callable[[Path], None]:
    return lambda wd: _edit(wd / rel, old, new)


def _remove(rel: str) -> Callable[[Path], None]:
    return lambda wd: (wd / rel).unlink()


CM = "k8s/device-plugin-configs.yaml"
PLACEMENT = "k8s/placement.yaml"
ISOLATION = "out/isolation.txt"


def _kubectl(lab: Any, *args: str, input: str | None = None) -> None:
    from tests.helpers import kubectl

    kubectl(lab, *args, input=input)


def _reapply_cm(old: str, new: str) -> Callable[[Any, Path], None]:
    """Edit the ConfigMap's file and apply it: the file and the cluster stay in step."""

    def apply(lab: Any, wd: Path) -> None:
        _edit(wd / CM, old, new)
        _kubectl(lab, "apply", "-f", str(wd / CM))

    return apply


def _steps(*actions: Callable[[Any, Path], None]) -> Callable[[Any, Path], None]:
    def apply(lab: Any, wd: Path) -> None:
        for action in actions:
            action(lab, wd)

    return apply


def _k(*args: str) -> Callable[[Any, Path], None]:
    return lambda lab, wd: _kubectl(lab, *args)


def _status(node: str, patch: str) -> Callable[[Any, Path], None]:
    return _k("patch", "node", node, "--subresource=status", "--type=merge", "-p", patch)


def _recreate_from(
    ns: str, pod: str, rel: str, doc: int, old: str, new: str
) -> Callable[[Any, Path], None]:
    """Delete ``pod`` and create it again from document ``doc`` of ``rel`` with ``old``
    replaced: the cluster changes, the learner's file does not."""

    def apply(lab: Any, wd: Path) -> None:
        _kubectl(lab, "delete", "pod", "-n", ns, pod, "--force", "--grace-period=0")
        text = (wd / rel).read_text().split("---\n")[doc]
        assert old in text, (old, rel)
        _kubectl(lab, "apply", "-f", "-", input=text.replace(old, new))
        _kubectl(
            lab, "wait", "-n", ns, "--for=condition=PodScheduled", f"pod/{pod}", "--timeout=60s"
        )

    return apply


def _apply_without_namespace(rel: str) -> Callable[[Any, Path], None]:
    """Apply ``rel`` with its ``namespace:`` lines taken out and no ``-n``: its objects go to
    the current namespace (``default``), as a file that sets no namespace does."""

    def apply(lab: Any, wd: Path) -> None:
        text = "".join(
            ln for ln in (wd / rel).read_text().splitlines(True) if "namespace:" not in ln
        )
        _kubectl(lab, "apply", "-f", "-", input=text)

    return apply


def _mutants() -> Any:
    import tests.mutants as mutants

    return mutants


def _script(body: str) -> Callable[[Path], None]:
    return _write("bin/check-request.sh", body, 0o755)


S6 = {"6.2", "6.3", "6.4", "6.5"}
SHARED_RESOURCE = "          - name: nvidia.com/gpu\n            replicas: 4\n  mps"
SHARED_BLOCK = (
    "  shared: |-\n    version: v1\n    flags:\n      migStrategy: none\n"
    "    sharing:\n      timeSlicing:\n        failRequestsGreaterThanOne: true\n"
    "        resources:\n          - name: nvidia.com/gpu\n            replicas: 4\n"
)
AFFINITY_TWO = (
    "  affinity:\n    nodeAffinity:\n"
    "      requiredDuringSchedulingIgnoredDuringExecution:\n"
    "        nodeSelectorTerms:\n          - matchExpressions:\n"
    "              - key: nvidia.com/device-plugin.config\n"
    "                operator: In\n                values: [default, shared]\n"
)


PREFERRED = (
    "  affinity:\n    nodeAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n"
    "        - weight: 1\n          preference:\n            matchExpressions:\n"
    "              - key: nvidia.com/device-plugin.config\n                operator: In\n"
    "                values: [default]\n"
)


def _loop(old: str, new: str) -> str:
    """The reference Python script of tests/mutants.py with ``old`` replaced by ``new``."""
    m = _mutants()
    assert old in m.REFERENCE_LOOP, old
    return str(m.script_variant(loop=m.REFERENCE_LOOP.replace(old, new)))


def _applied_before_the_quota_was_full(lab: Any, wd: Path) -> None:
    """team-over.yaml applied while team-a's quota had room, the team pods after it: the
    apiserver admits team-over and denies the second team pod. The learner's capture (2>&1)
    holds what kubectl said of team-over."""
    from tests.helpers import kubectl

    _kubectl(lab, "delete", "pod", "-n", "team-a", "team-a-2", "--force", "--grace-period=0")
    out = kubectl(lab, "apply", "-f", str(wd / "k8s/team-over.yaml"), check=False)
    (wd / "out/quota-denied.txt").write_text(out.stdout + out.stderr)
    _kubectl(lab, "wait", "-n", "team-a", "--for=condition=PodScheduled", "pod/team-over")
    kubectl(lab, "apply", "-f", str(wd / "k8s/team-pods.yaml"), check=False)


def _product_as_annotation(lab: Any, wd: Path) -> None:
    _kubectl(lab, "label", "node", "lab-node-2", "nvidia.com/gpu.product-")
    _kubectl(lab, "annotate", "node", "lab-node-2", "nvidia.com/gpu.product=NVIDIA-H100-80GB")


def _mps_by_patch(lab: Any, wd: Path) -> None:
    """The file without mps, applied; then mps added to the live ConfigMap by kubectl patch."""
    text = (wd / CM).read_text()
    head, sep, mps = text.partition("  mps: |-\n")
    assert sep, "no mps key in the ConfigMap's file"
    (wd / CM).write_text(head)
    _kubectl(lab, "apply", "-f", str(wd / CM))
    value = "".join(ln[4:] + "\n" for ln in mps.splitlines())
    patch = json.dumps({"data": {"mps": value.rstrip("\n")}})
    _kubectl(lab, "patch", "configmap", "-n", "gpu-share", "device-plugin-configs", "-p", patch)


def _shared_as_json_string(lab: Any, wd: Path) -> None:
    """shared written as one double-quoted YAML string with \\n escapes (as JSON writes it)."""
    text = (wd / CM).read_text()
    value = "".join(ln[4:] + "\n" for ln in SHARED_BLOCK.splitlines()[1:]).rstrip("\n")
    _edit(wd / CM, SHARED_BLOCK, f"  shared: {json.dumps(value)}\n")
    assert (wd / CM).read_text() != text
    _kubectl(lab, "apply", "-f", str(wd / CM))


def extra_cases() -> list[Case]:
    """Cases for the failure paths the mutants do not take, one mistake each."""
    c = Case
    return [
        # a failure whose own hint replaces the check's (what was found, not what is asked)
        c(
            "6.x OVER lines name the pod, not the container",
            frozenset({"6.2", "6.5"}),
            files=_script(_loop("OVER={c['name']}", "OVER={doc['metadata']['name']}")),
        ),
        c(
            "6.x the script always exits 0",
            frozenset({"6.2", "6.5"}),
            files=_script(_loop("sys.exit(1 if over else 0)", "sys.exit(0)")),
        ),
        c(
            "6.x the answer printed on standard error",
            frozenset(S6),
            files=_script(
                _loop(
                    'print("\\n".join(over) if over else "OK")',
                    'print("\\n".join(over) if over else "OK", file=sys.stderr)',
                )
            ),
        ),
        c(
            "valid: the answer in CRLF lines, then a blank line",
            frozenset(),
            files=_script(
                _loop(
                    'print("\\n".join(over) if over else "OK")',
                    'sys.stdout.write("\\r\\n".join(over or ["OK"]) + "\\r\\n\\r\\n")',
                )
            ),
        ),
        c(
            "valid: the script counts initContainers too (no case has any)",
            frozenset(),
            files=_script(
                _loop(
                    'for c in doc["spec"]["containers"]:',
                    'for c in doc["spec"]["containers"] + doc["spec"].get("initContainers", []):',
                )
            ),
        ),
        c(
            "5.1 quota key without requests. (nvidia.com/gpu)",
            frozenset({"5.1"}),
            files=_file("k8s/gpu-quota.yaml", "requests.nvidia.com/gpu: 2", 'nvidia.com/gpu: "2"'),
        ),
        c(
            "3.1 nvidia.com/gpu.product set as an annotation",
            frozenset({"3.1"}),
            cluster=_product_as_annotation,
        ),
        c(
            "8.1 placement.yaml has a YAML syntax error",
            frozenset({"8.1"}),
            files=_file(
                PLACEMENT, "  containers:\n    - name: lab\n", "  containers\n    - name: lab\n"
            ),
        ),
        c(
            "4.4 plain-gpu Pending: the GPU nodes tainted",
            frozenset({"4.4"}),
            cluster=_steps(
                _k("taint", "node", "lab-node-0", "lab-node-1", "gpu=busy:NoSchedule"),
                lambda lab, wd: _kubectl(
                    lab,
                    "delete",
                    "pod",
                    "-n",
                    "gpu-share",
                    "plain-gpu",
                    "--force",
                    "--grace-period=0",
                ),
                lambda lab, wd: _kubectl(lab, "apply", "-f", str(wd / "k8s/mig-job.yaml")),
            ),
        ),
        c(
            "5.4 and 5.5: team-over.yaml applied before the team pods filled the quota",
            frozenset({"5.4", "5.5"}),
            cluster=_applied_before_the_quota_was_full,
        ),
        # the choices the lab text leaves open, as graders/RULES.md states them
        c(
            "4.2 plain-gpu with a preferred node affinity",
            frozenset({"4.2"}),
            files=_file(
                "k8s/mig-job.yaml",
                "  name: plain-gpu\n  namespace: gpu-share\nspec:\n",
                "  name: plain-gpu\n  namespace: gpu-share\nspec:\n" + PREFERRED,
            ),
        ),
        c(
            "1.2 the file's mps differs from the cluster's (replicas 2 in the file only)",
            frozenset({"1.2"}),
            files=_file(
                CM,
                "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 4",
                "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 2",
            ),
        ),
        c(
            "valid: mps added by kubectl patch, the file without it",
            frozenset(),
            cluster=_mps_by_patch,
        ),
        c(
            "valid: shared written as a double-quoted string",
            frozenset(),
            cluster=_shared_as_json_string,
        ),
        c("fresh lab, empty work dir", frozenset({ALL}), fresh=True),
        c(
            "fresh lab with lab-node-0 and lab-node-2 deleted",
            frozenset({ALL}),
            fresh=True,
            cluster=_k("delete", "node", "lab-node-0", "lab-node-2"),
        ),
        c(
            "1.2 the ConfigMap file has binaryData instead of data",
            frozenset({"1.2"}),
            files=_file(CM, "data:\n  default: |-", "binaryData:\n  default: |-"),
        ),
        c(
            "1.x the ConfigMap deleted from the cluster",
            frozenset({"1.2", "1.3", "1.4", "1.5", "1.6", "7.1"}),
            cluster=_k("delete", "configmap", "-n", "gpu-share", "device-plugin-configs"),
        ),
        # step 1
        c(
            "1.2 shared written as a YAML mapping, not a |- string",
            frozenset({"1.2"}),
            files=_file(CM, "  shared: |-\n", "  shared:\n"),
        ),
        c(
            "1.2 a config in the file is not valid YAML",
            frozenset({"1.2"}),
            files=_file(
                CM, "      migStrategy: none\n  shared", "      migStrategy: [none\n  shared"
            ),
        ),
        c(
            "1.4 and 1.5: misspelt field sharing.timeSlcing, which the plugin drops",
            frozenset({"1.4", "1.5"}),
            cluster=_reapply_cm("      timeSlicing:", "      timeSlcing:"),
        ),
        c(
            "valid: an unknown top-level field (flag), which the plugin drops",
            frozenset(),
            cluster=_reapply_cm(
                "  default: |-\n    version: v1\n    flags:",
                "  default: |-\n    version: v1\n    flag:",
            ),
        ),
        c(
            "1.3 version v2",
            frozenset({"1.3"}),
            cluster=_reapply_cm("  default: |-\n    version: v1", "  default: |-\n    version: v2"),
        ),
        c(
            "1.3 flags written as a list",
            frozenset({"1.3"}),
            cluster=_reapply_cm(
                "  default: |-\n    version: v1\n    flags:\n      migStrategy: none",
                "  default: |-\n    version: v1\n    flags: [migStrategy]",
            ),
        ),
        c(
            "1.3 sharing written as a string in default",
            frozenset({"1.3", "1.6"}),
            cluster=_reapply_cm(
                "      migStrategy: none\n  shared",
                "      migStrategy: none\n    sharing: none\n  shared",
            ),
        ),
        c(
            "1.3 replicas 1",
            frozenset({"1.3", "1.5"}),  # 2.4: the plugin refuses 1, the lab's 8 is right
            cluster=_reapply_cm("            replicas: 4\n  mps", "            replicas: 1\n  mps"),
        ),
        c(
            "2.4 replicas 1 and lab-node-1 advertising 2 × 1",
            frozenset({"1.3", "1.5", "2.4"}),
            cluster=_steps(
                _reapply_cm("            replicas: 4\n  mps", "            replicas: 1\n  mps"),
                _status(
                    "lab-node-1",
                    '{"status":{"capacity":{"nvidia.com/gpu":"2"},'
                    '"allocatable":{"nvidia.com/gpu":"2"}}}',
                ),
            ),
        ),
        c(
            "1.4 failRequestsGreaterThanOne under sharing, where the plugin drops it",
            frozenset({"1.4"}),
            cluster=_reapply_cm(
                "    sharing:\n      timeSlicing:\n        failRequestsGreaterThanOne: true\n",
                "    sharing:\n      failRequestsGreaterThanOne: true\n      timeSlicing:\n",
            ),
        ),
        c(
            "1.3 replicas quoted as '4'",
            frozenset({"1.3", "1.5"}),
            cluster=_reapply_cm(
                "            replicas: 4\n  mps", "            replicas: '4'\n  mps"
            ),
        ),
        c(
            "1.3 resource entry without a name",
            frozenset({"1.3", "1.5"}),
            cluster=_reapply_cm(SHARED_RESOURCE, "          - replicas: 4\n  mps"),
        ),
        c(
            "1.3 resource entry written as a plain string",
            frozenset({"1.3", "1.5"}),
            cluster=_reapply_cm(SHARED_RESOURCE, "          - nvidia.com/gpu\n  mps"),
        ),
        c(
            "1.3 resource field misspelt (replica)",
            frozenset({"1.3", "1.5"}),
            cluster=_reapply_cm(
                SHARED_RESOURCE, "          - name: nvidia.com/gpu\n            replica: 4\n  mps"
            ),
        ),
        c(
            "1.3 time-slicing resources empty",
            frozenset({"1.3", "1.5"}),
            cluster=_reapply_cm(
                "        resources:\n" + SHARED_RESOURCE, "        resources: []\n  mps"
            ),
        ),
        c(
            "1.3 and 1.4: failRequestsGreaterThanOne quoted as 'true', which the plugin refuses",
            frozenset({"1.3", "1.4"}),
            cluster=_reapply_cm(
                "failRequestsGreaterThanOne: true", "failRequestsGreaterThanOne: 'true'"
            ),
        ),
        c(
            "1.4 failRequestsGreaterThanOne left out",
            frozenset({"1.4"}),
            cluster=_reapply_cm("        failRequestsGreaterThanOne: true\n", ""),
        ),
        # the configs as the device plugin reads them (gpulab.deviceplugin)
        c(
            "valid: default left empty (no sharing)",
            frozenset(),
            cluster=_reapply_cm(
                "  default: |-\n    version: v1\n    flags:\n      migStrategy: none\n",
                '  default: ""\n',
            ),
        ),
        c(
            "valid: shared with name gpu, replicas 4.0 and migStrategy left empty",
            frozenset(),
            cluster=_reapply_cm(
                SHARED_BLOCK,
                "  shared: |-\n    version: v1\n    flags:\n      migStrategy:\n"
                "    sharing:\n      timeSlicing:\n        failRequestsGreaterThanOne: true\n"
                "        resources:\n          - name: gpu\n            replicas: 4.0\n",
            ),
        ),
        c(
            "valid: shared as two YAML documents (the plugin reads the first)",
            frozenset(),
            cluster=_reapply_cm(
                SHARED_RESOURCE,
                SHARED_RESOURCE.removesuffix("  mps") + "    ---\n    version: v2\n  mps",
            ),
        ),
        c(
            "valid: shared lists nvidia.com/gpu twice (2, then 4): the plugin uses 4",
            frozenset(),
            cluster=_reapply_cm(
                SHARED_RESOURCE,
                "          - name: nvidia.com/gpu\n            replicas: 2\n" + SHARED_RESOURCE,
            ),
        ),
        c(
            "valid: mps with name gpu and replicas 4.0",
            frozenset(),
            cluster=_reapply_cm(
                "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 4",
                "      mps:\n        resources:\n          - name: gpu\n            replicas: 4.0",
            ),
        ),
        c(
            "1.3 default migStrategy quoted empty (''), which the plugin refuses",
            frozenset({"1.3"}),
            cluster=_reapply_cm(
                "      migStrategy: none\n  shared", "      migStrategy: ''\n  shared"
            ),
        ),
        c(
            "1.3 shared devices malformed (devices: some)",
            frozenset({"1.3"}),
            cluster=_reapply_cm(
                SHARED_RESOURCE,
                SHARED_RESOURCE.removesuffix("  mps") + "            devices: some\n  mps",
            ),
        ),
        c(
            "1.3 shared devices: 3, more GPUs than a lab node has",
            frozenset({"1.3"}),
            cluster=_reapply_cm(
                SHARED_RESOURCE,
                SHARED_RESOURCE.removesuffix("  mps") + "            devices: 3\n  mps",
            ),
        ),
        c(
            "1.5 shared devices: [0], only one GPU of a node shared",
            frozenset({"1.5"}),
            cluster=_reapply_cm(
                SHARED_RESOURCE,
                SHARED_RESOURCE.removesuffix("  mps") + "            devices: [0]\n  mps",
            ),
        ),
        c(
            "1.4 FailRequestsGreaterThanOne capitalised, which the plugin does not read",
            frozenset({"1.4"}),
            cluster=_reapply_cm(
                "failRequestsGreaterThanOne: true", "FailRequestsGreaterThanOne: true"
            ),
        ),
        c(
            "1.4 and 1.5: shared has mps as well, and the plugin uses MPS",
            frozenset({"1.4", "1.5"}),
            cluster=_reapply_cm(
                SHARED_RESOURCE,
                SHARED_RESOURCE.removesuffix("  mps")
                + "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 4\n  mps",
            ),
        ),
        c(
            "1.5 renameByDefault: yes (a YAML 1.1 boolean) advertises nvidia.com/gpu.shared",
            frozenset({"1.5"}),
            cluster=_reapply_cm(
                "        failRequestsGreaterThanOne: true\n",
                "        failRequestsGreaterThanOne: true\n        renameByDefault: yes\n",
            ),
        ),
        c(
            "1.5 a per-resource rename to nvidia.com/gpu.shared",
            frozenset({"1.5"}),
            cluster=_reapply_cm(
                SHARED_RESOURCE,
                SHARED_RESOURCE.removesuffix("  mps")
                + "            rename: nvidia.com/gpu.shared\n  mps",
            ),
        ),
        c(
            "2.4 lab-node-1 advertises nvidia.com/gpu.shared: 8, as its renaming config would",
            frozenset({"1.5", "2.4"}),
            cluster=_steps(
                _reapply_cm(
                    "        failRequestsGreaterThanOne: true\n",
                    "        failRequestsGreaterThanOne: true\n        renameByDefault: true\n",
                ),
                _status(
                    "lab-node-1",
                    '{"status":{"capacity":{"nvidia.com/gpu":null,"nvidia.com/gpu.shared":"8"},'
                    '"allocatable":{"nvidia.com/gpu":null,"nvidia.com/gpu.shared":"8"}}}',
                ),
            ),
        ),
        c(
            "8.1 notebook asks for nvidia.com/gpu.shared, the name the renaming config advertises",
            frozenset({"1.5", "8.1"}),
            cluster=_reapply_cm(
                "        failRequestsGreaterThanOne: true\n",
                "        failRequestsGreaterThanOne: true\n        renameByDefault: true\n",
            ),
            files=_file(
                PLACEMENT,
                "    - name: lab\n      image: registry.k8s.io/pause:3.10\n      resources:\n"
                "        limits:\n          nvidia.com/gpu: 1",
                "    - name: lab\n      image: registry.k8s.io/pause:3.10\n      resources:\n"
                "        limits:\n          nvidia.com/gpu.shared: 1",
            ),
        ),
        c(
            "7.1 mps renameByDefault: true advertises nvidia.com/gpu.shared",
            frozenset({"7.1"}),
            cluster=_reapply_cm(
                "      mps:\n        resources:",
                "      mps:\n        renameByDefault: true\n        resources:",
            ),
        ),
        c(
            "7.1 mps version v2",
            frozenset({"7.1"}),
            cluster=_reapply_cm("  mps: |-\n    version: v1", "  mps: |-\n    version: v2"),
        ),
        c(
            "7.1 mps devices malformed (devices: [first])",
            frozenset({"7.1"}),
            cluster=_reapply_cm(
                "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 4\n",
                "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 4\n            devices: [first]\n",
            ),
        ),
        c(
            "1.x the shared key is missing",
            frozenset({"1.2", "1.3", "1.4", "1.5", "7.1"}),
            cluster=_steps(
                _k("delete", "configmap", "-n", "gpu-share", "device-plugin-configs"),
                _reapply_cm(
                    SHARED_BLOCK,
                    "",
                ),
            ),
        ),
        c(
            "1.x the shared config is not valid YAML",
            frozenset({"1.2", "1.3", "1.4", "1.5", "7.1"}),
            cluster=_reapply_cm("      timeSlicing:\n", "      timeSlicing: [\n"),
        ),
        c(
            "1.x the shared config is a YAML list",
            frozenset({"1.3", "1.4", "1.5", "7.1"}),
            cluster=_reapply_cm(
                SHARED_BLOCK,
                "  shared: |-\n    - version: v1\n",
            ),
        ),
        # step 3, 4
        c(
            "3.2 and 3.3: no MIG profile advertised at all",
            frozenset({"3.2", "3.3"}),
            cluster=_status(
                "lab-node-2",
                '{"status":{"capacity":{"nvidia.com/mig-1g.10gb":null},'
                '"allocatable":{"nvidia.com/mig-1g.10gb":null}}}',
            ),
        ),
        c(
            "4.4 plain-gpu lands on the MIG node, which advertises nvidia.com/gpu",
            frozenset({"3.3", "4.4"}),
            cluster=_steps(
                _status(
                    "lab-node-2",
                    '{"status":{"capacity":{"nvidia.com/gpu":"1"},'
                    '"allocatable":{"nvidia.com/gpu":"1"}}}',
                ),
                _k("cordon", "lab-node-0", "lab-node-1"),
                _k("delete", "pod", "-n", "gpu-share", "plain-gpu", "--force", "--grace-period=0"),
                lambda lab, wd: _kubectl(lab, "apply", "-f", str(wd / "k8s/mig-job.yaml")),
                _k(
                    "wait",
                    "-n",
                    "gpu-share",
                    "--for=condition=PodScheduled",
                    "pod/plain-gpu",
                    "--timeout=60s",
                ),
            ),
        ),
        c(
            "4.x mig-job.yaml holds only mig-job",
            frozenset({"4.1", "4.2"}),
            files=lambda wd: (wd / "k8s/mig-job.yaml").write_text(
                (wd / "k8s/mig-job.yaml").read_text().split("---\n")[0]
            ),
        ),
        c(
            "4.x mig-job.yaml starts with a document that is a YAML list",
            frozenset({"4.1", "4.2"}),
            files=lambda wd: (wd / "k8s/mig-job.yaml").write_text(
                "- mig-job\n- plain-gpu\n---\n" + (wd / "k8s/mig-job.yaml").read_text()
            ),
        ),
        c(
            "4.x mig-job.yaml sets no namespace: its pods went to default",
            frozenset({"4.1", "4.2", "4.3", "4.4"}),
            cluster=_steps(
                _k(
                    "delete",
                    "pod",
                    "-n",
                    "gpu-share",
                    "mig-job",
                    "plain-gpu",
                    "--force",
                    "--grace-period=0",
                ),
                _apply_without_namespace("k8s/mig-job.yaml"),
                _k(
                    "wait",
                    "-n",
                    "default",
                    "--for=condition=PodScheduled",
                    "pod/mig-job",
                    "pod/plain-gpu",
                    "--timeout=60s",
                ),
            ),
            files=lambda wd: _edit(
                wd / "k8s/mig-job.yaml", "  namespace: gpu-share\n", "", count=2
            ),
        ),
        c(
            "4.1 the file's container is named otherwise than the cluster's",
            frozenset({"4.1"}),
            files=_file("k8s/mig-job.yaml", "    - name: job\n", "    - name: mig\n"),
        ),
        c(
            "4.x mig-job deleted from the cluster",
            frozenset({"4.1", "4.2", "4.3"}),
            cluster=_k(
                "delete", "pod", "-n", "gpu-share", "mig-job", "--force", "--grace-period=0"
            ),
        ),
        c(
            "4.2 plain-gpu recreated with a nodeSelector the file does not have",
            frozenset({"4.2"}),
            cluster=_recreate_from(
                "gpu-share",
                "plain-gpu",
                "k8s/mig-job.yaml",
                1,
                "spec:\n",
                "spec:\n  nodeSelector:\n    nvidia.com/device-plugin.config: shared\n",
            ),
        ),
        c(
            "4.x mig-job recreated asking for 2 MIG devices",
            frozenset({"4.1", "4.3"}),
            cluster=_recreate_from(
                "gpu-share",
                "mig-job",
                "k8s/mig-job.yaml",
                0,
                "nvidia.com/mig-1g.10gb: 1",
                "nvidia.com/mig-1g.10gb: 2",
            ),
        ),
        c(
            "4.3 mig-job on lab-node-0, which advertises the profile too",
            frozenset({"4.3"}),
            cluster=_steps(
                _status(
                    "lab-node-0",
                    '{"status":{"capacity":{"nvidia.com/mig-1g.10gb":"7"},'
                    '"allocatable":{"nvidia.com/mig-1g.10gb":"7"}}}',
                ),
                _k("cordon", "lab-node-2"),
                _recreate_from(
                    "gpu-share", "mig-job", "k8s/mig-job.yaml", 0, "kind: Pod", "kind: Pod"
                ),
            ),
        ),
        # step 5
        c(
            "5.3 and 5.4: a team pod deleted, so the quota would admit team-over",
            frozenset({"5.3", "5.4"}),
            cluster=_k("delete", "pod", "-n", "team-a", "team-a-2", "--force", "--grace-period=0"),
        ),
        c(
            "5.x quota raised to 3 and team-over created",
            frozenset({"5.1", "5.2", "5.3", "5.4"}),
            cluster=_steps(
                _k(
                    "patch",
                    "resourcequota",
                    "gpu-quota",
                    "-n",
                    "team-a",
                    "--type=merge",
                    "-p",
                    '{"spec":{"hard":{"requests.nvidia.com/gpu":"3"}}}',
                ),
                _k(
                    "wait",
                    "-n",
                    "team-a",
                    "resourcequota/gpu-quota",
                    "--timeout=60s",
                    "--for=jsonpath={.status.hard.requests\\.nvidia\\.com/gpu}=3",
                ),
                lambda lab, wd: _kubectl(lab, "apply", "-f", str(wd / "k8s/team-over.yaml")),
            ),
        ),
        c(
            "5.4 team-over.yaml holds two pods",
            frozenset({"5.4", "5.5"}),
            files=lambda wd: (wd / "k8s/team-over.yaml").write_text(
                (wd / "k8s/team-over.yaml").read_text()
                + "---\n"
                + (wd / "k8s/team-over.yaml").read_text().replace("team-over", "team-over-2")
            ),
        ),
        c(
            "5.4 the pod in team-over.yaml has no name",
            frozenset({"5.4", "5.5"}),
            files=_file("k8s/team-over.yaml", "  name: team-over\n", ""),
        ),
        c(
            "5.4 team-over.yaml is in another namespace",
            frozenset({"5.4", "5.5"}),
            files=_file("k8s/team-over.yaml", "namespace: team-a", "namespace: gpu-share"),
        ),
        c(
            "valid: team-over.yaml sets no namespace, applied with -n team-a",
            frozenset(),
            cluster=lambda lab, wd: _mutants().team_over_without_namespace("-n", "team-a")(lab, wd),
        ),
        c(
            "5.5 quota-denied.txt is UTF-16 (PowerShell's redirection)",
            frozenset({"5.5"}),
            files=lambda wd: (wd / "out/quota-denied.txt").write_bytes(
                (wd / "out/quota-denied.txt").read_text().encode("utf-16")
            ),
        ),
        # step 6
        c(
            "6.x the script crashes with a traceback",
            frozenset(S6),
            files=_script(
                "#!/usr/bin/env python3\nimport sys, yaml\n"
                "doc = yaml.safe_load(open(sys.argv[1]))\n"
                "print(doc['spec']['containers'][0]['resources']['limits']['nvidia.com/gpus'])\n"
            ),
        ),
        c("6.x the script prints nothing", frozenset(S6), files=_script("#!/bin/sh\nexit 0\n")),
        c("6.x the script kills itself", frozenset(S6), files=_script("#!/bin/sh\nkill -9 $$\n")),
        c("6.x the script has no #! line", frozenset(S6), files=_script("echo OK\n")),
        c(
            "6.x the script never ends",
            frozenset(S6),
            files=_script("#!/bin/sh\nexec sleep 1000\n"),
        ),
        c(
            "6.1 the script is missing",
            frozenset({"6.1", *S6}),
            files=_remove("bin/check-request.sh"),
        ),
        # step 7
        c(
            "7.1 the mps key is missing",
            frozenset({"7.1"}),
            cluster=_steps(
                _k("delete", "configmap", "-n", "gpu-share", "device-plugin-configs"),
                _reapply_cm(
                    "  mps: |-\n    version: v1\n    sharing:\n      mps:\n        resources:\n"
                    "          - name: nvidia.com/gpu\n            replicas: 4\n",
                    "",
                ),
            ),
        ),
        c(
            "7.1 mps replicas 2",
            frozenset({"7.1"}),
            cluster=_reapply_cm(
                "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 4",
                "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 2",
            ),
        ),
        c(
            "7.1 mps has no resources",
            frozenset({"7.1"}),
            cluster=_reapply_cm(
                "      mps:\n        resources:\n          - name: nvidia.com/gpu\n"
                "            replicas: 4",
                "      mps: {}",
            ),
        ),
        c(
            "7.2 only: Yes instead of yes (right answer, wrong form)",
            frozenset({"7.2"}),
            files=_file(ISOLATION, "MIG_MEMORY_ISOLATION=yes", "MIG_MEMORY_ISOLATION=Yes"),
        ),
        c(
            "7.2 and 7.3: No instead of yes (wrong answer, wrong form)",
            frozenset({"7.2", "7.3"}),
            files=_file(ISOLATION, "MIG_MEMORY_ISOLATION=yes", "MIG_MEMORY_ISOLATION=No"),
        ),
        c(
            "7.2 and 7.3: a value that is not an answer",
            frozenset({"7.2", "7.3"}),
            files=_file(ISOLATION, "MPS_MEMORY_ISOLATION=partial", "MPS_MEMORY_ISOLATION=maybe"),
        ),
        c(
            "7.2 and 7.3: a value left empty",
            frozenset({"7.2", "7.3"}),
            files=_file(ISOLATION, "MPS_MEMORY_ISOLATION=partial", "MPS_MEMORY_ISOLATION="),
        ),
        c(
            "7.2 and 7.3: a key left out",
            frozenset({"7.2", "7.3"}),
            files=_file(ISOLATION, "MIG_FAULT_ISOLATION=yes\n", ""),
        ),
        c(
            "7.2 and 7.3: isolation.txt holds binary data",
            frozenset({"7.2", "7.3"}),
            files=lambda wd: (wd / ISOLATION).write_bytes(b"\x00\x01\x02binary"),
        ),
        c(
            "7.2 and 7.3: isolation.txt is empty",
            frozenset({"7.2", "7.3"}),
            files=_write(ISOLATION, "\n"),
        ),
        c(
            "7.2 and 7.3: a line that is not KEY=value",
            frozenset({"7.2", "7.3"}),
            files=_file(ISOLATION, "MIG_FAULT_ISOLATION=yes", "MIG_FAULT_ISOLATION: yes"),
        ),
        # step 8
        c(
            "8.1 a selector on a label no node has",
            frozenset({"8.1"}),
            files=_file(
                PLACEMENT,
                "nvidia.com/device-plugin.config: default",
                "nvidia.com/device-plugin.config: unshared",
            ),
        ),
        c(
            "8.1 node affinity selecting two nodes",
            frozenset({"8.1"}),
            files=_file(
                PLACEMENT,
                "  nodeSelector:\n    nvidia.com/device-plugin.config: default\n",
                AFFINITY_TWO,
            ),
        ),
        c(
            "8.1 batch-train without any node condition",
            frozenset({"8.1"}),
            files=_file(
                PLACEMENT, "  nodeSelector:\n    nvidia.com/device-plugin.config: default\n", ""
            ),
        ),
        c(
            "8.1 prod-inference asks for nvidia.com/gpu",
            frozenset({"8.1"}),
            files=_file(PLACEMENT, "nvidia.com/mig-1g.10gb: 1", "nvidia.com/gpu: 1"),
        ),
        c(
            "8.1 prod-inference asks for nothing",
            frozenset({"8.1"}),
            files=_file(
                PLACEMENT,
                "      resources:\n        limits:\n          nvidia.com/mig-1g.10gb: 1\n",
                "",
            ),
        ),
        c(
            "8.1 notebook asks for two GPUs",
            frozenset({"8.1"}),
            files=_file(
                PLACEMENT,
                "    nvidia.com/device-plugin.config: shared\n  containers:\n"
                "    - name: lab\n      image: registry.k8s.io/pause:3.10\n"
                "      resources:\n        limits:\n          nvidia.com/gpu: 1",
                "    nvidia.com/device-plugin.config: shared\n  containers:\n"
                "    - name: lab\n      image: registry.k8s.io/pause:3.10\n"
                "      resources:\n        limits:\n          nvidia.com/gpu: 2",
            ),
        ),
        c(
            "8.2 and 8.3: prod-inference deleted after placement.txt was written",
            frozenset({"8.2", "8.3"}),
            cluster=_k(
                "delete", "pod", "-n", "gpu-share", "prod-inference", "--force", "--grace-period=0"
            ),
        ),
        c(
            "8.2 notebook recreated asking for 2 GPUs (the file asks for 1)",
            frozenset({"8.2"}),
            cluster=_recreate_from(
                "gpu-share", "notebook", PLACEMENT, 1, "nvidia.com/gpu: 1", "nvidia.com/gpu: 2"
            ),
        ),
        c(
            "8.2 batch-train recreated asking for 2 GPUs (the file asks for 1)",
            frozenset({"8.2"}),
            cluster=_steps(
                # plain-gpu off lab-node-0 first, so that node's two GPUs are batch-train's
                _k("cordon", "lab-node-0"),
                _recreate_from(
                    "gpu-share", "plain-gpu", "k8s/mig-job.yaml", 1, "kind: Pod", "kind: Pod"
                ),
                _k("uncordon", "lab-node-0"),
                _recreate_from(
                    "gpu-share",
                    "batch-train",
                    PLACEMENT,
                    2,
                    "nvidia.com/gpu: 1",
                    "nvidia.com/gpu: 2",
                ),
            ),
        ),
        c(
            "8.3 placement.txt written in Latin-1, not UTF-8",
            frozenset({"8.3"}),
            files=lambda wd: (wd / "out/placement.txt").write_bytes(
                "# placé par le planificateur\n".encode("latin-1")
                + (wd / "out/placement.txt").read_bytes()
            ),
        ),
        c(
            "8.3 a line for a pod the lab does not have",
            frozenset({"8.3"}),
            files=lambda wd: (wd / "out/placement.txt").write_text(
                (wd / "out/placement.txt").read_text() + "extra-pod=lab-node-0\n"
            ),
        ),
    ]


def all_cases() -> list[Case]:
    """The mutants of tests/mutants.py, then the extra cases."""
    from tests.mutants import CLUSTER_MUTANTS, FILE_MUTANTS

    mutants = [
        Case(m.id, m.fails, files=m.files, cluster=m.cluster)
        for m in [*FILE_MUTANTS, *CLUSTER_MUTANTS]
    ]
    return [*mutants, *extra_cases()]


# --- recording ------------------------------------------------------------------------------


def _files(root: Path) -> dict[str, dict[str, Any]]:
    """Every regular file of the work dir: its text, or its bytes when it is not UTF-8."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            raw = p.read_bytes()
            entry: dict[str, Any] = {"mode": stat.S_IMODE(p.stat().st_mode)}
            try:
                entry["text"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                entry["base64"] = base64.b64encode(raw).decode("ascii")
            out[str(p.relative_to(root))] = entry
    return out


def _strip(value: Any) -> Any:
    """Drop what no check reads and what makes the recording large: managedFields."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "managedFields"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _step5() -> Any:
    """The step 5 grader module: it declares the dry-runs a grade asks the apiserver for."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import graders.test_step5_quota as step5

    return step5


def _export(lab: Any, workdir: Path, only_dry_runs: bool = False) -> dict[str, Any]:
    """The cluster's answers as a grade reads them, with the dry-runs the graders declare."""
    from gpushare.grading.labstate import LabState

    state = LabState(
        lab.client(timeout=10), _step5().dry_runs(Workdir(workdir)), QUERIES, HINT_QUERIES
    )
    try:
        answers = _strip(state.start().export())
    finally:
        state.close()
    if only_dry_runs:
        return {k: v for k, v in answers.items() if k.startswith("dry-run:")}
    return answers  # type: ignore[no-any-return]


def record(cluster_name: str, out: Path = RECORDING, only_new: bool = False) -> Path:
    """Play every case on the live lab ``cluster_name`` (reset first) and write the recording.

    File cases come first, on the solved lab; then each cluster case on a lab reset and solved
    again, so every case has exactly one mistake. ``only_new``: play only the cases the
    recording at ``out`` lacks, and keep the others as they were recorded.
    """
    from gpushare.lab import cluster, solve

    lab = cluster.up(cluster_name)
    kept = load(out) if only_new and out.exists() else {"clusters": {}, "cases": {}}
    clusters: dict[str, Any] = dict(kept["clusters"])
    cases: dict[str, Any] = dict(kept["cases"])
    todo = [c for c in all_cases() if c.id not in cases]
    ordered = sorted(todo, key=lambda c: c.fresh or c.cluster is not None)
    with tempfile.TemporaryDirectory(prefix="gpushare-feedback-") as tmp:
        solved = Path(tmp) / "solved"

        def fresh_solve() -> None:
            cluster.reset(lab.name)
            if solved.exists():
                shutil.rmtree(solved)
            solve.solve(solved, kubeconfig=str(lab.kubeconfig))

        fresh_solve()
        solved_answers = _export(lab, solved)
        dirty = False
        for case in ordered:
            wd = Path(tmp) / "case"
            if wd.exists():
                shutil.rmtree(wd)
            if case.fresh:
                cluster.reset(lab.name)
                wd.mkdir()
                if case.cluster is not None:
                    case.cluster(lab, wd)
                dirty = True
            else:
                if case.cluster is not None and dirty:
                    fresh_solve()
                shutil.copytree(solved, wd, symlinks=True)
                if case.cluster is not None:
                    case.cluster(lab, wd)
                    dirty = True
            if case.files is not None:
                case.files(wd)
            if case.fresh or case.cluster is not None:
                answers = _export(lab, wd)
            else:  # the solved cluster, plus the dry-runs this work dir's files ask for
                answers = {**solved_answers, **_export(lab, wd, only_dry_runs=True)}
            key = hashlib.sha256(json.dumps(answers, sort_keys=True).encode()).hexdigest()[:16]
            clusters.setdefault(key, answers)
            cases[case.id] = {"cluster": key, "files": _files(wd)}
            print(f"recorded: {case.id}", file=sys.stderr)
        cluster.reset(lab.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": 1, "seed": SEED, "clusters": clusters, "cases": cases}
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        json.dump(data, fh, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return out


# --- replay ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What every check did on one case: failures by number, and the call site of each."""

    case: str
    expected: frozenset[str]
    failures: dict[str, CheckFailed]
    errors: dict[str, str]  # a check that raised something else: a grader bug
    sites: dict[str, tuple[str, int]]


def load(path: Path = RECORDING) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def _materialize(files: dict[str, dict[str, Any]], root: Path) -> None:
    for rel, f in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if "base64" in f:
            p.write_bytes(base64.b64decode(f["base64"]))
        else:
            p.write_bytes(f["text"].encode("utf-8"))
        p.chmod(f["mode"])


def _fail_site(exc: BaseException) -> tuple[str, int]:
    """(file, line) of the ``fail(...)`` call that raised ``exc``."""
    frames = traceback.extract_tb(exc.__traceback__)
    for i, frame in enumerate(frames):
        if frame.name == "fail" and frame.filename.endswith("checks.py") and i > 0:
            caller = frames[i - 1]
            return (Path(caller.filename).name, caller.lineno or 0)
    last = frames[-1]
    return (Path(last.filename).name, last.lineno or 0)


def replay(data: dict[str, Any] | None = None) -> Iterator[Outcome]:
    """Run every check on every recorded case; the learner's script runs for real.

    The runs of every distinct script start before the first case is judged, so a script
    that never ends waits out its time limit beside the others, not after them."""
    from gpushare.grading.labstate import LabState

    data = data or load()
    checks = load_checks(GRADERS)
    expected = {c.id: c.fails for c in all_cases()}
    runs_cache: dict[str, RequestRuns] = {}
    with tempfile.TemporaryDirectory(prefix="gpushare-replay-") as tmp:
        try:
            workdirs: dict[str, tuple[Path, str]] = {}
            first: dict[str, Path] = {}  # each distinct script: the first work dir that has it
            for n, (case_id, case) in enumerate(data["cases"].items()):
                wd = Path(tmp) / f"case-{n}"
                wd.mkdir()
                _materialize(case["files"], wd)
                runs_key = json.dumps(case["files"].get("bin/check-request.sh"), sort_keys=True)
                workdirs[case_id] = (wd, runs_key)
                first.setdefault(runs_key, wd)
            # last first: the recording ends with step 6's odd scripts, one of which never ends
            for runs_key, wd in reversed(first.items()):
                # shown as the lab's work dir, as a learner's grade shows it, never as this
                # replay's temporary folder
                runs_cache[runs_key] = RequestRuns.start(
                    wd, default_fixtures(), data["seed"], shown_workdir=LAB_WORKDIR
                )
            for case_id, case in data["cases"].items():
                wd, runs_key = workdirs[case_id]
                inputs = {
                    "lab": LabState.recorded(
                        data["clusters"][case["cluster"]], QUERIES, HINT_QUERIES
                    ),
                    "work": Workdir(wd),
                    "request_runs": runs_cache[runs_key],
                }
                yield _run_checks(case_id, expected.get(case_id, frozenset()), checks, inputs)
        finally:
            for runs in runs_cache.values():
                runs.close()


def _run_checks(
    case_id: str, expected: frozenset[str], checks: list[Check], inputs: dict[str, Any]
) -> Outcome:
    failures: dict[str, CheckFailed] = {}
    errors: dict[str, str] = {}
    sites: dict[str, tuple[str, int]] = {}
    for check in checks:
        number = check.meta["number"]
        try:
            check.function(**{p: inputs[p] for p in check.parameters()})
        except CheckFailed as exc:
            failures[number] = exc
            sites[number] = _fail_site(exc)
        except Exception as exc:  # a grader bug: reported by the test, shown in the book
            errors[number] = "".join(traceback.format_exception(exc))[-2000:]
    return Outcome(case_id, expected, failures, errors, sites)


# --- the book -------------------------------------------------------------------------------


def said(outcome: Outcome, lang: str) -> dict[str, tuple[str, str]]:
    """Each failed check's feedback in ``lang``, as a grade's outputs say it: from one report of
    the case's failures, so a check failing for the same cause as an earlier one points to it.
    number -> (the feedback, the number of the check it follows from, or "")."""
    from gpushare.reports.results import CheckResult, Report

    checks = [
        CheckResult(
            number=number,
            step=int(number.split(".")[0]),
            title=messages.title(number, lang),
            max_score=1,
            score=0,
            passed=False,
            failure=outcome.failures[number].failure,
            error="",
            nodeid=number,
        )
        for number in sorted(outcome.failures, key=_number_key)
    ]
    report = Report(
        checks=checks, execution_time=0.0, lang=lang, seed=SEED, workdir="", server=None
    )
    roots = {c.number: report.root_of(c) for c in checks}
    return {c.number: (report.said(c), (roots[c.number] or ("",))[0]) for c in checks}


def book(out: Path, data: dict[str, Any] | None = None) -> Path:
    """Every case's failure feedback in zh, ko and en, in one Markdown file for review."""
    lines = [
        "# gpushare: every failure feedback, in zh, ko and en",
        "",
        "Generated by `make feedback-book` from the recorded cases in "
        "`tests/data/feedback-cases.json.gz` (real submissions played on a real lab; see "
        "`tests/feedback_cases.py`). For review by a native-level reader of each language.",
        "",
    ]
    titles = ["## Titles and hints", ""]
    for number in sorted(messages.catalog("en")["checks"], key=_number_key):
        titles.append(f"### {number}")
        for lang in messages.langs():
            titles.append(f"- **{lang}** {messages.title(number, lang)}  ")
            titles.append(f"  {messages.labelled('hint', messages.hint(number, lang), lang)}")
        titles.append("")
    body = ["## Failures, case by case", ""]
    seen: set[tuple[str, str]] = set()
    for outcome in replay(data):
        body.append(f"### Case: {outcome.case}")
        body.append("")
        told = {lang: said(outcome, lang) for lang in messages.langs()}
        for number in sorted(outcome.failures, key=_number_key):
            rendered = {lang: told[lang][number][0] for lang in messages.langs()}
            follows = told["en"][number][1]
            if (number, rendered["en"]) in seen:
                body.append(f"- {number}: the same feedback as above")
                continue
            seen.add((number, rendered["en"]))
            body.append(f"#### {number} ({outcome.sites[number][0]}:{outcome.sites[number][1]})")
            for lang in messages.langs():
                head = f"[{number}] {messages.title(number, lang)}"
                body.append(f"**{lang}**\n\n```text\n{head}\n{rendered[lang]}\n```")
            body.append("The reason the class report counts it under:\n")
            for lang in messages.langs():
                reason = _class_reason(number, outcome.failures[number], follows, lang)
                body.append(f"- **{lang}** {reason}")
            body.append("")
        for number, error in outcome.errors.items():
            body.append(f"- {number}: GRADER ERROR\n\n```text\n{error}\n```")
        body.append("")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines + titles + body + class_pages()) + "\n", encoding="utf-8")
    return out


# --- the instructor's pages and the reasons a grade could not be taken ----------------------

# Reasons a submission could not be graded (or not to the end): the catalog keys a grade or a
# class grade says them with, and a value for each placeholder, as a real run fills it in.
NOT_GRADED = (
    "could_not_read",
    "could_not_read_cluster",
    "time_limit",
    "time_limit_during",
    "grade_hung",
    "grade_killed",
    "grade_exited",
    "grade_crashed",
)


def _samples() -> dict[str, Any]:
    from gpushare import __version__
    from gpushare.submissions import snapshot

    return {
        "error": "unexpected end of data",
        "size": snapshot.MAX_ARCHIVE + 1,
        "limit": snapshot.MAX_ARCHIVE,
        "members": ("work/k8s/gpu-quota.yaml", "cluster.json"),
        "member": "work/../../etc/passwd",
        "found": "2",
        "format": snapshot.FORMAT,
        "version": __version__,
        "key": "sha256",
        "seconds": 60.0,
        "check": "6.5",
        "signal": "SIGKILL",
        "status": 1,
        "what": "nodes (GET /api/v1/nodes)",
        "figures": "42/100",
        "n": 3,
        "failed": 2,
        "judged": 30,
        "graded": 28,
        "errors": 2,
        "previous": "class-2026-11-30",
        "seed": 7,
        "mean": "71.5",
        "median": "74",
        "low": 12,
        "high": 100,
        "why": "…",
        "reason": "…",
    }


def _filled(template: str, samples: dict[str, Any], lang: str) -> dict[str, Any]:
    return {
        name: messages.render_value(samples.get(name, "…"), lang)
        for name in messages.placeholders(template)
    }


def class_pages() -> list[str]:
    """The class report's words and every reason a grade could not be taken, in zh, ko and en,
    as the instructor's page and the learner's results.json say them (sample values filled in
    where a real run puts the snapshot's, the limit's or the error's)."""
    from pathlib import Path as _Path

    from gpushare.classroom import gradebook, report, texts
    from gpushare.reports.messages import T

    samples = _samples()
    out = ["## The class report and every could-not-grade reason", ""]
    out += ["### The class report's words (report.html and the class summary)", ""]
    for key in texts.words():
        out.append(f"- `{key}`")
        for lang in messages.langs():
            template = texts.text(key, lang)
            out.append(
                f"  - **{lang}** {texts.text(key, lang, **_filled(template, samples, lang))}"
            )
    out += ["", "### Could not grade: what the learner reads, what the report says", ""]
    details = [k for k in messages.catalog("en")["values"] if k.startswith("snapshot_")] + list(
        NOT_GRADED
    )
    checks = [gradebook.CheckInfo("1.1", 1, 2)]
    for key in details:
        template = messages.catalog("en")["values"][key]
        out.append(f"#### {key}")
        for lang in messages.langs():
            detail = T(key, **{k: samples.get(k, "…") for k in messages.placeholders(template)})
            made = gradebook.error_results(
                _Path("ann-20261201-1a2b.gpushare.tgz"),
                messages.render_value(detail, "en"),
                "cluster",
                lang=lang,
                seed=7,
                checks=checks,
                detail=detail,
            ).as_json()
            row = gradebook.row_from_results("ann", made)
            out.append(
                f"**{lang}**\n\n```text\n{made['output']}\n[1.1] {made['tests'][0]['output']}"
            )
            out.append(f"report: {report.reason_said(row, lang)}\n```")
        out.append("")
    out += ["#### a check cut short by the time limit (the other checks keep their results)", ""]
    for lang in messages.langs():
        lines = [
            messages.render_value(T("timed_out", seconds=60.0, state=T(f"timed_out_{s}")), lang)
            for s in ("running", "not_started")
        ]
        incomplete = T(
            "report_incomplete",
            reason=T("time_limit_during", seconds=60.0, check="6.5"),
            figures="42/100",
        )
        lines.append(messages.render_value(incomplete, lang))
        out.append(f"**{lang}**\n\n```text\n" + "\n".join(lines) + "\n```")
    out.append("")
    return out


def _class_reason(number: str, failure: CheckFailed, follows: str, lang: str) -> str:
    """What the class report's "most common failure reasons" shows for this failure, in a
    report in ``lang``: grouped by its data, as results.json keeps it."""
    from gpushare.classroom import feedback
    from gpushare.classroom.gradebook import Cell

    step = int(number.split(".")[0])
    cell = Cell(number, step, 1, 0, False, "", "", failure=failure.failure, follows=follows)
    return feedback.reason(cell, lang)


def _number_key(number: str) -> tuple[int, int]:
    step, n = number.split(".")
    return int(step), int(n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.feedback_cases")
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="play every case on a live lab and record it")
    rec.add_argument("--cluster", required=True, help="a lab of your own (it is reset)")
    rec.add_argument("--out", type=Path, default=RECORDING)
    rec.add_argument(
        "--only-new", action="store_true", help="play only the cases the recording lacks"
    )
    bk = sub.add_parser("book", help="render every case's feedback in zh, ko and en")
    bk.add_argument("--out", type=Path, default=ROOT / "build" / "feedback-book.md")
    args = parser.parse_args(argv)
    if args.command == "record":
        print(f"wrote {record(args.cluster, args.out, args.only_new)}")
    else:
        print(f"wrote {book(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
