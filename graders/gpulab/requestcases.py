"""Cases, oracle and judge for lab step 6: ``bin/check-request.sh <pod manifest>``.

The learner's script must print one ``OVER=<container name>=<count>`` line, and exit 1, for every
container that asks for more than one ``nvidia.com/gpu``; otherwise print ``OK`` and exit 0.
Three sample manifests are shipped with the lab, but a script tuned to those three can still be
wrong (it may read only ``limits``, or only the first YAML document, or only the first
container), so the grader also runs it on fresh cases from :func:`generate` that the learner has
never seen. Every expectation, for samples and generated cases alike, comes from one place: the
oracle :func:`expected_verdict`, which reads the manifest text exactly as the learner is told to
(``yaml.safe_load_all``).

Decisions the lab text leaves open, and how the oracle settles them:

* **Limits vs requests.** A container's GPU count is ``max(limits, requests)`` of
  ``nvidia.com/gpu``, a missing side counting 0. The lab says "look at both", and a manifest
  asking for 2 on either side is asking for 2; when both are set Kubernetes requires them to be
  equal for an extended resource, so ``max`` is simply the value, and for a manifest that breaks
  that rule ``max`` is the conservative reading for a check whose job is to flag over-asking.
  Generated cases never set the two sides to different values, so no learner is marked down
  over a disagreement the lab does not specify.
* **Quantities** may be YAML ints (``2``) or strings of digits (``"2"``, ``'2'``); Kubernetes
  only accepts whole numbers for extended resources, so anything else (``true``, ``1.5``,
  ``"2k"``) is an error in the manifest and the oracle raises :class:`ValueError` rather than
  guess. Generated cases never contain such values.
* **Documents.** Empty documents (``None``) are skipped; only ``kind: Pod`` documents are looked
  at. Generated cases only mix in non-Pod kinds that have no containers (ConfigMap,
  ServiceAccount), so a learner's choice about Deployments and the like is never judged.
* **Containers.** Only ``spec.containers``: the lab says "container". ``initContainers`` are not
  counted and, being unspecified for the learner, never appear in generated cases.
* **Order.** OVER entries come in document order, then container order; :func:`judge` does not
  require that order, but the reference solution prints it.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpushare.lab_api import T

GPU_KEY = "nvidia.com/gpu"
NAMESPACE = "gpu-share"

#: Every ``reason_key`` that :func:`judge` may return.
REASONS: tuple[str, ...] = (
    "ok",
    "wrong_exit_code",
    "missing_over_line",
    "unexpected_over_line",
    "missing_ok",
    "ok_printed_when_over",
)

#: The smallest ``count`` for which :func:`generate` can cover every required feature.
MIN_COUNT = 2

OverEntries = tuple[tuple[str, int], ...]


# --------------------------------------------------------------------------------------------
# Oracle
# --------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """What a correct script does for one manifest: these OVER entries, and this exit code."""

    over: OverEntries
    rc: int

    @property
    def stdout_lines(self) -> tuple[str, ...]:
        """The exact lines the reference solution prints (``OK`` when nothing is over)."""
        if not self.over:
            return ("OK",)
        return tuple(f"OVER={name}={count}" for name, count in self.over)


def gpu_quantity(value: object) -> int:
    """The whole number of GPUs that ``value`` (a limits/requests entry) stands for.

    ``None`` (key absent) is 0. A ``bool`` is refused even though it is an ``int`` in Python,
    because ``nvidia.com/gpu: true`` is a broken manifest, not "1 GPU".
    """
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{GPU_KEY} must be a whole number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise ValueError(f"{GPU_KEY} must be a whole number, got {value!r}")


def _as_dict(value: object) -> dict[object, object]:
    """``value`` if it is a mapping, else an empty one (``resources: {}`` / ``limits:`` null)."""
    return value if isinstance(value, dict) else {}


def container_gpus(container: dict[object, object]) -> int:
    """``max(limits, requests)`` of ``nvidia.com/gpu`` for one container (see module doc)."""
    resources = _as_dict(container.get("resources"))
    return max(
        gpu_quantity(_as_dict(resources.get(side)).get(GPU_KEY)) for side in ("limits", "requests")
    )


def _load_all(text: str) -> list[object]:
    """``yaml.safe_load_all``, with libyaml's parser where PyYAML has it.

    Same SafeConstructor, so the same documents as the learner's ``yaml.safe_load_all``;
    about ten times faster, which matters because cases are made at the start of every grade.
    """
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return list(yaml.load_all(text, Loader=loader))


def expected_verdict(text: str) -> Verdict:
    """The ORACLE: what ``check-request.sh`` must print and return for manifest ``text``.

    Raises ``yaml.YAMLError`` for text that is not YAML and ``ValueError`` for a GPU quantity
    that is not a whole number: the grader's own cases must never be ambiguous.
    """
    return _verdict_of(_load_all(text))


def pod_names(text: str) -> set[str]:
    """The ``metadata.name`` of every Pod in manifest ``text`` (none when it is not YAML)."""
    try:
        docs = _load_all(text)
    except yaml.YAMLError:
        return set()
    return {
        str(_as_dict(doc.get("metadata")).get("name"))
        for doc in docs
        if isinstance(doc, dict) and doc.get("kind") == "Pod"
    } - {"None"}


def _verdict_of(docs: list[object]) -> Verdict:
    """The oracle on already parsed documents (the generator parses each manifest only once)."""
    over: list[tuple[str, int]] = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "Pod":
            continue
        containers = _as_dict(doc.get("spec")).get("containers") or []
        if not isinstance(containers, list):
            continue
        for container in containers:
            if not isinstance(container, dict):
                continue
            count = container_gpus(container)
            if count > 1:
                over.append((str(container.get("name", "")), count))
    return Verdict(over=tuple(over), rc=1 if over else 0)


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One manifest to run the learner's script on, with what a correct script does.

    ``expect_over`` empty means the script must print ``OK`` (and ``expect_rc`` is 0).
    ``description`` says what the manifest holds, as a translatable value: the learner reads it
    in their language next to the expected and the found output.
    """

    name: str
    manifest: str
    expect_rc: int
    expect_over: OverEntries
    description: T


