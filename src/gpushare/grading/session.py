"""One grading run, whoever drives it: pytest (``pytest graders/``) or ``gpushare grade``.

Both get their session from :func:`gpushare.grading.grade.open_session` and call the same
checks of ``graders/`` with the inputs made here (``lab``, ``work``, the steps' background
work); the outcomes become feedback and one :class:`~gpushare.reports.results.Report` here, so
both see the same checks and the same score by construction (a test of ours compares them).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from gpushare.data import JsonObject
from gpushare.feedback import Failure
from gpushare.grading import background
from gpushare.grading.checks import CheckFailed, CheckMeta, T
from gpushare.grading.errors import GradeError
from gpushare.grading.labstate import ClusterUnreadable, LabState
from gpushare.kube.config import Target, resolve
from gpushare.kube.connect import connect
from gpushare.kube.errors import ApiError, KubeconfigError, Unreachable
from gpushare.lab import existing
from gpushare.reports import messages, results
from gpushare.sandbox import runtime
from gpushare.submissions.workdir import Workdir

if TYPE_CHECKING:  # only a snapshot's grade has one, and that grade has imported the module
    from gpushare.submissions.snapshot import Snapshot


class GradeSession:
    def __init__(
        self,
        *,
        setting: background.Setting,
        kubeconfig: str | None,
        cluster: str | None,
        context: str | None = None,
        lang: str,
        started: float | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        """``snapshot``: a loaded :class:`~gpushare.submissions.snapshot.Snapshot` to grade
        instead of a cluster (the ``setting``'s work dir is then its unpacked work dir)."""
        self.setting = setting
        self.kubeconfig = kubeconfig
        self.context = context
        self.cluster = cluster
        self.lang = lang
        self.started = started if started is not None else time.monotonic()
        self.results: dict[str, results.CheckResult] = {}
        self.server: str | None = None
        self.identity: JsonObject | None = None  # what was graded, once connected
        self.snapshot = snapshot
        self.doing = "grade"  # what a cluster that cannot be read stops: "capture" for a snapshot
        self.could_not_grade: str | None = None  # why, when the cluster could not be read
        self.could_not_grade_detail: T | None = None  # the same, in the learner's language
        self.timed_out = False  # the deadline struck: finished checks keep their results
        self.sealed = False
        self.state: LabState | None = None
        self._read_closed = False
        self.background = background.Started()  # what the steps declared, once started
        self.active = False
        # one per session: it caches parsed files
        self.work = Workdir(setting.workdir, snapshot.recorded if snapshot else None)

    def start_background(self, wanted: dict[str, background.Starter]) -> None:
        """Start what of ``wanted`` is not going yet (:func:`background.start_all` chooses the
        sandbox); GradeError when it cannot be had."""
        todo = {k: v for k, v in wanted.items() if k not in self.background.works}
        if not todo:
            return
        try:
            started = background.start_all(todo, self.setting)
        except background.BackgroundError as exc:
            raise GradeError(f"gpushare: {exc}") from None
        self.adopt(started)

    def adopt(self, started: background.Started) -> None:
        """Background work started before this session existed (``gpushare grade`` starts it
        first), now the session's to offer to checks and to end."""
        self.background.works.update(started.works)
        self.background.isolation = started.isolation or self.background.isolation
        started.works = {}  # ours to end now

    def connect(self, grader_modules: Iterable[ModuleType] = ()) -> LabState:
        """Reach the cluster and start its read, with the dry-runs the graders declare; the read.

        Which cluster: ``--kubeconfig``, else ``$KUBECONFIG``, else the lab, as it is (see
        :mod:`gpushare.kube.config`). Anything that keeps us from talking to it, a lab that
        is not up included, is a :class:`GradeError`: one line, exit status 2.
        """
        self.active = True
        modules = list(grader_modules)
        reads: dict[str, str] = {}
        hint_reads: dict[str, str] = {}
        for module in modules:  # what each step reads of the cluster
            reads.update(getattr(module, "READS", None) or {})
            hint_reads.update(getattr(module, "HINT_READS", None) or {})
        if self.snapshot is not None:  # the cluster as captured: no apiserver at all
            manifest = self.snapshot.manifest
            self.identity = {
                **manifest["cluster"],
                "snapshot": str(self.snapshot.path),
                "snapshot_sha256": self.snapshot.digest,
                "learner": manifest["learner"],
                "captured_at": manifest["captured_at"],
            }
            self.server = self.identity.get("server")
            self.identity.update(self._runtimes(manifest.get("runtime") or {}))
            self.state = LabState.recorded(self.snapshot.cluster, reads, hint_reads)
            return self.state
        # graded as it is: never started or repaired (a node the learner deleted stays deleted)
        target = resolve(self.kubeconfig, self.context, self.cluster)
        try:
            client, identity = connect(target, timeout=3.0)
            self.identity = asdict(identity)
            self.server = client.server
            client.get("/version")
            client.timeout = 10.0
        except Exception as exc:  # anything on the way: one line, exit 2
            raise GradeError("gpushare: " + self._unreached(target, exc)) from None
        dry_runs: list[tuple[str, JsonObject]] = []
        for module in modules:  # and the server-side dry-runs it declares
            declare = getattr(module, "dry_runs", None)
            if callable(declare):
                dry_runs.extend(declare(self.work))
        self.state = LabState(client, dry_runs, reads, hint_reads).start()
        return self.state

    def _unreached(self, target: Target, exc: Exception) -> str:
        """Why the cluster could not be talked to, and what to do about it."""
        if isinstance(exc, KubeconfigError):
            if target.is_lab and target.cluster and not Path(target.kubeconfig).exists():
                return existing.not_up(target.cluster, self.doing)
            return str(exc)
        if isinstance(exc, Unreachable):
            hint = (
                f"Start the lab with `make up` (or `gpushare up --cluster {target.cluster}`)"
                if target.is_lab
                else "Check that cluster"
            )
            return (
                f"could not {self.doing}: {exc} ({target.source} {target.kubeconfig}). "
                f"{hint}, or pass --kubeconfig FILE for another cluster."
            )
        if isinstance(exc, ApiError):
            return (
                f"could not {self.doing}: the apiserver at {self.server} refused us "
                f"({exc}); check the credentials in {target.kubeconfig}"
            )
        return f"could not {self.doing} ({target.kubeconfig}): {exc}"

    def graded(self) -> JsonObject | None:
        """What was graded, as every result records it; live, with the kube-system namespace's
        uid: which cluster this is, whatever its address."""
        if self.identity is None or self.snapshot is not None:
            return self.identity
        value = self.state.get("kube-system").value if self.state else None
        return {**self.identity, "uid": ((value or {}).get("metadata") or {}).get("uid")}

    def _runtimes(self, learner: dict[str, str]) -> dict[str, str]:
        """The learner's python3 and PyYAML (as captured) against those the script gets here,
        so a grade says so where they differ (a script may behave differently on another)."""
        if self.setting.unsafe_no_sandbox:
            # lazy: 5 ms that a live grade never needs (a snapshot's grade has it loaded)
            from gpushare.submissions.snapshot import learner_runtime

            here = learner_runtime()
        else:
            found = runtime.find()
            here = {"python3": found.python_version, "pyyaml": found.pyyaml_version or "none"}

        def show(r: dict[str, str]) -> str:
            return f"python3 {r.get('python3', '?')}, PyYAML {r.get('pyyaml', '?')}"

        def minor(version: str) -> str:
            return ".".join(str(version).split(".")[:2])

        out = {"runtime_learner": show(learner), "runtime_grader": show(here)}
        if any(minor(learner.get(k, "?")) != minor(here.get(k, "?")) for k in here):
            out["runtime_note"] = (
                f"the learner's script had {show(learner)}; it ran here with {show(here)}"
            )
        return out

    def lab(self) -> LabState:
        """The cluster read, once all of it is in; ClusterUnreadable if any part is not.

        Every check that judges the cluster waits for the whole read, so that under both entry
        points the same checks become errors when the grader could not read.
        """
        state = self.state
        if state is None:
            raise RuntimeError("the cluster was never read: connect() first")  # a bug of ours
        problem = state.wait_all()
        if problem is not None:
            raise problem
        return state

    def inputs(self) -> dict[str, object]:
        """What a check may ask for, by parameter name (``lab`` is :meth:`lab`, on demand)."""
        return {"work": self.work, **self.background.works}

    def close(self, wait: bool = True) -> None:
        """End the background work; wait for the cluster read unless a deadline struck (a
        read may then be the very thing that hangs)."""
        if self.state is not None and wait and not self._read_closed:
            self._read_closed = True  # both entry points may close twice: once is enough
            self.state.close()
            shutdown = getattr(self.state.client, "shutdown", None)  # the official client's pool
            if shutdown is not None:
                shutdown()
        self.background.close()

    # -- outcomes -------------------------------------------------------------------

    def feedback(self, exc: BaseException) -> tuple[Failure, str]:
        """(the failure as data, the kind of error) for a check that raised; put in words only
        when an output is written (``messages.render``). The kind: "" for the learner's own
        failure, "cluster" when the cluster could not be read (void: exit 2, no score),
        "grader" for a bug of ours."""
        whole = isinstance(exc, ApiError | Unreachable)
        if whole:  # a read outside LabState: same verdict
            exc = ClusterUnreadable("the cluster", str(exc))
        if isinstance(exc, ClusterUnreadable):
            if self.could_not_grade is None:
                self.could_not_grade = str(exc)[:500]
                self.could_not_grade_detail = (
                    T("could_not_read_cluster", error=exc.reason[:300])
                    if whole
                    else T("could_not_read", what=exc.what[:200], error=exc.reason[:300])
                )
            problem = T("api_error", error=str(exc)[:300])
            return Failure(problem=problem, kind="cluster", cause="grader:cluster"), "cluster"
        if isinstance(exc, CheckFailed):
            return exc.failure, ""
        error = f"{type(exc).__name__}: {exc}"[:300]
        failure = Failure(problem=T("grader_error", error=error), kind="grader", check_hint=False)
        return failure, "grader"

    def time_out(self, metas: list[CheckMeta], nodeids: list[str], running: str | None) -> None:
        """The deadline struck: every check without a result becomes an error saying what was
        still running; later results of the checks' thread are ignored."""
        seconds = round(time.monotonic() - self.started, 1)
        self.timed_out = True
        self.could_not_grade = (
            f"the time limit ({seconds} s) was reached while check {running or '-'} was running"
        )
        self.could_not_grade_detail = (
            T("time_limit_during", seconds=seconds, check=running)
            if running
            else T("time_limit", seconds=seconds)
        )
        for meta, nodeid in zip(metas, nodeids, strict=True):
            if meta["number"] in self.results:
                continue
            what = "running" if meta["number"] == running else "not started"
            problem = T("timed_out", seconds=seconds, state=T(f"timed_out_{what}"))
            self._store(meta, nodeid, False, Failure(problem=problem, kind="timeout"), "timeout")
        self.sealed = True

    def headline(self, number: str) -> str:
        return f"{number} {messages.title(number, self.lang)}"

    def said(self, number: str) -> str:
        """Check ``number``'s feedback as the report will say it (pytest's own output)."""
        report = self.report()
        return next((report.said(c) for c in report.checks if c.number == number), "")

    def record(
        self, meta: CheckMeta, nodeid: str, passed: bool, failure: Failure | None, error: str
    ) -> None:
        if self.sealed:  # after a time-out: the results are final
            return
        number = meta["number"]
        if number in self.results:
            if not passed and failure is not None:  # a teardown failure after a pass
                self.results[number].fail(failure, error)
            return
        self._store(meta, nodeid, passed, failure, error)

    def _store(
        self, meta: CheckMeta, nodeid: str, passed: bool, failure: Failure | None, error: str
    ) -> None:
        number = meta["number"]
        self.results[number] = results.CheckResult(
            number=number,
            step=meta["step"],
            title=messages.title(number, self.lang),
            max_score=meta["points"],
            score=meta["points"] if passed else 0,
            passed=passed,
            failure=failure,
            error=error,
            nodeid=nodeid,
        )

    def report(self) -> results.Report:
        shown = self.setting.shown_workdir
        ordered = sorted(self.results.values(), key=lambda r: results.number_key(r.number))
        return results.Report(
            checks=ordered,
            execution_time=time.monotonic() - self.started,
            lang=self.lang,
            seed=self.setting.seed,
            workdir=str(self.setting.workdir if shown is None else shown),
            server=self.server,
            cluster=self.graded(),
            could_not_grade=self.could_not_grade,
            could_not_grade_detail=self.could_not_grade_detail,
            timed_out=self.timed_out,
            isolation=self.background.isolation,
            workdir_absent=self.snapshot is None and self.work.absent,
        )
