"""A regrade diff: whose score changed against an earlier class folder, by how much, and which
checks flipped (passed, failed or not judged). Rows are matched by their folder: the learner,
or with ``--all`` the learner and snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpushare.classroom.gradebook import Row
from gpushare.reports.results import number_key


@dataclass
class Change:
    """One submission whose grade is not what it was."""

    folder: str
    before: Row | None  # None: new in this run
    after: Row | None  # None: not in this run
    flips: list[tuple[str, str, str]] = field(default_factory=list)  # (number, was, is)

    @property
    def delta(self) -> int | None:
        if self.before is None or self.after is None:
            return None
        if self.before.score is None or self.after.score is None:
            return None
        return self.after.score - self.before.score


@dataclass
class Diff:
    previous: str  # the earlier folder, as named on the command line
    compared: int  # submissions in both runs
    changes: list[Change]


def compare(previous: str, before: list[Row], after: list[Row], *, partial: bool = False) -> Diff:
    """What changed from ``before`` to ``after``; ``partial`` (a shard): rows missing from
    ``after`` are another shard's, not gone."""
    old = {r.folder: r for r in before}
    new = {r.folder: r for r in after}
    changes = []
    compared = 0
    for folder in sorted(set(old) | set(new)):
        was, now = old.get(folder), new.get(folder)
        if now is None:
            if not partial:
                changes.append(Change(folder, was, None))
            continue
        if was is None:
            changes.append(Change(folder, None, now))
            continue
        compared += 1
        flips = []
        for number in sorted(set(was.cells) | set(now.cells), key=number_key):
            a = was.cells[number].state if number in was.cells else "absent"
            b = now.cells[number].state if number in now.cells else "absent"
            if a != b:
                flips.append((number, a, b))
        if flips or was.score != now.score or was.status != now.status:
            changes.append(Change(folder, was, now, flips))
    return Diff(previous, compared, changes)


def lines(diff: Diff, words: dict[str, str]) -> list[str]:
    """The diff for a terminal, one line per change: ``ada  80 -> 90 (+10)  2.1 failed->passed``.
    ``words``: the translated "new" and "gone"."""
    out = []
    for c in diff.changes:
        if c.before is None:
            out.append(f"  {c.folder}: {words['new']} ({_score(c.after)})")
            continue
        if c.after is None:
            out.append(f"  {c.folder}: {words['gone']} ({_score(c.before)})")
            continue
        delta = c.delta
        shift = f" ({delta:+d})" if delta is not None else ""
        flips = ", ".join(f"{n} {a}->{b}" for n, a, b in c.flips)
        out.append(
            f"  {c.folder}: {_score(c.before)} -> {_score(c.after)}{shift}"
            + (f"  {flips}" if flips else "")
        )
    return out


def _score(row: Row | None) -> str:
    if row is None:
        return "-"
    return str(row.score) if row.score is not None else row.status
