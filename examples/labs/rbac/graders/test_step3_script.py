"""Step 3: ``bin/readonly.sh RULES`` keeps only the read verbs of each line of a rules file.

The script runs for real, in the sandbox, on the lab's rules file (``fixtures/rules.txt``), as
this step's background work: the check taking ``readonly_run`` gets it.
"""

from __future__ import annotations

from rbaclab import SCRIPT, runs
from rbaclab.runs import ReadonlyRun

from gpushare.lab_api import T, check, fail

BACKGROUND = {"readonly_run": runs.start}


@check("3.1", 4)
def test_3_1_script_keeps_the_read_verbs(readonly_run: ReadonlyRun) -> None:
    result = readonly_run.result
    if readonly_run.problem is not None or result is None:
        fail(problem=T(f"script_{readonly_run.problem or 'cannot_run'}"), where=SCRIPT)
    if result.timed_out:
        fail(problem=T("script_timed_out", seconds=runs.TIMEOUT_S), where=SCRIPT)
    printed = [line.rstrip() for line in result.stdout.splitlines() if line.strip()]
    if printed != readonly_run.expected:
        fail(
            expected=" | ".join(readonly_run.expected),
            found=" | ".join(printed)[:300] or T("no_output"),
            where=SCRIPT,
        )