# What each sample is, in the learner's language (catalog keys under [values]).
_SAMPLE_DESCRIPTIONS = {
    "over": T("case_sample_over"),
    "one": T("case_sample_one"),
    "none": T("case_sample_none"),
}


def sample_cases(fixtures_dir: Path) -> list[Case]:
    """The three sample manifests the learner was given: ``over``, ``one``, ``none``.

    ``fixtures_dir`` is the directory holding ``over.yaml``, ``one.yaml`` and ``none.yaml``
    (``fixtures/check-request`` in this repository); the repository's ``fixtures`` directory
    itself is accepted too, so callers need not know the sub-folder name. Expectations come
    from the oracle, never from the file names, so a fixture edited by mistake shows up as a
    failing test instead of a silently wrong expectation.
    """
    base = Path(fixtures_dir)
    if not (base / "over.yaml").is_file() and (base / "check-request" / "over.yaml").is_file():
        base = base / "check-request"
    cases = []
    for stem, description in _SAMPLE_DESCRIPTIONS.items():
        path = base / f"{stem}.yaml"
        if not path.is_file():
            raise FileNotFoundError(f"sample manifest {path} is missing")
        text = path.read_text(encoding="utf-8")
        verdict = expected_verdict(text)
        cases.append(
            Case(
                name=f"sample-{stem}",
                manifest=text,
                expect_rc=verdict.rc,
                expect_over=verdict.over,
                description=description,
            )
        )
    return cases


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------

_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
_CONTAINER_PREFIXES = ("w", "train", "infer", "worker", "cuda", "job", "app", "batch")
_POD_PREFIXES = ("gpu", "trainer", "infer", "notebook", "bench", "render")
_GPU_IMAGES = (
    "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
    "nvcr.io/nvidia/pytorch:24.05-py3",
    "nvcr.io/nvidia/tensorflow:24.05-tf2-py3",
)
_CPU_IMAGES = ("busybox:1.36", "nginx:1.27", "python:3.12-slim")
_CPUS = ("100m", "250m", "500m", "1", "2")
_MEMORIES = ("128Mi", "256Mi", "512Mi", "1Gi", "4Gi")
_ORDINALS = ("first", "second", "third", "fourth", "fifth")
_NUMBERS = ("zero", "one", "two", "three", "four", "five")
_QUOTES = ("plain", "double", "single")


