"""Step 1: namespaces, and one ConfigMap holding two device-plugin configs."""

from gpulab import CONFIGMAP_NAME, CONFIGMAP_NS, GPU, HINT_QUERIES, QUERIES, configs
from gpulab.deviceplugin import NONE, shown
from gpulab.rules import find_object, usable, where_cm
from gpushare.lab_api import (
    FileProblem,
    LabState,
    LineDict,
    T,
    Value,
    Workdir,
    check,
    fail,
    load_yaml_text,
    yaml_kind,
)

READS, HINT_READS = QUERIES, HINT_QUERIES

FILE = "k8s/device-plugin-configs.yaml"
HOME = "sharing.timeSlicing"  # where failRequestsGreaterThanOne belongs


@check("1.1", 2)
def test_1_1_namespaces_exist(lab: LabState) -> None:
    present = lab.namespace_names()
    missing = [ns for ns in ("gpu-share", "team-a") if ns not in present]
    if missing:
        found = [ns for ns in ("gpu-share", "team-a") if ns in present]
        fail(
            expected=("gpu-share", "team-a"),
            found=tuple(found) if found else T("none"),
            where=T("cluster_namespaces"),
        )


@check("1.2", 2)
def test_1_2_file_describes_the_configmap(lab: LabState, work: Workdir) -> None:
    objs = usable(work.objects(FILE))
    obj = find_object(objs, "ConfigMap", CONFIGMAP_NAME, CONFIGMAP_NS, FILE)
    data = obj.get("data")
    if not isinstance(data, LineDict):
        found = T("absent")
        if "binaryData" in obj:  # kubectl takes it, but the plugin reads its configs from data
            found = T("binarydata_instead", key="binaryData", wanted="data")
        line = obj.line_of("binaryData") if "binaryData" in obj else obj.line
        fail(expected=T("key_present", key="data"), found=found, where=f"{FILE}:{line}")
    for key in ("default", "shared"):
        if not isinstance(data.get(key), str):
            fail(
                expected=T("key_string", key=key),
                found=T("absent") if key not in data else yaml_kind(data[key]),
                where=f"{FILE}:{data.line_of(key)}",
            )
    cm = lab.read("configmap")
    if cm is None:
        fail(expected=T("applied_to_cluster"), found=T("absent"), where=where_cm())
    cluster_data = cm.get("data") or {}
    # mps (step 7) may be added to the live ConfigMap alone (kubectl patch): judged only when
    # the file holds it too, and then the two must agree like the others (graders/RULES.md)
    compared = ("default", "shared", *(["mps"] if isinstance(data.get("mps"), str) else []))
    for key in compared:
        # the value starts on the line after its key (``shared: |-``): lines are the file's
        mine = load_yaml_text(data[key], FILE, data.line_of(key) + 1)
        if isinstance(mine, FileProblem):  # kubectl's own check cannot see into a string
            fail(problem=mine.problem, where=mine.where, hint=T("hint_yaml_in_value", key=key))
        if mine != load_yaml_text(cluster_data.get(key) or "", key):
            fail(
                expected=T("file_matches_cluster", key=key),
                found=T("file_differs_from_cluster", key=key),
                where=f"{FILE}:{data.line_of(key)}",
            )


@check("1.3", 2)
def test_1_3_both_are_configs_the_device_plugin_accepts(lab: LabState) -> None:
    """Judged as the plugin reads them (gpulab.deviceplugin): what it refuses fails here
    with its reason; a field it does not know it drops, which costs nothing here (the
    checks of what the config must do then judge what is left)."""
    for key in ("default", "shared"):
        read = configs.reading(lab, key)
        refusal = configs.the_refusal(read)
        if refusal is not None:
            # default is judged as the lab defines it: a problem in its sharing is reported
            # as what the lab asks there, no sharing at all (1.6 says it too)
            in_sharing = key == "default" and refusal.path.startswith("sharing")
            fail(
                expected=T("default_no_sharing") if in_sharing else T("dp_accepts"),
                found=configs.refusal_found(read, refusal),
                where=where_cm(key, refusal.line),
                cause=configs.refused(key),
            )


@check("1.4", 2)
def test_1_4_shared_refuses_multi_slice_requests(lab: LabState) -> None:
    read = configs.readable(lab, "shared")
    want = "failRequestsGreaterThanOne: true"
    method = configs.method_of(lab, "shared", read, "timeSlicing", want)
    if method.fail_requests is True:
        return
    line = method.fail_requests_line or method.line
    if method.fail_requests is None:  # written, and refused ("true" quoted): see 1.3
        node = method.fail_requests_node
        fail(
            expected=want,
            found=T(
                "quoted_value",
                text=f"failRequestsGreaterThanOne: {shown(node)}",
                want=T("type_bool"),
            )
            if shown(node).startswith('"')
            else f"failRequestsGreaterThanOne: {shown(node)}",
            where=where_cm("shared", line),
            cause=configs.refused("shared"),
        )
    if method.fail_requests_node is not None:
        found: Value = f"failRequestsGreaterThanOne: {shown(method.fail_requests_node)}"
        fail(expected=want, found=found, where=where_cm("shared", line))
    # not written where the plugin reads it: written elsewhere, or in another case?
    note = configs.note_for(read, f"{HOME}.failRequestsGreaterThanOne")
    if note is not None:
        parent = note.path.rpartition(".")[0]
        found = (
            configs.note_value(note)
            if note.why == "case"
            else T("field_found_at", field="failRequestsGreaterThanOne", path=parent, home=HOME)
            if parent
            else T("field_misplaced", field="failRequestsGreaterThanOne", home=HOME)
        )
        fail(
            expected=want,
            found=found,
            where=where_cm("shared", note.line),
            cause=configs.dropped("shared", note),
        )
    fail(expected=want, found=T("absent"), where=where_cm("shared", line))


@check("1.5", 2)
def test_1_5_shared_time_slices_gpu_four_ways(lab: LabState) -> None:
    """What a node with this config advertises: nvidia.com/gpu, under its own name (no
    renameByDefault, no rename), four times on every GPU."""
    read = configs.readable(lab, "shared")
    expected = f"name: {GPU}, replicas: 4"
    method = configs.method_of(lab, "shared", read, "timeSlicing", expected)
    configs.shares_gpu_four_ways(lab, "shared", read, method)


@check("1.6", 2)
def test_1_6_default_does_not_share(lab: LabState) -> None:
    read = configs.readable(lab, "default")
    bad = [r for r in read.refusals if r.path.startswith("sharing")]
    if read.strategy != NONE or bad:
        fail(
            expected=T("no_key", key="sharing"),
            found=T("key_present", key="sharing"),
            where=where_cm("default", read.sharing_line),
            cause=configs.refused("default") if bad else None,
        )
