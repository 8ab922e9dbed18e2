"""Step 1: namespaces, and one ConfigMap holding two device-plugin configs."""

from gpulab import CONFIGMAP_NAME, CONFIGMAP_NS, GPU, HINT_QUERIES, QUERIES
from gpulab.rules import (
    config_format_problem,
    device_plugin_config,
    dig,
    field_paths,
    find_object,
    show_field,
    show_yaml,
    usable,
    where_cm,
)
from gpushare.grading.checks import T, check, fail
from gpushare.grading.labstate import LabState
from gpushare.submissions.workdir import LineDict, Workdir, load_yaml_text, yaml_kind

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
    for key in ("default", "shared"):
        # the value starts on the line after its key (``shared: |-``): lines are the file's
        mine = usable(load_yaml_text(data[key], FILE, data.line_of(key) + 1))
        if mine != load_yaml_text(cluster_data.get(key) or "", key):
            fail(
                expected=T("file_matches_cluster", key=key),
                found=T("file_differs_from_cluster", key=key),
                where=f"{FILE}:{data.line_of(key)}",
            )


@check("1.3", 2)
def test_1_3_both_are_valid_device_plugin_configs(lab: LabState) -> None:
    for key in ("default", "shared"):
        problem = config_format_problem(device_plugin_config(lab, key), key)
        if problem:
            expected, found, line = problem
            fail(expected=expected, found=found, where=where_cm(key, line))


@check("1.4", 2)
def test_1_4_shared_refuses_multi_slice_requests(lab: LabState) -> None:
    cfg = device_plugin_config(lab, "shared")
    ts = dig(cfg, "sharing", "timeSlicing")
    if not isinstance(ts, LineDict):
        fail(expected="sharing.timeSlicing", found=T("absent"), where=where_cm("shared"))
    value = ts.get("failRequestsGreaterThanOne")
    if value is not True:
        found = T("absent") if value is None else show_field("failRequestsGreaterThanOne", value)
        line = ts.line_of("failRequestsGreaterThanOne")
        # written, but at another level, where the plugin drops it: say where, and where to
        elsewhere = [
            p
            for p in field_paths(cfg, "failRequestsGreaterThanOne")
            if p[0] != f"{HOME}.failRequestsGreaterThanOne"
        ]
        if value is None and elsewhere:
            path, at = elsewhere[0]
            parent = path.rpartition(".")[0]
            found = (
                T("field_found_at", field="failRequestsGreaterThanOne", path=parent, home=HOME)
                if parent
                else T("field_misplaced", field="failRequestsGreaterThanOne", home=HOME)
            )
            line = at or line
        fail(
            expected="failRequestsGreaterThanOne: true",
            found=found,
            where=where_cm("shared", line),
        )


@check("1.5", 2)
def test_1_5_shared_time_slices_gpu_four_ways(lab: LabState) -> None:
    cfg = device_plugin_config(lab, "shared")
    resources = dig(cfg, "sharing", "timeSlicing", "resources")
    first = dig(resources, 0)
    if not isinstance(first, LineDict):
        fail(
            expected="sharing.timeSlicing.resources[0]", found=T("absent"), where=where_cm("shared")
        )
    found = f"name: {show_yaml(first.get('name'))}, replicas: {show_yaml(first.get('replicas'))}"
    replicas = first.get("replicas")
    if first.get("name") != GPU or replicas != 4 or isinstance(replicas, bool):
        fail(
            expected=f"name: {GPU}, replicas: 4",
            found=T("quoted_value", text=found) if isinstance(replicas, str) else found,
            where=where_cm("shared", first.line),
        )


@check("1.6", 2)
def test_1_6_default_does_not_share(lab: LabState) -> None:
    cfg = device_plugin_config(lab, "default")
    if "sharing" in cfg:
        fail(
            expected=T("no_key", key="sharing"),
            found=T("key_present", key="sharing"),
            where=where_cm("default", cfg.line_of("sharing")),
        )
