"""The learner's ``bin/readonly.sh`` run on the lab's rules file, in the sandbox the engine
chose (a step's ``BACKGROUND``: started before the checks, closed after them)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from gpushare.lab_api import (
    BackgroundError,
    Context,
    RunResult,
    SandboxError,
    Supervisor,
    check_runnable,
)
from rbaclab import SCRIPT, read_only

TIMEOUT_S = 5.0


class ReadonlyRun:
    """One run of the script on a copy of ``fixtures/rules.txt``; what it must print."""

    def __init__(self, context: Context) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="rbaclab-"))
        sample = self.tmp / "rules.txt"
        shutil.copy(context.fixtures / "rules.txt", sample)
        self.expected = read_only(sample.read_text(encoding="utf-8"))
        script = context.workdir / SCRIPT
        self.problem = check_runnable(script)
        self.result: RunResult | None = None
        if self.problem is not None:
            return
        try:
            with Supervisor(sandbox=context.sandbox) as runner:
                self.result = runner.run(
                    [str(script.absolute()), str(sample)],
                    cwd=context.workdir,
                    timeout=TIMEOUT_S,
                    output_cap=4096,
                    readable=[sample],
                )
        except SandboxError as exc:  # no sandbox to be had: the grade cannot judge the run
            self.close()
            raise BackgroundError(str(exc)) from None
        except OSError:  # no interpreter line, say: the kernel would not run it
            self.problem = "cannot_run"

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def start(context: Context) -> ReadonlyRun:
    return ReadonlyRun(context)
