"""Step 7: a third way (MPS) in the same ConfigMap, and the isolation table."""

from gpushare.checks import T, check, fail
from gpushare.lab_rules import ISOLATION, ISOLATION_VALUES, device_plugin_config, dig, where_cm
from gpushare.labstate import GPU
from gpushare.workdir import FileProblem

FILE = "out/isolation.txt"


@check("7.1", 4)
def test_7_1_mps_config(lab):
    cfg = device_plugin_config(lab, "mps")
    sharing = cfg.get("sharing")
    if isinstance(sharing, dict) and "timeSlicing" in sharing:
        fail(
            expected=T("no_key", key="sharing.timeSlicing"),
            found=T("key_present", key="sharing.timeSlicing"),
            where=where_cm("mps", sharing.line_of("timeSlicing")),
        )
    first = dig(cfg, "sharing", "mps", "resources", 0)
    if not isinstance(first, dict):
        fail(expected="sharing.mps.resources[0]", found=T("absent"), where=where_cm("mps"))
    replicas = first.get("replicas")
    if first.get("name") != GPU or replicas != 4 or isinstance(replicas, bool):
        fail(
            expected=f"name: {GPU!r}, replicas: 4",
            found=f"name: {first.get('name')!r}, replicas: {replicas!r}",
            where=where_cm("mps", first.line),
        )
    for key in ("default", "shared"):  # adding mps must not lose the first two
        device_plugin_config(lab, key)


def _table(work):
    table = work.key_values(FILE)
    if isinstance(table, FileProblem):
        fail(problem=table.problem, where=table.where)
    return table


@check("7.2", 2)
def test_7_2_isolation_table_format(work):
    table = _table(work)
    missing = [k for k in ISOLATION if k not in table]
    extra = [k for k in table if k not in ISOLATION]
    if missing or extra:
        fail(
            expected=T("keys_exactly", keys=", ".join(ISOLATION)),
            found=T(
                "keys_missing_extra",
                missing=", ".join(missing) or "-",
                extra=", ".join(extra) or "-",
            ),
            where=f"{FILE}:{table[extra[0]][1]}" if extra else FILE,
        )
    for key, (value, line) in table.items():
        if value not in ISOLATION_VALUES:
            fail(
                expected=T("one_of", values=", ".join(ISOLATION_VALUES)),
                found=f"{key}={value}",
                where=f"{FILE}:{line}",
            )


@check("7.3", 4)
def test_7_3_isolation_table_values(work):
    table = _table(work)
    wrong = [(k, table[k]) for k in ISOLATION if k in table and table[k][0] != ISOLATION[k]]
    missing = [k for k in ISOLATION if k not in table]
    if wrong or missing:
        right = len(ISOLATION) - len(wrong) - len(missing)
        fail(
            expected=T("all_correct", count=len(ISOLATION)),
            found=T(
                "some_correct",
                right=right,
                count=len(ISOLATION),
                # a missing key shows as KEY=? (the right value is never shown)
                wrong=", ".join([f"{k}={v}" for k, (v, _) in wrong] + [f"{k}=?" for k in missing]),
            ),
            where=f"{FILE}:{wrong[0][1][1]}" if wrong else FILE,
        )
