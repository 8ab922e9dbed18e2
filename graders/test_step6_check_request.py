"""Step 6: bin/check-request.sh refuses multi-slice requests before deployment.

The learner's script is run for real (see gpushare.requestruns): on the three samples and on
unseen cases generated from the run's seed, which the results record.
"""

from gpushare.checks import T, check, fail
from gpushare.requestruns import SCRIPT, TIMEOUT_S


def _script_ok(runs, strict=False):
    """Fail when the script cannot be run; with ``strict`` also when it is not executable."""
    if runs.problem is not None and (strict or runs.command is None):
        fail(problem=T(f"script_problem_{runs.problem}"), where=SCRIPT)


def _output(run):
    if run.result is None:
        return T("script_not_run", error=run.error or "?")
    if run.reason == "timeout":
        return T("script_timeout", seconds=int(TIMEOUT_S))
    text = " | ".join(ln.strip() for ln in run.result.stdout.splitlines() if ln.strip())
    return T("script_run", rc=run.result.returncode, output=text[:200] or "-")


def _expected(case):
    lines = [f"OVER={n}={c}" for n, c in case.expect_over] or ["OK"]
    return T("script_expect", rc=case.expect_rc, output=" | ".join(lines))


def _sample(runs, stem):
    _script_ok(runs)
    run = runs.sample(stem)
    if not run.passed:
        fail(
            problem=T("script_reason_" + run.reason),
            expected=_expected(run.case),
            found=_output(run),
            where=T(
                "script_case",
                case=f"fixtures/check-request/{stem}.yaml",
                description=run.case.description,
            ),
        )


@check("6.1", 2)
def test_6_1_script_is_executable(request_runs):
    _script_ok(request_runs, strict=True)


@check("6.2", 3)
def test_6_2_sample_over_is_refused(request_runs):
    _sample(request_runs, "over")


@check("6.3", 2)
def test_6_3_sample_one_passes(request_runs):
    _sample(request_runs, "one")


@check("6.4", 2)
def test_6_4_sample_none_passes(request_runs):
    _sample(request_runs, "none")


@check("6.5", 5)
def test_6_5_unseen_cases(request_runs):
    _script_ok(request_runs)
    runs = request_runs.generated_runs()
    wrong = [r for r in runs if not r.passed]
    if wrong:
        first = wrong[0]
        fail(
            problem=T(
                "script_cases_failed",
                failed=len(wrong),
                total=len(runs),
                seed=request_runs.seed,
                case=first.case.name,
            ),
            expected=_expected(first.case),
            found=_output(first),
            where=T("script_case", case=first.case.name, description=first.case.description),
        )
