"""A pod of the Job that ``deploy/job.py`` prints, as a ``podman run`` command line.

There is no cluster that runs containers here (kwok runs none), so ``make images`` runs each
pod of the printed Job with podman, translated field by field from the very manifest
(:func:`deploy.job.manifests`), never from a second copy of the settings:

=====================================================  =============================================
pod field                                              podman
=====================================================  =============================================
``hostUsers: false``                                   ``--userns=auto`` (or one range: below)
``runAsUser/runAsGroup`` (container's, else pod's)     ``--user U:G``
``securityContext.fsGroup``                            ``--group-add G``
``allowPrivilegeEscalation: false``                    ``--security-opt no-new-privileges``
``capabilities.drop: [ALL]`` / ``add``                 ``--cap-drop=all`` / ``--cap-add``
``readOnlyRootFilesystem: true``                       ``--read-only --read-only-tmpfs=false``
``procMount: Unmasked``                                ``--security-opt unmask=ALL``
``seccompProfile`` (container's, else pod's)           ``seccomp=unconfined`` / ``=FILE`` / default
``appArmorProfile`` Unconfined / default               ``apparmor=unconfined`` / -
``resources.limits.memory`` (``cpu``)                  ``--memory`` (``--cpus``)
``env`` (the completion index from the annotation)     ``-e NAME=VALUE``
``command`` with ``$(VAR)``                            ``--entrypoint``, ``$(VAR)`` expanded
``args`` alone (the image's entrypoint kept)           the words after the image
``volumeMounts`` of claims / ``emptyDir``              ``-v HOSTDIR:PATH[:ro]``
an ``emptyDir`` given no host folder                   ``--tmpfs PATH:rw,exec,...`` (its sizeLimit)
=====================================================  =============================================

``drop`` removes one setting (``make images`` shows the hint bwrap's failure then gives).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

SETTINGS = ("hostUsers", "procMount", "seccompProfile", "appArmorProfile")


def printed_objects(script: str) -> list[list[dict[str, Any]]]:
    """The objects of each ``kubectl apply`` in the procedure ``deploy/job.py`` prints, in
    order: its ``<<'YAML'`` here-documents (read from the printed text, for ``make images`` and
    the tests, never from a second copy of it)."""
    blocks = re.findall(r"<<'YAML'\n(.*?)\nYAML\n", script, re.S)
    return [[d for d in yaml.safe_load_all(b) if d] for b in blocks]


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod template's spec of the grading Job (the Indexed one) among ``objects``."""
    jobs = [
        o
        for o in objects
        if o.get("kind") == "Job" and o["spec"].get("completionMode") == "Indexed"
    ]
    if len(jobs) != 1:
        raise ValueError(f"expected one Indexed Job among the objects, found {len(jobs)}")
    return jobs[0]["spec"]["template"]["spec"]


