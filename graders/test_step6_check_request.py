"""Step 6: bin/check-request.sh refuses multi-slice requests before deployment.

The learner's script is run for real (see gpulab.requestruns): on the three samples and on
unseen cases generated from the run's seed, which the results record. The runs start before
any check, as this step's background work: a check taking ``request_runs`` gets them.
"""

import re
from typing import NoReturn

from gpulab import requestruns
from gpulab.requestruns import SCRIPT, TIMEOUT_S, CaseRun, RequestRuns, stderr_tail
from gpushare.lab_api import T, check, fail

BACKGROUND = {"request_runs": requestruns.start}

# Where the interpreter that ran the script keeps its library and binaries: the sandbox's
# own layout (e.g. /opt/gpushare-python), which is not the learner's and says nothing to
# them. A traceback shows such a path as ``…/lib/python3.11/...`` and an interpreter as its
# name; the learner's own paths (their script, the case's manifest) are left as they are.
_PY_LIB = re.compile(r"(?<![\w.…-])/[^\s\"':]*?(?=/lib/python3(?:\.\d+)?/)")
_PY_BIN = re.compile(r"(?<![\w.…-])/[^\s\"':]*/bin/(python3(?:\.\d+)?)\b")


def neutral_paths(text: str) -> str:
    """``text`` with the interpreter's install paths made neutral (see _PY_LIB)."""
    return _PY_BIN.sub(r"\1", _PY_LIB.sub("…", text))


def _lines(lines: list[str]) -> str | T:
    """Output lines on one line of feedback; "one per line" when there are several, so the
    separator is not taken for part of the output."""
    text = " | ".join(lines)[:200]
    return T("script_lines", lines=text) if len(lines) > 1 else text


# What keeps the script from answering at all, whatever the case: a fault of the run, not of
# an answer. Every check that meets it fails for that one cause, told once (the first check's)
# and pointed to by the others.
RUN_FAULTS = frozenset({"crashed", "timeout", "killed", "not_run", "stderr", "pod_name"})


def _script_ok(runs: RequestRuns, strict: bool = False) -> None:
    """Fail when the script cannot be run; with ``strict`` also when it is not executable."""
    if runs.problem is not None and (strict or runs.command is None):
        # without its execute bit the script is still run, by the interpreter of its #! line
        # (requestruns.RequestRuns._command): this check alone costs, and the hint says so
        fail(
            problem=runs.problem_said(),
            where=SCRIPT,
            hint=T("hint_not_executable") if runs.command is not None else None,
            cause=_fault(runs),
        )


def _fault(runs: RequestRuns) -> str:
    """The cause key of the script's own problem (missing, not executable...), or of the root
    it follows from (the work dir itself is missing)."""
    return runs.cause or f"script:{runs.problem}"


def _output(run: CaseRun) -> T:
    """What the script did: exit status, stdout, and the end of its stderr when it wrote any.

    A crashing script's traceback is on stderr: without it the learner sees only "exit code
    1" and cannot tell a wrong answer from a program that never got to answer.
    """
    if run.result is None:
        return T("script_not_run", error=run.error) if run.error else T("script_reason_not_run")
    if run.reason == "timeout":
        return T("script_timeout", seconds=int(TIMEOUT_S))
    lines = [ln.strip() for ln in run.result.stdout.splitlines() if ln.strip()]
    output = _lines(lines) if lines else T("script_no_output")
    rc = run.result.returncode
    status = T("script_signal", signal=-rc) if rc is not None and rc < 0 else T("script_rc", rc=rc)
    stderr = stderr_tail(neutral_paths(run.result.stderr))
    if stderr:  # on lines of its own, indented under the sentence that introduces it
        stderr = "\n".join("  " + line for line in stderr.splitlines())
        return T("script_run_stderr", status=status, output=output, stderr=stderr)
    return T("script_run", status=status, output=output)


# What the script did wrong, where the check's own hint (what to read in a manifest) would
# send the learner to look at the wrong thing: the hint for what was found.
_REASON_HINTS = {
    "wrong_exit_code": "hint_exit_status",
    "pod_name": "hint_container_name",
    "stderr": "hint_answer_on_stdout",
}


def _wrong(run: CaseRun, problem: T) -> NoReturn:
    """Fail with what the script should have done on the run's case, and what it did."""
    case = run.case
    lines = [f"OVER={n}={c}" for n, c in case.expect_over] or ["OK"]
    hint = _REASON_HINTS.get(run.reason)
    fail(
        problem=problem,
        expected=T("script_run", status=T("script_rc", rc=case.expect_rc), output=_lines(lines)),
        found=_output(run),
        where=T("script_case", case=case.name, description=case.description),
        hint=T(hint) if hint else None,
        # a fault of the script itself, not of one manifest: the same in every case it fails
        cause=f"script:{run.reason}" if run.reason in RUN_FAULTS else None,
    )


def _sample(runs: RequestRuns, stem: str) -> None:
    _script_ok(runs)
    run = runs.run(f"sample-{stem}")
    if not run.passed:
        _wrong(run, T("script_reason_" + run.reason))


@check("6.1", 2)
def test_6_1_script_is_executable(request_runs: RequestRuns) -> None:
    _script_ok(request_runs, strict=True)


@check("6.2", 3)
def test_6_2_sample_over_is_refused(request_runs: RequestRuns) -> None:
    _sample(request_runs, "over")


@check("6.3", 2)
def test_6_3_sample_one_passes(request_runs: RequestRuns) -> None:
    _sample(request_runs, "one")


@check("6.4", 2)
def test_6_4_sample_none_passes(request_runs: RequestRuns) -> None:
    _sample(request_runs, "none")


@check("6.5", 5)
def test_6_5_unseen_cases(request_runs: RequestRuns) -> None:
    _script_ok(request_runs)
    runs = [request_runs.run(c.name) for c in request_runs.generated]
    wrong = [r for r in runs if not r.passed]
    if wrong:
        # the seed is in the results (for a regrade), not in the learner's feedback
        failed = T(
            "script_cases_failed", failed=len(wrong), total=len(runs), case=wrong[0].case.name
        )
        _wrong(wrong[0], failed)
