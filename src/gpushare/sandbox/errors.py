"""The sandbox's own failure, at the bottom of the room: the supervisor raises it, and the
isolation levels build theirs on it, without importing each other for it."""


class SandboxError(RuntimeError):
    """The supervisor failed (died, hung or could not set up); cleanup was best-effort only.

    Distinct from a bad script, which yields a RunResult: this one is the grader's problem — or a
    script that killed or stopped its own reaper or the master.
    """