def merge_spec(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pod spec of the printed merge (a Pod, or a Job's template, whose command runs
    ``class merge``), or None when nothing printed is one."""
    for o in objects:
        spec = o.get("spec", {})
        if o.get("kind") == "Job":
            spec = spec.get("template", {}).get("spec", {})
        elif o.get("kind") != "Pod":
            continue
        for container in spec.get("containers", []):
            words = " ".join(container.get("command", []) + container.get("args", []))
            if "class merge" in words:
                return spec
    return None


def _quantity_bytes(value: str) -> str:
    """A Kubernetes memory quantity as podman's: ``2Gi`` -> ``2g``, ``512Mi`` -> ``512m``."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", value)
    if not m:
        raise ValueError(f"memory quantity {value!r} is not one this translation knows")
    number, unit = m.groups()
    return number + {"Ki": "k", "Mi": "m", "Gi": "g", "Ti": "t", None: ""}[unit]


def expand(text: str, env: dict[str, str]) -> str:
    """``$(VAR)`` replaced by ``env[VAR]`` as the kubelet does (``$$`` is a literal ``$``; an
    unknown variable stays as written)."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def _container(spec: dict[str, Any], name: str | None) -> dict[str, Any]:
    every = spec.get("initContainers", []) + spec["containers"]
    if name is None:
        if len(spec["containers"]) != 1:
            raise ValueError("name the container: the pod has several")
        return spec["containers"][0]
    for container in every:
        if container["name"] == name:
            return container
    raise ValueError(f"no container {name!r} in the pod")


def run_args(
    spec: dict[str, Any],
    *,
    index: int,
    image: str,
    volumes: dict[str, str],
    localhost_profiles: str | None = None,
    drop: frozenset[str] = frozenset(),
    name: str | None = None,
    userns_range: tuple[int, int] | None = None,
    container: str | None = None,
) -> list[str]:
    """``podman run`` arguments (after ``run``) for pod ``index`` of the Job whose pod spec is
    ``spec``: ``volumes`` maps each volume name to a host folder; ``localhost_profiles`` is the
    folder of seccomp ``Localhost`` profiles (the kubelet's ``/var/lib/kubelet/seccomp``);
    ``drop`` names settings of :data:`SETTINGS` to leave out; ``container`` names one of the
    pod's containers or init containers (default: its only container). An ``emptyDir`` that
    ``volumes`` does not name is a tmpfs of its size, writable and executable by all as the
    kubelet's folder is.

    ``userns_range`` (first host uid, count): every pod in that one range, ``hostUsers: false``
    or not, for the pods of a procedure that share volumes. On a cluster the kubelet gives each
    user-namespaced pod a range of its own but mounts its volumes id-mapped, so a file that
    uid 1000 writes is uid 1000's on the volume for every later pod (the merge, a retriever);
    runc 1.1 has no id-mapped mounts, and one range for all gives the volumes' files that one
    owner. Without it, ``hostUsers: false`` is ``--userns=auto``."""
    unknown = set(drop) - set(SETTINGS)
    if unknown:
        raise ValueError(f"unknown settings to drop: {sorted(unknown)}")
    chosen = _container(spec, container)
    args = ["--rm"]
    if name:
        args += ["--name", name]
    args += _security_args(spec, chosen, drop, localhost_profiles, userns_range)
    limits = chosen.get("resources", {}).get("limits", {})
    if "memory" in limits:
        args += ["--memory", _quantity_bytes(limits["memory"])]
    if "cpu" in limits:
        args += ["--cpus", str(limits["cpu"])]
    env = _env(chosen, index)
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    args += _mount_args(spec, chosen, volumes)
    if "workingDir" in chosen:
        args += ["--workdir", chosen["workingDir"]]
    command = [expand(part, env) for part in chosen.get("command", [])]
    words = [expand(part, env) for part in chosen.get("args", [])]
    if command:  # the image's entrypoint replaced, as the kubelet does
        args += ["--entrypoint", command[0], image, *command[1:], *words]
    else:  # args alone replace the image's CMD only
        args += [image, *words]
    return args


def _security_args(
    spec: dict[str, Any],
    chosen: dict[str, Any],
    drop: frozenset[str],
    localhost_profiles: str | None,
    userns_range: tuple[int, int] | None,
) -> list[str]:
    """The pod's and the container's securityContext (the container's settings win), and the
    user namespace, as podman's options."""
    pod_sc = spec.get("securityContext", {})
    sc = {**pod_sc, **chosen.get("securityContext", {})}
    args: list[str] = []
    if userns_range is not None:
        first, count = userns_range
        args += ["--uidmap", f"0:{first}:{count}", "--gidmap", f"0:{first}:{count}"]
    elif spec.get("hostUsers") is False and "hostUsers" not in drop:
        args.append("--userns=auto")
    if "runAsUser" in sc:
        args += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', 0)}"]
    if sc.get("runAsNonRoot") and sc.get("runAsUser") == 0:
        raise ValueError("runAsNonRoot with runAsUser 0: the kubelet would refuse this pod")
    if "fsGroup" in pod_sc:
        args += ["--group-add", str(pod_sc["fsGroup"])]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    caps = sc.get("capabilities", {})
    args += [f"--cap-drop={c.lower()}" for c in caps.get("drop", [])]
    args += [f"--cap-add={c.lower()}" for c in caps.get("add", [])]
    if sc.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]
    if sc.get("procMount") == "Unmasked" and "procMount" not in drop:
        args += ["--security-opt", "unmask=ALL"]
    seccomp = sc.get("seccompProfile", {}) if "seccompProfile" not in drop else {}
    if seccomp.get("type") == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    elif seccomp.get("type") == "Localhost":
        if localhost_profiles is None:
            raise ValueError("a Localhost seccomp profile needs the folder of profiles")
        args += ["--security-opt", f"seccomp={localhost_profiles}/{seccomp['localhostProfile']}"]
    apparmor = sc.get("appArmorProfile", {}) if "appArmorProfile" not in drop else {}
    if apparmor.get("type") == "Unconfined":
        args += ["--security-opt", "apparmor=unconfined"]
    return args


def _env(chosen: dict[str, Any], index: int) -> dict[str, str]:
    """The container's environment: values expanded as the kubelet does, the Job's completion
    index for pod ``index``."""
    env: dict[str, str] = {}
    for item in chosen.get("env", []):
        if "value" in item:
            env[item["name"]] = expand(item["value"], env)
        elif "job-completion-index" in str(item.get("valueFrom", {})):
            env[item["name"]] = str(index)
        else:
            raise ValueError(f"env {item['name']}: a valueFrom this translation does not know")
    return env


def _mount_args(spec: dict[str, Any], chosen: dict[str, Any], volumes: dict[str, str]) -> list[str]:
    """Each mount: a host folder of ``volumes``, or an emptyDir that names none as a tmpfs."""
    args: list[str] = []
    by_name = {v["name"]: v for v in spec.get("volumes", [])}
    for mount in chosen.get("volumeMounts", []):
        volume = by_name[mount["name"]]
        if mount["name"] not in volumes and "emptyDir" in volume:
            size = volume["emptyDir"].get("sizeLimit")
            extra = f",size={_quantity_bytes(size)}" if size else ""
            args += ["--tmpfs", f"{mount['mountPath']}:rw,exec,nosuid,nodev,mode=1777{extra}"]
            continue
        if mount["name"] not in volumes:
            raise ValueError(f"no host folder given for volume {mount['name']!r}")
        read_only = mount.get("readOnly") or volume.get("persistentVolumeClaim", {}).get("readOnly")
        args += [
            "-v",
            f"{volumes[mount['name']]}:{mount['mountPath']}" + (":ro" if read_only else ""),
        ]
    return args
