"""Step 7: a third way (MPS) in the same ConfigMap, and the isolation table."""

from gpulab import HINT_QUERIES, QUERIES, configs
from gpulab.rules import ISOLATION, ISOLATION_VALUES, usable, where_cm
from gpushare.lab_api import LabState, T, Workdir, check, fail

READS, HINT_READS = QUERIES, HINT_QUERIES

FILE = "out/isolation.txt"


@check("7.1", 4)
def test_7_1_mps_config(lab: LabState) -> None:
    """The mps config as the plugin reads and validates it (a config it refuses fails here
    with its reason), then the lab's rules: sharing.mps alone, nvidia.com/gpu under its own
    name on every GPU, replicas 4; and default and shared still there."""
    read = configs.reading(lab, "mps")
    refusal = configs.the_refusal(read)
    if refusal is not None:
        fail(
            expected=T("dp_accepts"),
            found=configs.refusal_found(read, refusal),
            where=where_cm("mps", refusal.line),
            cause=configs.refused("mps"),
        )
    if read.time_slicing is not None:
        fail(
            expected=T("no_key", key="sharing.timeSlicing"),
            found=T("key_present", key="sharing.timeSlicing"),
            where=where_cm("mps", read.time_slicing.line),
        )
    method = configs.method_of(lab, "mps", read, "mps", "sharing.mps.resources[0]")
    configs.shares_gpu_four_ways(lab, "mps", read, method)
    for key in ("default", "shared"):  # adding mps must not lose the first two
        configs.readable(lab, key)


def _answer(value: str) -> str | None:
    """The table's value as an answer: ``Yes``, `` no `` or ``"partial"`` read as written
    meant; None when it is none of yes, no, partial."""
    word = value.strip().strip("\"'").strip().lower()
    return word if word in ISOLATION_VALUES else None


@check("7.2", 2)
def test_7_2_isolation_table_format(work: Workdir) -> None:
    table = usable(work.key_values(FILE))
    missing = [k for k in ISOLATION if k not in table]
    extra = [k for k in table if k not in ISOLATION]
    if missing or extra:
        fail(
            expected=T("keys_exactly", keys=tuple(ISOLATION)),
            found=T(
                "keys_missing_extra",
                missing=tuple(missing) or T("none"),
                extra=tuple(extra) or T("none"),
            ),
            where=f"{FILE}:{table[extra[0]][1]}" if extra else FILE,
        )
    for key, (value, line) in table.items():
        if value not in ISOLATION_VALUES:
            fail(
                expected=T("one_of", values=ISOLATION_VALUES),
                found=f"{key}={value}" if value else T("key_empty", key=key),
                where=f"{FILE}:{line}",
            )


@check("7.3", 4)
def test_7_3_isolation_table_values(work: Workdir) -> None:
    """Every answer right. A value 7.2 already charged for its form (``Yes``, ``"no"``) is
    judged here by what it means, so one slip of form costs one check, not two; a value that
    means nothing (``maybe``) or a missing key cannot be judged right, and is listed apart
    from the wrong answers, pointing at 7.2."""
    table = usable(work.key_values(FILE))
    answers = {k: _answer(table[k][0]) for k in ISOLATION if k in table}
    wrong = [k for k, a in answers.items() if a is not None and a != ISOLATION[k]]
    # no answer at all (the key left out, or its value empty) is told apart from one that
    # was written but is not yes, no or partial
    missing = [k for k in ISOLATION if k not in table or not table[k][0].strip()]
    unread = [k for k in ISOLATION if answers.get(k) is None and k not in missing]
    if wrong or missing or unread:
        right = len(ISOLATION) - len(wrong) - len(missing) - len(unread)
        found = [T("right_of", right=right, count=len(ISOLATION))]
        if wrong:  # only what was written: the right value is never shown
            found.append(T("wrong_answers", answers=tuple(f"{k}={table[k][0]}" for k in wrong)))
        if missing:
            found.append(T("missing_answers", keys=tuple(missing)))
        if unread:
            found.append(T("unread_answers", keys=tuple(unread)))
        fail(
            expected=T("all_correct", count=len(ISOLATION)),
            found=found,
            where=f"{FILE}:{table[wrong[0]][1]}" if wrong else FILE,
        )