class _Names:
    """DNS-1123 names like ``w-k3x9``, unique within one case.

    Only membership is ever asked of the set, never its order, so output stays deterministic.
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._used: set[str] = set()

    def new(self, prefixes: tuple[str, ...]) -> str:
        while True:
            suffix = "".join(self._rng.choice(_ALNUM) for _ in range(4))
            name = f"{self._rng.choice(prefixes)}-{suffix}"
            if name not in self._used:
                self._used.add(name)
                return name


@dataclass
class _Container:
    """A container as the generator means it; rendered to YAML text by :func:`_render_pod`."""

    name: str
    image: str
    gpu_limits: int | None = None
    gpu_requests: int | None = None
    quote: str = "plain"
    cpu: str | None = None
    memory: str | None = None
    empty_resources: bool = False

    @property
    def gpus(self) -> int:
        return max(self.gpu_limits or 0, self.gpu_requests or 0)


@dataclass
class _Draft:
    """A case before the oracle has checked it: the builder's own idea of the answer."""

    name: str
    manifest: str
    intended_over: OverEntries
    description: T
    n_docs: int = 1


def _quantity(value: int, quote: str) -> str:
    if quote == "double":
        return f'"{value}"'
    if quote == "single":
        return f"'{value}'"
    return str(value)


def _render_container(c: _Container) -> list[str]:
    lines = [
        f"    - name: {c.name}",
        f"      image: {c.image}",
        '      command: ["sleep", "3600"]',
    ]
    limits: list[str] = []
    requests: list[str] = []
    if c.gpu_limits is not None:
        limits.append(f"          {GPU_KEY}: {_quantity(c.gpu_limits, c.quote)}")
    if c.gpu_requests is not None:
        requests.append(f"          {GPU_KEY}: {_quantity(c.gpu_requests, c.quote)}")
    if c.memory is not None:
        limits.append(f"          memory: {c.memory}")
        requests.append(f"          memory: {c.memory}")
    if c.cpu is not None:
        requests.append(
            f'          cpu: "{c.cpu}"' if c.cpu.isdigit() else f"          cpu: {c.cpu}"
        )
    if limits or requests:
        lines.append("      resources:")
        if limits:
            lines += ["        limits:", *limits]
        if requests:
            lines += ["        requests:", *requests]
    elif c.empty_resources:
        lines.append("      resources: {}")
    return lines


def _render_pod(name: str, containers: list[_Container]) -> str:
    app = name.rsplit("-", 1)[0]
    lines = [
        "apiVersion: v1",
        "kind: Pod",
        "metadata:",
        f"  name: {name}",
        f"  namespace: {NAMESPACE}",
        "  labels:",
        f"    app: {app}",
        "spec:",
        "  restartPolicy: Never",
    ]
    if any(c.gpu_limits is not None or c.gpu_requests is not None for c in containers):
        lines.append("  runtimeClassName: nvidia")
    lines.append("  containers:")
    for c in containers:
        lines += _render_container(c)
    return "\n".join(lines) + "\n"


def _render_filler(kind: str, names: _Names) -> str:
    """A document that is not a Pod: it must not change the verdict."""
    if kind == "ConfigMap":
        return (
            "apiVersion: v1\n"
            "kind: ConfigMap\n"
            "metadata:\n"
            f"  name: {names.new(('cuda-env', 'train-config'))}\n"
            f"  namespace: {NAMESPACE}\n"
            "data:\n"
            "  NVIDIA_DRIVER_CAPABILITIES: compute,utility\n"
            '  EPOCHS: "10"\n'
        )
    if kind == "ServiceAccount":
        return (
            "apiVersion: v1\n"
            "kind: ServiceAccount\n"
            "metadata:\n"
            f"  name: {names.new(('trainer', 'runner'))}\n"
            f"  namespace: {NAMESPACE}\n"
        )
    if kind == "comment":
        return "# this document is intentionally empty\n"
    return ""  # an empty document between two ``---`` markers


