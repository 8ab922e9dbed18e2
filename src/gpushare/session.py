"""One grading run, independent of who drives it: pytest (``pytest graders/``) or
``gpushare grade``'s own runner.

Both entry points call the same check functions from ``graders/`` with the same three inputs
(``lab``, ``work``, ``request_runs``) made here, turn their outcome into feedback here, and
add up the same :class:`~gpushare.results.Report`; so they see the same checks and the same
score by construction, and a test of ours compares the two.
"""

from __future__ import annotations

import time
from pathlib import Path

from gpushare import messages, results
from gpushare.checks import CheckFailed, T
from gpushare.kubeapi import ApiError, Unreachable
from gpushare.workdir import Workdir

TYPE_CHECKING = False  # not ``typing`` at run time: see gpushare.records
if TYPE_CHECKING:
    from typing import Any


class GradeError(Exception):
    """Grading cannot happen (cluster unreachable, bad kubeconfig): one line, exit status 2."""


class GradeSession:
    def __init__(
        self,
        *,
        workdir: Path,
        kubeconfig: str | None,
        cluster: str | None,
        lang: str,
        seed: int | None,
        fixtures: Path | None = None,
        runs: Any = None,
        started: float | None = None,
    ) -> None:
        """``runs``: the learner's runs if the caller started them already (``gpushare grade``
        does, before importing this module), with the same workdir, fixtures and seed."""
        from gpushare.locations import default_fixtures
        from gpushare.requestruns import new_seed

        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.cluster = cluster
        self.lang = lang
        self.seed: int = seed if seed is not None else new_seed()
        self.fixtures = fixtures or default_fixtures()
        self.started = started if started is not None else time.monotonic()
        self.results: dict[str, results.CheckResult] = {}
        self.server: str | None = None
        self.state: Any = None
        self.runs: Any = runs
        self.active = False
        self.work = Workdir(workdir)  # one per session: it caches parsed files

    def start_runs(self) -> None:
        """Start the learner script's runs (the slowest part of a grade) in the background."""
        if self.runs is None:
            from gpushare.requestruns import RequestRuns

            self.runs = RequestRuns.start(self.workdir, self.fixtures, self.seed)

    def drop_runs(self) -> None:
        if self.runs is not None:
            self.runs.close()
            self.runs = None

    def connect(self) -> None:
        """Reach the cluster (starting the lab unless a kubeconfig is given), start the read."""
        from gpushare.kubeapi import Client, KubeconfigError
        from gpushare.labstate import LabState

        self.active = True
        where = f"--kubeconfig {self.kubeconfig}"
        try:
            if self.kubeconfig:
                client = Client.from_kubeconfig(self.kubeconfig, timeout=3.0)
            else:
                from gpushare import cluster as lab_cluster

                lab = lab_cluster.up(self.cluster)
                client = lab.client(timeout=3.0)
                where = f"cluster {lab.name}"
            self.server = client.server
            client.get("/version")
            client.timeout = 10.0
        except KubeconfigError as exc:
            raise GradeError(f"gpushare: {exc}") from None
        except Unreachable as exc:
            raise GradeError(
                f"gpushare: {exc} ({where}). Start the lab with `make up` "
                "(or `gpushare up`), or pass --kubeconfig FILE for another cluster."
            ) from None
        except ApiError as exc:
            raise GradeError(
                f"gpushare: the apiserver refused us ({exc}); check the kubeconfig"
            ) from None
        except Exception as exc:  # a cluster that cannot be brought up: one line, exit 2
            raise GradeError(f"gpushare: cannot start the lab cluster: {exc}") from None
        self.state = LabState(client).start()

    def inputs(self) -> dict[str, Any]:
        """What a check may ask for, by parameter name."""
        return {"lab": self.state, "work": self.work, "request_runs": self.runs}

    def close(self) -> None:
        if self.state is not None:
            self.state.close()
        self.drop_runs()

    # -- outcomes -------------------------------------------------------------------

    def feedback(self, number: str, exc: BaseException) -> tuple[str, bool]:
        """(the learner's feedback, whether it is a grader error) for a check that raised."""
        if isinstance(exc, ApiError | Unreachable):
            # the cluster could not be read: the check fails, but it is not a grader bug
            exc = CheckFailed(problem=T("api_error", error=str(exc)[:300]))
        if isinstance(exc, CheckFailed):
            return messages.render_failure(number, exc, self.lang), False
        return messages.render_error(number, exc, self.lang), True

    def headline(self, number: str) -> str:
        return f"{number} {messages.title(number, self.lang)}"

    def record(
        self, meta: dict[str, Any], nodeid: str, passed: bool, output: str, error: bool
    ) -> None:
        number = meta["number"]
        if number in self.results:
            if not passed:  # a teardown failure after a pass: the check is failed after all
                self.results[number].fail(output, error)
            return
        self.results[number] = results.CheckResult(
            number=number,
            step=meta["step"],
            title=messages.title(number, self.lang),
            max_score=meta["points"],
            score=meta["points"] if passed else 0,
            passed=passed,
            output=output,
            error=error,
            nodeid=nodeid,
        )

    def report(self) -> results.Report:
        ordered = sorted(self.results.values(), key=lambda r: results.number_key(r.number))
        return results.Report(
            checks=ordered,
            execution_time=time.monotonic() - self.started,
            lang=self.lang,
            seed=self.seed,
            workdir=str(self.workdir),
            server=self.server,
        )
