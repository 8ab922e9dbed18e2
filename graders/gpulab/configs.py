"""The ConfigMap's device-plugin configs, judged as the plugin reads them, then by the lab.

:mod:`gpulab.deviceplugin` says what the plugin makes of a config; this module says what
that costs in the lab. The rule: a config the plugin refuses fails 1.3 (or 7.1, for
``mps``) with the plugin's reason; a field the plugin drops costs nothing by itself, and the
lab's rules judge what is left, pointing at the dropped field where it is why something the
lab asks for is missing. Each failure names its root (``cause``), so the checks that follow
from one slip point to the check that tells it in full.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulab import GPU
from gpulab.deviceplugin import (
    Method,
    Note,
    Reading,
    Refusal,
    Shared,
    node_refusal,
    read_config,
    replicas_of,
    shown,
)
from gpulab.rules import LAB_REPLICAS, PHYSICAL_GPUS, where_cm
from gpushare.lab_api import LabState, T, Value, fail


def refused(key: str) -> str:
    """The cause of every failure that follows from the plugin refusing config ``key``."""
    return f"config:{key}:refused"


def renamed(key: str) -> str:
    return f"config:{key}:renamed"


def dropped(key: str, note: Note) -> str:
    return f"config:{key}:ignored:{note.path}"


def reading(lab: LabState, key: str) -> Reading:
    """The config stored under ``key``, as the plugin reads it; fails the check when the
    ConfigMap or the key is missing (the roots ``configmap:absent``,
    ``configmap:<key>:absent``)."""
    cm = lab.read("configmap")
    if cm is None:
        fail(
            expected=T("configmap_present"),
            found=T("absent"),
            where=where_cm(),
            cause="configmap:absent",
        )
    data = cm.get("data") or {}
    if key not in data:
        fail(
            expected=T("key_present", key=key),
            found=T("keys_are", keys=tuple(sorted(map(str, data))) or T("none")),
            where=where_cm(),
            cause=f"configmap:{key}:absent",
        )
    value = data[key]
    return read_config(value if isinstance(value, str) else str(value))


def the_refusal(read: Reading) -> Refusal | None:
    """What the plugin refuses in this config: its own reason, else a failure on the lab's
    GPU nodes (two whole GPUs each) that ``devices`` would cause."""
    return read.refusal or node_refusal(read, PHYSICAL_GPUS)


# the lab's entry for nvidia.com/gpu, field by field (a tuple: names, shown "a, b" / "a、b")
LAB_ENTRY = (f"name: {GPU}", f"replicas: {LAB_REPLICAS}")


def refusal_found(read: Reading, refusal: Refusal) -> Value:
    """The plugin's reason, and the dropped field that explains a missing one (``Replicas``
    for ``replicas``)."""
    found: list[Value] = [T("dp_refuses", reason=refusal.reason)]
    missing = refusal.reason.params.get("field") if refusal.reason.key == "dpr_missing" else None
    for note in read.notes:
        if missing and note.meant and note.meant.endswith(f".{missing}"):
            found.append(note_value(note))
            break
    return found if len(found) > 1 else found[0]


def readable(lab: LabState, key: str) -> Reading:
    """The config ``key`` when the plugin's reader can read it at all (YAML holding a
    mapping, or nothing); fails pointing to 1.3 otherwise."""
    read = reading(lab, key)
    refusal = read.refusal
    if not read.readable and refusal is not None:
        fail(
            expected=T("dp_accepts"),
            found=refusal_found(read, refusal),
            where=where_cm(key, refusal.line),
            cause=refused(key),
        )
    return read


def note_value(note: Note) -> T:
    """A dropped field, as the learner reads it."""
    if note.why == "case" and note.meant:
        return T("dp_dropped_case", field=note.path, line=note.line, meant=note.meant)
    if note.meant:
        return T("dp_dropped_meant", field=note.path, line=note.line, meant=note.meant)
    return T("dp_dropped", field=note.path, line=note.line)


def note_for(read: Reading, field: str) -> Note | None:
    """The dropped field that stands for ``field`` (a path such as
    ``sharing.timeSlicing``): one the plugin would read there had it been written so, or
    the misspelt parent of that path."""
    last = field.rsplit(".", 1)[-1].lower()
    for note in read.notes:
        if note.meant and (note.meant == field or note.meant.lower().endswith("." + last)):
            return note
        if note.meant and field.startswith(note.meant + "."):
            return note
    return None


def method_of(lab: LabState, key: str, read: Reading, method: str, expected: Value) -> Method:
    """``sharing.<method>`` of config ``key`` as the plugin uses it; fails when it is not
    there (pointing at a dropped field that stands for it) or another method wins."""
    path = f"sharing.{method}"
    got = read.time_slicing if method == "timeSlicing" else read.mps
    if method == "timeSlicing" and read.mps is not None and got is not None:
        fail(
            expected=expected,
            found=T("dp_mps_wins"),
            where=where_cm(key, read.mps.line),
            cause=f"config:{key}:mps-wins",
        )
    if got is None:
        note = note_for(read, path)
        if note is not None:
            fail(
                expected=expected,
                found=note_value(note),
                where=where_cm(key, note.line),
                cause=dropped(key, note),
            )
        fail(expected=expected, found=T("absent"), where=where_cm(key, read.sharing_line))
    return got


def gpu_entries(lab: LabState, key: str, method: Method) -> tuple[int | None, list[Shared]]:
    """The entries of ``method`` for nvidia.com/gpu and their replicas (the largest of
    several); fails when none names nvidia.com/gpu, saying what it names instead."""
    replicas, entries = replicas_of(method, GPU)
    expected = LAB_ENTRY
    if not entries:
        broken = [r for r in method.resources if r.name is None]
        names = tuple(sorted({r.name for r in method.resources if r.name}))
        if broken:
            fail(
                expected=expected,
                found=f"name: {broken[0].written or '~'}",
                where=where_cm(key, broken[0].line),
                cause=refused(key),
            )
        fail(
            expected=expected,
            found=T("dp_no_gpu_entry", names=names) if names else T("absent"),
            where=where_cm(key, method.line),
        )
    return replicas, entries


def shares_gpu_four_ways(lab: LabState, key: str, read: Reading, method: Method) -> None:
    """The lab's rule for a sharing method: nvidia.com/gpu, advertised under its own name,
    on every GPU, ``replicas: 4`` (the largest replicas where it is listed twice). A
    ``devices`` that no lab node has is 1.3's (or 7.1's) refusal, not a share of some GPUs."""
    replicas, entries = gpu_entries(lab, key, method)
    for entry in entries:
        if entry.renamed_by and entry.advertised != GPU:
            how = (
                T("dp_by_default")
                if entry.renamed_by == "renameByDefault"
                else f"rename: {entry.advertised}"
            )
            fail(
                expected=T("dp_not_renamed", resource=GPU),
                found=T("dp_renamed", resource=GPU, advertised=entry.advertised or "~", how=how),
                where=where_cm(key, entry.line),
                cause=renamed(key),
            )
    if replicas != LAB_REPLICAS:
        written = [e for e in entries if e.replicas_node is not None]
        first = written[0] if written else entries[0]
        node = first.replicas_node
        if replicas is None and node is not None:
            value: Value = (
                T("quoted_value", text=f"replicas: {shown(node)}", want=T("type_int"))
                if shown(node).startswith('"')
                else f"replicas: {shown(node)}"
            )
        else:
            value = T("no_key", key="replicas") if replicas is None else f"replicas: {replicas}"
        fail(
            expected=LAB_ENTRY,
            found=(f"name: {first.written}", value),  # fields, as LAB_ENTRY names them
            where=where_cm(key, first.line),
            cause=refused(key) if replicas is None and node is not None else None,
        )
    if node_refusal(read, PHYSICAL_GPUS) is not None:
        return
    for entry in entries:
        if entry.devices is not None and not entry.devices.all:
            fail(
                expected=T("dp_all_devices"),
                found=T("dp_some_devices", value=entry.devices.written),
                where=where_cm(key, entry.line),
            )


# --------------------------------------------------------------------------- step 2's count


@dataclass
class Derived:
    """lab-node-1's GPU count as the lab derives it, and whether it came from the ConfigMap.

    ``why``: the reason the ConfigMap's replicas are not used (None when they are, or when
    the ConfigMap cannot be read at all). ``cause``/``follows``: a node that advertises
    ``follows`` (resource, count), which is what the config would make it advertise, fails
    with that root.
    """

    replicas: int
    from_configmap: bool
    why: T | None = None
    cause: str | None = None
    follows: tuple[str, int] | None = None


def shared_replicas(lab: LabState) -> Derived:
    """``replicas`` of the shared config for nvidia.com/gpu, when the plugin would use
    them as the lab means: time-sliced, under its own name, on every GPU. Otherwise the
    lab's 4 (LAB.md: the count is read from the ConfigMap, and a config that advertises
    nothing of nvidia.com/gpu gives no count to read), saying why."""
    try:
        cm = lab.read("configmap")
    except Exception:
        return Derived(LAB_REPLICAS, False)
    raw = ((cm or {}).get("data") or {}).get("shared")
    if not isinstance(raw, str):
        return Derived(LAB_REPLICAS, False)
    read = read_config(raw)
    refusal = the_refusal(read)
    method = read.time_slicing if read.mps is None else None
    replicas, entries = replicas_of(method, GPU)
    if refusal is not None:
        bad = [e.replicas_node for e in entries if e.replicas is None and e.replicas_node]
        count = _whole(bad[0]) if bad else None
        follows = (GPU, PHYSICAL_GPUS * count) if count is not None else None
        return Derived(LAB_REPLICAS, False, T("why_refused"), refused("shared"), follows)
    if method is None or not entries or replicas is None:
        return Derived(LAB_REPLICAS, False, T("why_not_shared"))
    moved = [e for e in entries if e.advertised != GPU]
    if moved:
        target = moved[0].advertised or GPU
        follows = (target, PHYSICAL_GPUS * (moved[0].replicas or LAB_REPLICAS))
        why = T("why_renamed", advertised=target)
        return Derived(LAB_REPLICAS, False, why, renamed("shared"), follows)
    some = [e.devices for e in entries if e.devices is not None and not e.devices.all]
    if some:
        return Derived(LAB_REPLICAS, False, T("why_some_devices", value=some[0].written))
    return Derived(replicas, True)


def _whole(node: object) -> int | None:
    """A refused replicas that is still a whole number (``replicas: 1``), for the count a
    node following that config would show."""
    value = getattr(node, "value", None)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def renamed_gpu(lab: LabState) -> str | None:
    """The name the shared config advertises nvidia.com/gpu's replicas under, when its
    renaming moves them off nvidia.com/gpu; else None."""
    try:
        derived = shared_replicas(lab)
    except Exception:
        return None
    if derived.cause == renamed("shared") and derived.follows is not None:
        return derived.follows[0]
    return None