def _other_resources(rng: random.Random, c: _Container) -> _Container:
    """Give ``c`` cpu/memory sometimes, so GPU keys sit among ordinary resources."""
    if rng.random() < 0.7:
        c.cpu = rng.choice(_CPUS)
    if rng.random() < 0.6:
        c.memory = rng.choice(_MEMORIES)
    return c


def _gpu_container(
    rng: random.Random,
    names: _Names,
    count: int,
    where: str | None = None,
    quote: str | None = None,
) -> _Container:
    """A container asking ``count`` GPUs in ``where`` ("limits", "requests", "both")."""
    where = where or rng.choice(("limits", "requests", "both"))
    c = _Container(
        name=names.new(_CONTAINER_PREFIXES),
        image=rng.choice(_GPU_IMAGES),
        gpu_limits=count if where in ("limits", "both") else None,
        gpu_requests=count if where in ("requests", "both") else None,
        quote=quote or rng.choice(_QUOTES),
    )
    return _other_resources(rng, c)


def _plain_container(rng: random.Random, names: _Names) -> _Container:
    """A container with no GPU at all (maybe cpu/memory, maybe ``resources: {}``)."""
    c = _Container(name=names.new(_CONTAINER_PREFIXES), image=rng.choice(_CPU_IMAGES))
    _other_resources(rng, c)
    c.empty_resources = rng.random() < 0.5
    return c


def _harmless_container(rng: random.Random, names: _Names) -> _Container:
    """A container that is not over: either exactly one GPU or no GPU."""
    if rng.random() < 0.5:
        return _gpu_container(rng, names, 1)
    return _plain_container(rng, names)


def _over_count(rng: random.Random) -> int:
    return rng.randint(2, 8)


_FILLER_KINDS = {"ConfigMap": "kind_configmap", "ServiceAccount": "kind_serviceaccount"}


def _where(c: _Container) -> T:
    if c.gpu_limits is not None and c.gpu_requests is not None:
        return T("where_both")
    return T("where_limits") if c.gpu_limits is not None else T("where_requests")


def _describe(c: _Container) -> T:
    """One container, for the learner: its name, GPUs, where they are asked, how written."""
    if c.gpus == 0:
        if c.cpu is not None and c.memory is not None:
            return T("container_cpu_only", name=c.name)
        return T("container_no_gpu", name=c.name)
    if c.gpus == 1:
        return T("container_one_gpu", name=c.name, where=_where(c))
    if c.quote != "plain":
        written = _quantity(c.gpus, c.quote)
        return T(
            "container_gpus_quoted", name=c.name, count=c.gpus, where=_where(c), written=written
        )
    return T("container_gpus", name=c.name, count=c.gpus, where=_where(c))


def _over_pod_containers(rng: random.Random, names: _Names) -> list[_Container]:
    """The over Pod's containers: one over in requests only, one over in limits only with a
    quoted quantity, maybe one over in both, and one or two that are not over, shuffled.

    With at least two over containers one is never first, so a script reading only the first
    container misses a line; one reading only ``limits`` or only ``requests``, or unable to read
    ``"3"``, misses another.
    """
    containers = [
        _gpu_container(rng, names, _over_count(rng), where="requests"),
        _gpu_container(
            rng, names, _over_count(rng), where="limits", quote=rng.choice(("double", "single"))
        ),
    ]
    if rng.random() < 0.4:
        containers.append(_gpu_container(rng, names, _over_count(rng), where="both"))
    containers += [_harmless_container(rng, names) for _ in range(rng.randint(1, 2))]
    rng.shuffle(containers)
    return containers


