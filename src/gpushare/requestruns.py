"""Runs of the learner's ``bin/check-request.sh`` on the sample and the unseen cases.

All runs start together in the background when grading begins (they dominate a grade's wall
time otherwise), each in the sandbox: time limit, output cap, every process ended afterwards.
Each manifest is written to a private temporary directory, never into the learner's work
directory, and passed as the script's only argument.
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpushare import requestcases, sandbox

SCRIPT = "bin/check-request.sh"
TIMEOUT_S = 5.0
OUTPUT_CAP = 16 * 1024
GENERATED = 6


@dataclass(frozen=True)
class CaseRun:
    case: requestcases.Case
    result: sandbox.RunResult | None
    error: str | None  # the script could not be executed at all (e.g. no shebang)
    passed: bool
    reason: str


class RequestRuns:
    def __init__(self, workdir: Path, fixtures: Path, seed: int) -> None:
        self.workdir = workdir
        self.seed = seed
        self.script = workdir / SCRIPT
        self.problem = sandbox.check_runnable(self.script)
        self.command = self._command()
        self.samples = requestcases.sample_cases(fixtures / "check-request")
        self.generated = requestcases.generate(seed, GENERATED)
        self._tmp = Path(tempfile.mkdtemp(prefix="gpushare-cases-"))
        self._pool: ThreadPoolExecutor | None = None
        self._runs: dict[str, Future[CaseRun]] = {}

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
    def start(cls, workdir: Path, fixtures: Path, seed: int) -> RequestRuns:
        runs = cls(workdir, fixtures, seed)
        if runs.command is not None:
            runs._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="case")
            for case in [*runs.samples, *runs.generated]:
                runs._runs[case.name] = runs._pool.submit(runs._run, case)
        return runs

    def _run(self, case: requestcases.Case) -> CaseRun:
        path = self._tmp / case.name / "manifest.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(case.manifest, encoding="utf-8")
        try:
            result = sandbox.run_untrusted(
                [*(self.command or []), str(path)],
                cwd=self.workdir,
                timeout=TIMEOUT_S,
                output_cap=OUTPUT_CAP,
            )
        except (OSError, sandbox.SandboxError) as exc:
            return CaseRun(
                case,
                None,
                exc.strerror or str(exc) if isinstance(exc, OSError) else str(exc),
                False,
                "not_run",
            )
        if result.timed_out:
            return CaseRun(case, result, None, False, "timeout")
        passed, reason = requestcases.judge(case, result.returncode or 0, result.stdout)
        if result.returncode is None or result.returncode < 0:
            passed, reason = False, "killed"
        return CaseRun(case, result, None, passed, reason)

    def run(self, name: str) -> CaseRun:
        return self._runs[name].result()

    def sample(self, stem: str) -> CaseRun:
        return self.run(f"sample-{stem}")

    def generated_runs(self) -> list[CaseRun]:
        return [self.run(c.name) for c in self.generated]

    def close(self) -> None:
        if self._pool is not None:
            # runs not started yet are not needed any more (e.g. step 6 was deselected)
            self._pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self._tmp, ignore_errors=True)
