"""Runs of the learner's ``bin/check-request.sh`` on the sample and the unseen cases.

The learner's runs are most of a grade's time (each one starts the learner's interpreter), so
they start first and run in the background while everything else is read and checked; the
oracle judges the cases while the runs go on. Each run is in the sandbox (time limit, output
cap, every process ended afterwards), and one sandbox supervisor serves all the runs of a
grade, so a run costs the learner's own program and not also a Python start-up of ours.

Each manifest is written to a private temporary directory, never into the learner's work
directory, and passed as the script's only argument. Judging happens when a check asks.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpulab import requestcases
from gpulab.requestcases import Case
from gpushare.lab_api import (
    WORKDIR_ABSENT,
    BackgroundError,
    Context,
    Pending,
    RunResult,
    SandboxError,
    Supervisor,
    T,
    check_runnable,
)

if TYPE_CHECKING:
    from gpushare.lab_api import Sandbox

SCRIPT = "bin/check-request.sh"
TIMEOUT_S = 5.0
OUTPUT_CAP = 16 * 1024
SAMPLES = ("over", "one", "none")


STDERR_LINES = 6  # the end of a traceback: the exception and the lines that raised it
STDERR_CHARS = 600


def stderr_tail(text: str, lines: int = STDERR_LINES, chars: int = STDERR_CHARS) -> str:
    """The last lines of a run's stderr, capped, for the learner to see their own error.

    Control characters (terminal escapes included) are dropped: this is shown in the grader's
    terminal, JSON and XML, where the learner's program must not paint or move anything.
    """
    kept = [
        "".join(ch for ch in line if ch == "\t" or ch.isprintable()).rstrip()
        for line in text.splitlines()
    ]
    kept = [line for line in kept if line.strip()][-lines:]
    tail = "\n".join(kept)
    return tail if len(tail) <= chars else "…" + tail[-(chars - 1) :]


def _no_answer(stdout: str) -> bool:
    """Whether the script printed no answer line at all (no ``OK``, no ``OVER=...``)."""
    over, saw_ok = requestcases.parse_output(stdout)
    return not over and not saw_ok


def _pod_named(case: Case, stdout: str) -> bool:
    """Whether the OVER lines give the right counts under the pods' names instead of the
    containers' (``OVER=trainer-2gpu=2`` for container ``trainer`` of pod ``trainer-2gpu``)."""
    over, _ = requestcases.parse_output(stdout)
    pods = requestcases.pod_names(case.manifest)
    names = {name for name, _ in over}
    return (
        bool(names & pods)
        and sorted(c for _, c in over) == sorted(c for _, c in case.expect_over)
        and names <= pods | {name for name, _ in case.expect_over}
    )


def start(context: Context) -> RequestRuns:
    """Step 6's background work (its ``BACKGROUND``): every run, started now."""
    return RequestRuns.start(
        context.workdir, context.fixtures, context.seed, context.shown_workdir, context.sandbox
    )


@dataclass(slots=True)
class CaseRun:
    """One judged run: the case, what the script did, and the verdict (``reason`` a key)."""

    case: Case
    result: RunResult | None
    error: str | None  # the script could not be executed at all (e.g. no shebang)
    passed: bool
    reason: str


class _Job:
    """One submitted run, collected by a thread of its own (so output caps hold meanwhile)."""

    def __init__(self, name: str, pending: Pending | str) -> None:
        self.name = name
        self.outcome: RunResult | str | None = pending if isinstance(pending, str) else None
        self._thread: threading.Thread | None = None
        if not isinstance(pending, str):
            self._thread = threading.Thread(
                target=self._collect, args=(pending,), name=f"case-{name}", daemon=True
            )
            self._thread.start()

    def _collect(self, pending: Pending) -> None:
        try:
            self.outcome = pending.result()
        except OSError as exc:  # the script could not be executed (e.g. no shebang)
            self.outcome = exc.strerror or str(exc)
        except SandboxError as exc:
            self.outcome = str(exc)

    def wait(self) -> RunResult | str:
        if self._thread is not None:
            self._thread.join()
        return self.outcome if self.outcome is not None else "no result"