def _build_over(rng: random.Random) -> _Draft:
    """Several YAML documents with a non-Pod or empty one; the over Pod is never the first.

    Every "over" feature the lab lists is in this one manifest (several documents, several
    containers, requests only, quoted quantities), so one run of the learner's script judges
    them all; the expected lines and the description say which container a script missed.
    """
    names = _Names(rng)
    n_docs = rng.randint(3, 4)
    over_at = rng.randint(1, n_docs - 1)
    filler_at = rng.choice([i for i in range(n_docs) if i != over_at])
    filler_kind = rng.choice(("ConfigMap", "ServiceAccount", "empty", "comment"))
    docs: list[str] = []
    kinds: list[T] = []
    over: OverEntries = ()
    containers: list[_Container] = []
    for i in range(n_docs):
        if i == over_at:
            containers = _over_pod_containers(rng, names)
            docs.append(_render_pod(names.new(_POD_PREFIXES), containers))
            kinds.append(T("kind_pod"))
            over = tuple((c.name, c.gpus) for c in containers if c.gpus > 1)
        elif i == filler_at:
            docs.append(_render_filler(filler_kind, names))
            kinds.append(T(_FILLER_KINDS.get(filler_kind, "kind_empty")))
        else:
            c = _harmless_container(rng, names)
            docs.append(_render_pod(names.new(_POD_PREFIXES), [c]))
            kinds.append(T("kind_pod_one_gpu" if c.gpus == 1 else "kind_pod_no_gpu"))
    text = "---\n".join(docs)
    # A leading "---" is optional, except before an empty or comment-only first document:
    # without it the first marker would merely open the next document and the empty one
    # would vanish, making the name and description lie (``generate`` checks the count).
    if rng.random() < 0.5 or (filler_at == 0 and filler_kind in ("empty", "comment")):
        text = "---\n" + text
    return _Draft(
        name=f"{_NUMBERS[n_docs]}-docs-{len(over)}-over",
        manifest=text,
        intended_over=over,
        n_docs=n_docs,
        description=T(
            "case_over",
            docs=n_docs,
            kinds=tuple(kinds),
            doc=over_at + 1,
            count=len(containers),
            containers=tuple(_describe(c) for c in containers),
        ),
    )


def _build_passing(rng: random.Random) -> _Draft:
    """Nothing over: containers asking exactly one GPU each, and one with cpu/memory only.

    Catches a script that flags one GPU, that adds up a Pod's or a file's GPUs, or that fails on
    a container without any GPU. With two documents, the CPU-only container is a Pod of its own.
    """
    names = _Names(rng)
    ones = [_gpu_container(rng, names, 1) for _ in range(rng.randint(1, 2))]
    cpu_only = _Container(
        name=names.new(_CONTAINER_PREFIXES),
        image=rng.choice(_CPU_IMAGES),
        cpu=rng.choice(_CPUS),
        memory=rng.choice(_MEMORIES),
    )
    if rng.random() < 0.5:
        pods = [ones, [cpu_only]]
        text = "---\n".join(_render_pod(names.new(_POD_PREFIXES), p) for p in pods)
        name, n_docs = f"passes-2-pods-{len(ones) + 1}-containers", 2
        shape = "case_passes_two_pods"
    else:
        containers = [*ones, cpu_only]
        rng.shuffle(containers)
        text = _render_pod(names.new(_POD_PREFIXES), containers)
        name, n_docs = f"passes-{len(containers)}-containers", 1
        shape = "case_passes_one_pod"
    return _Draft(
        name=name,
        manifest=text,
        intended_over=(),
        n_docs=n_docs,
        description=T(shape, containers=tuple(_describe(c) for c in [*ones, cpu_only])),
    )


_Builder = Callable[[random.Random], _Draft]

# One case packs every feature the lab lists (several documents, several containers, requests
# only, quoted quantities), one must pass; so two runs of the learner's script judge them all.
# Every run costs the learner's interpreter start-up, and that dominates a grade's time.
_CORE: tuple[_Builder, ...] = (_build_over, _build_passing)


def generate(seed: int, count: int = MIN_COUNT) -> list[Case]:
    """``count`` fresh cases from ``random.Random(seed)``, deterministic byte for byte.

    Every run covers every required feature (several documents with a non-Pod or empty one,
    an over container that is not first in its Pod, requests only, limits only with a quoted
    quantity, exactly one GPU, a container without GPU), because every builder runs once;
    cases beyond :data:`MIN_COUNT` repeat random builders with new randomness. The order of
    cases is shuffled so it says nothing about which one failed. Case names are unique within
    the list (``-2``, ``-3`` ... on repeats).
    """
    return judged(drafts(seed, count))


def drafts(seed: int, count: int = MIN_COUNT) -> list[_Draft]:
    """The cases of :func:`generate` before the oracle has judged them: name and manifest are
    final, so the learner's runs can start on them before the oracle parses them."""
    if count < MIN_COUNT:
        raise ValueError(f"count must be at least {MIN_COUNT} to cover every feature, got {count}")
    rng = random.Random(seed)
    builders = list(_CORE) + [rng.choice(_CORE) for _ in range(count - MIN_COUNT)]
    rng.shuffle(builders)
    out: list[_Draft] = []
    seen: Counter[str] = Counter()
    for build in builders:
        draft = build(rng)
        seen[draft.name] += 1
        if seen[draft.name] > 1:
            draft.name = f"{draft.name}-{seen[draft.name]}"
        out.append(draft)
    return out


def judged(drafts: list[_Draft]) -> list[Case]:
    """Cases whose expectations are the oracle's (never the generator's own idea of them)."""
    cases: list[Case] = []
    for draft in drafts:
        docs = _load_all(draft.manifest)
        verdict = _verdict_of(docs)
        # Either mismatch is a generator bug, never the learner's fault: refuse to hand it out.
        if verdict.over != draft.intended_over or len(docs) != draft.n_docs:
            raise AssertionError(
                f"generator/oracle disagree on {draft.name}: over {draft.intended_over} vs "
                f"{verdict.over}, documents {draft.n_docs} vs {len(docs)}\n{draft.manifest}"
            )
        cases.append(
            Case(
                name=draft.name,
                manifest=draft.manifest,
                expect_rc=verdict.rc,
                expect_over=verdict.over,
                description=draft.description,
            )
        )
    return cases


# --------------------------------------------------------------------------------------------
# Judge
# --------------------------------------------------------------------------------------------

_OVER_LINE = re.compile(r"OVER=([^=\s]+)=([0-9]+)")


def parse_output(stdout: str) -> tuple[OverEntries, bool]:
    """Read what a learner's script printed: ``(OVER entries, saw an OK line)``.

    Lenient on purpose: each line is stripped of surrounding whitespace and ``\\r`` (scripts
    written on Windows, ``echo`` with trailing blanks), blank lines and any other line (debug
    output) are ignored. Only whole lines ``OVER=<name>=<int>`` and ``OK`` count.
    """
    over: list[tuple[str, int]] = []
    saw_ok = False
    for raw in stdout.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line == "OK":
            saw_ok = True
            continue
        match = _OVER_LINE.fullmatch(line)
        if match:
            over.append((match.group(1), int(match.group(2))))
    return tuple(over), saw_ok


def judge(case: Case, returncode: int, stdout: str) -> tuple[bool, str]:
    """``(passed, reason_key)`` for one run of the learner's script on ``case``.

    OVER lines are compared as a multiset (their order is free), and each count must match
    exactly. Unrelated lines are tolerated, except an ``OK`` line when something is over,
    which would tell a pipeline reading the output the opposite of the truth. The output is
    checked before the exit code, since "what is wrong in the output" is the more useful hint.
    ``reason_key`` is one of :data:`REASONS`.
    """
    got_over, saw_ok = parse_output(stdout)
    expected = Counter(case.expect_over)
    got = Counter(got_over)
    if expected - got:
        return False, "missing_over_line"
    if got - expected:
        return False, "unexpected_over_line"
    if case.expect_over and saw_ok:
        return False, "ok_printed_when_over"
    if not case.expect_over and not saw_ok:
        return False, "missing_ok"
    if returncode != case.expect_rc:
        return False, "wrong_exit_code"
    return True, "ok"