class RequestRuns:
    def __init__(
        self,
        workdir: Path,
        seed: int,
        shown_workdir: str | None = None,
        level: Sandbox | None = None,
    ) -> None:
        """``shown_workdir``: the work dir's path as the learner knows it, when ``workdir`` is
        a snapshot's unpacked copy. ``level``: the isolation level of every run (None:
        ``none``; see :mod:`gpushare.sandbox.levels` for which one a grade gets)."""
        self.level = level
        self.workdir = workdir
        self.shown_workdir = shown_workdir or str(workdir.absolute())
        self.seed = seed
        self.script = workdir / SCRIPT
        self.problem = check_runnable(self.script)
        # the script is missing because the whole work dir is: that root, not the script
        self.cause = WORKDIR_ABSENT if self.problem == "missing" and not workdir.is_dir() else None
        self.command = self._command()
        self.samples: list[Case] = []
        self.generated: list[Case] = []
        self._tmp = Path(tempfile.mkdtemp(prefix="gpushare-cases-"))  # only we can read it
        self._supervisor: Supervisor | None = None
        self._supervisor_error = ""
        self._jobs: dict[str, _Job] = {}

    def problem_said(self) -> T:
        """Why the script cannot be run, as the learner's feedback says it."""
        if self.cause == WORKDIR_ABSENT:
            return T("workdir_absent", root=self.shown_workdir)
        return T(f"script_problem_{self.problem}")

    def _command(self) -> list[str] | None:
        """How to start the script, or None when it cannot be run at all.

        A script that only lacks its execute bit is still run through the interpreter its
        ``#!`` line names (as the kernel would), so forgetting ``chmod +x`` costs check 6.1
        alone and the script's logic is still judged by the other checks.
        """
        path = str(self.script.absolute())
        if self.problem is None:
            return [path]
        if self.problem != "not_executable":
            return None
        try:
            with open(self.script, "rb") as fh:
                first = fh.readline(256).decode("utf-8", "replace").strip()
        except OSError:
            return None
        if first.startswith("#!"):
            interpreter = first[2:].strip().split(None, 1)
            if interpreter:
                return [*interpreter, path]
        return ["/bin/sh", path]

    @classmethod
    def start(
        cls,
        workdir: Path,
        fixtures: Path,
        seed: int,
        shown_workdir: str | None = None,
        level: Sandbox | None = None,
    ) -> RequestRuns:
        """Start every run in the background; call from a thread that outlives them."""
        runs = cls(workdir, seed, shown_workdir, level)
        try:
            runs._start(fixtures / "check-request")
        except BaseException:
            runs.close()
            raise
        return runs

    def _start(self, samples_dir: Path) -> None:
        if not samples_dir.is_dir():  # the grader's own fault: no grade (exit 2)
            raise BackgroundError(f"the sample manifests of step 6 are not at {samples_dir}")
        drafts = requestcases.drafts(self.seed)  # the fewest that cover every feature
        if self.command is not None:
            # Started here, in the caller's thread: the supervisor ends with the thread that
            # started it.
            try:
                self._supervisor = Supervisor(sandbox=self.level)
            except (OSError, SandboxError) as exc:
                self._supervisor_error = str(exc)  # each run reports it
            for stem in SAMPLES:
                path = samples_dir / f"{stem}.yaml"
                with open(path, "rb") as fh:  # a missing sample is the grader's fault: raise
                    self._submit(f"sample-{stem}", fh.read())
            for draft in drafts:
                self._submit(draft.name, draft.manifest.encode("utf-8"))
        # The oracle's expectations, while the runs go on.
        self.samples = requestcases.sample_cases(samples_dir)
        self.generated = requestcases.judged(drafts)

    def _submit(self, name: str, manifest: bytes) -> None:
        """Start the run of case ``name`` now, from this thread; a thread collects it."""
        path = self._tmp / name / "manifest.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(manifest)
        pending: Pending | str
        if self._supervisor is None:
            pending = f"the sandbox supervisor could not be started: {self._supervisor_error}"
        else:
            try:
                pending = self._supervisor.submit(
                    [*(self.command or []), str(path)],
                    cwd=self.workdir,
                    timeout=TIMEOUT_S,
                    output_cap=OUTPUT_CAP,
                    readable=[path],  # in the sandbox: the manifest, and nothing else of ours
                )
            except SandboxError as exc:
                pending = str(exc)
        self._jobs[name] = _Job(name, pending)

    def run(self, name: str) -> CaseRun:
        """The judged run of case ``name`` (waits for it to finish)."""
        case = next(c for c in [*self.samples, *self.generated] if c.name == name)
        job = self._jobs.get(name)
        outcome = job.wait() if job is not None else "the script could not be run"
        if isinstance(outcome, str):
            return CaseRun(case, None, outcome, False, "not_run")
        self._as_shown(outcome, name)
        if outcome.timed_out:
            return CaseRun(case, outcome, None, False, "timeout")
        passed, reason = requestcases.judge(case, outcome.returncode or 0, outcome.stdout)
        if outcome.returncode is None or outcome.returncode < 0:
            passed, reason = False, "killed"
        elif not passed and _no_answer(outcome.stdout) and not _no_answer(outcome.stderr):
            # the answer was printed, to standard error (echo ... >&2, print(file=sys.stderr)):
            # the lab reads standard output, and "crashed" would hide the very line they wrote
            reason = "stderr"
        elif not passed and outcome.returncode > 0 and _no_answer(outcome.stdout):
            # an error exit before any answer (a traceback, most often): the script crashed,
            # which "did not print OK" would misdescribe as a wrong answer
            reason = "crashed"
        elif reason in ("missing_over_line", "unexpected_over_line") and _pod_named(
            case, outcome.stdout
        ):
            reason = "pod_name"
        return CaseRun(case, outcome, None, passed, reason)

    def _as_shown(self, outcome: RunResult, name: str) -> None:
        """Our private paths in what the script printed, as the learner knows them.

        A traceback names the manifest's path (in a private folder of this grade) and the
        script's (in a snapshot's scratch folder when grading one): shown as the case's name
        and the learner's own work dir, feedback is the same in every grade of the same work.
        """
        for attr in ("stdout", "stderr"):
            text = getattr(outcome, attr)
            if text:
                text = text.replace(str(self._tmp / name / "manifest.yaml"), f"{name}.yaml")
                text = text.replace(str(self.workdir.absolute()), self.shown_workdir)
                setattr(outcome, attr, text)

    def close(self) -> None:
        """End the runs still going (e.g. step 6 was deselected), clean up."""
        if self._supervisor is not None:
            self._supervisor.close()  # aborts runs still going: their results come at once
        for job in self._jobs.values():
            job.wait()
        shutil.rmtree(self._tmp, ignore_errors=True)
