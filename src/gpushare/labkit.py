"""The gates that prove a lab, as a module the lab's own tests call (as pytest ships
``Pytester`` for plugin authors); the engine's tests and any other lab's use the same.

- **the mutant gate**: every check is aimed at by some mutant (a broken submission that must
  fail exactly the checks it names), and no mutant names a check the lab does not have
  (:meth:`Kit.untargeted`, :meth:`Kit.unknown`);
- **the recorded states**: each state recorded from a real lab (``<id>.gpushare.tgz`` and an
  ``index.json`` of what each must fail; ``"*"``: every check) grades offline to exactly its
  failures, with no grader error and feedback on every failure (:meth:`Kit.verdict`);
- **both ways**: every check passes on some recorded state and fails on another, so none can
  pass or fail whatever it is given (:meth:`Kit.both_ways`).

:meth:`Kit.record` records on a live lab of its own the fresh lab, the reference solution
(``solutions/solve.sh``) and each :class:`Mutant` on top of it, captured as a learner's
``snapshot`` would be; a cluster mutant changes the lab with :func:`kubectl`. A lab's test file
(``examples/labs/rbac/tests/test_gates.py``)::

    KIT = labkit.Kit(Path(__file__).parents[1])
    def test_gates():
        assert KIT.untargeted(MUTANTS) == [] and KIT.both_ways(RECORDED) == []
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gpushare.grading import capture, grade, runner
from gpushare.lab import binaries, cluster, solve
from gpushare.lab.cluster import Lab as Lab  # what a cluster mutant is given
from gpushare.reports.results import Report
from gpushare.sandbox import isolation

# The folders a lab's parts may be moved to one by one; the kit points at the whole lab.
_PARTS = ("GPUSHARE_GRADERS", "GPUSHARE_FIXTURES", "GPUSHARE_SOLUTIONS")


@dataclass(frozen=True)
class Mutant:
    """A broken submission aimed at ``fails`` (check numbers), exactly those: ``files`` edits a
    copy of the solved work dir; ``cluster(lab, workdir)`` changes the solved lab as a learner
    would (kubectl), and leaves it dirty."""

    id: str
    fails: frozenset[str]
    files: Callable[[Path], None] | None = None
    cluster: Callable[[cluster.Lab, Path], None] | None = None


def kubectl(lab: cluster.Lab, *args: str, input: str | None = None) -> str:
    """The pinned kubectl run against ``lab`` as a learner types it (what a cluster mutant
    uses); its output, or CalledProcessError with what it said."""
    exe = binaries.find("kubectl")
    if exe is None:
        raise RuntimeError("kubectl is not built: run `gpushare setup`")
    argv = [str(exe), "--kubeconfig", str(lab.kubeconfig), *args]
    done = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=120)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
    return done.stdout


def mutant(
    id: str,
    fails: Iterable[str],
    files: Callable[[Path], None] | None = None,
    cluster: Callable[[cluster.Lab, Path], None] | None = None,
) -> Mutant:
    return Mutant(id, frozenset(fails), files, cluster)


class Kit:
    """The gates of the lab in folder ``lab`` (its ``graders/``, ``fixtures/``, ``solutions/``)."""

    def __init__(self, lab: Path) -> None:
        self.lab = Path(lab).resolve()

    @contextlib.contextmanager
    def using(self) -> Iterator[None]:
        """The engine pointed at this lab (``GPUSHARE_LAB``) while inside, as it was after."""
        saved = {k: os.environ.pop(k, None) for k in ("GPUSHARE_LAB", *_PARTS)}
        os.environ["GPUSHARE_LAB"] = str(self.lab)
        try:
            yield
        finally:
            for key, value in saved.items():
                os.environ.pop(key, None)
                if value is not None:
                    os.environ[key] = value

    def checks(self) -> list[str]:
        """Every check number of the lab's graders, in order."""
        with self.using():
            return [c.meta["number"] for c in runner.load_checks(self.lab / "graders")]

    # -- the mutant gate -------------------------------------------------------------

    def untargeted(self, mutants: Iterable[Mutant]) -> list[str]:
        """The checks no mutant fails: each could pass whatever it is given, unproven."""
        aimed = set().union(*(m.fails for m in mutants))
        return [n for n in self.checks() if n not in aimed]

    def unknown(self, mutants: Iterable[Mutant]) -> list[str]:
        """``mutant: check`` for each check a mutant names that the lab does not have."""
        have = set(self.checks())
        return [f"{m.id}: {n}" for m in mutants for n in sorted(m.fails - have)]

    # -- recorded states ------------------------------------------------------------

    def index(self, recorded: Path) -> dict[str, list[str]]:
        """What each recorded state must fail, by its id (``["*"]``: every check)."""
        data = json.loads((recorded / "index.json").read_text(encoding="utf-8"))
        return {ident: list(entry["fails"]) for ident, entry in sorted(data.items())}

    def grade(self, snapshot: Path, *, lang: str = "en", seed: int = 7) -> Report:
        """The report of a snapshot graded offline, in process. The states are the lab's own
        recordings (its reference and mutants): where no sandbox can be had here, they run
        without one."""
        unsafe = not isolation.probe().available
        with self.using():
            options = grade.Options(
                snapshot=snapshot, lang=lang, seed=seed, unsafe_no_sandbox=unsafe
            )
            return grade.grade(options).report

    def verdict(self, recorded: Path, ident: str) -> list[str]:
        """What is wrong with recorded state ``ident``'s grade; empty: it fails exactly the
        checks its index names, with no grader error and feedback on every failure."""
        report = self.grade(recorded / f"{ident}.gpushare.tgz")
        want = self.index(recorded)[ident]
        expected = {c.number for c in report.checks} if want == ["*"] else set(want)
        failed = {c.number for c in report.checks if not c.passed}
        problems = [f"{c.number}: grader error: {report.said(c)}" for c in report.checks if c.error]
        problems += [f"{n}: passed, must fail" for n in sorted(expected - failed)]
        problems += [f"{n}: failed, must pass" for n in sorted(failed - expected)]
        problems += [
            f"{c.number}: failed with no feedback"
            for c in report.checks
            if not c.passed and not report.said(c).strip()
        ]
        if report.score != sum(c.max_score for c in report.checks if c.passed):
            problems.append(f"score {report.score} is not the sum of the passed checks")
        return problems

    def both_ways(self, recorded: Path) -> list[str]:
        """The checks that no recorded state fails, or that none passes; and any state on disk
        that the index lacks (or the other way)."""
        index = self.index(recorded)
        on_disk = {p.name.removesuffix(".gpushare.tgz") for p in recorded.glob("*.gpushare.tgz")}
        problems = [f"{i}: recorded, not in index.json" for i in sorted(on_disk - set(index))]
        problems += [f"{i}: in index.json, not recorded" for i in sorted(set(index) - on_disk)]
        every = self.checks()
        fails = [set(every) if f == ["*"] else set(f) for f in index.values()]
        for number in every:
            if not any(number in f for f in fails):
                problems.append(f"{number}: no recorded state fails it")
            if all(number in f for f in fails):
                problems.append(f"{number}: no recorded state passes it")
        return problems

    # -- recording, on a live lab ---------------------------------------------------

    def down(self, cluster_name: str) -> None:
        """Take down the lab of ``cluster_name`` (its data and ports go)."""
        with self.using():
            cluster.down(cluster_name)

    def record(self, cluster_name: str, recorded: Path, mutants: Iterable[Mutant]) -> Path:
        """Record the fresh lab, the reference solution and each mutant on a lab of
        ``cluster_name`` (made if need be; left up), into ``recorded`` with its index."""
        states: dict[str, tuple[Path, list[str], str]] = {}
        with self.using(), tempfile.TemporaryDirectory(prefix="gpushare-record-") as tmp_name:
            tmp = Path(tmp_name)
            lab = cluster.up(cluster_name)

            def keep(ident: str, workdir: Path, fails: list[str], what: str) -> None:
                out = capture.take(workdir, kubeconfig=str(lab.kubeconfig), learner=ident, out=tmp)
                states[ident] = (out, fails, what)

            work = tmp / "solved"
            dirty = [True]  # the lab does not hold the reference solution

            def solved() -> Path:
                if dirty[0]:
                    cluster.reset(lab.name)
                    shutil.rmtree(work, ignore_errors=True)
                    solutions = self.lab / "solutions"
                    solve.solve(work, kubeconfig=str(lab.kubeconfig), solutions=solutions)
                    dirty[0] = False
                return work

            cluster.reset(lab.name)
            (tmp / "empty").mkdir()
            keep("fresh-lab", tmp / "empty", ["*"], "a fresh lab and an empty work dir")
            keep("reference", solved(), [], "the reference solution")
            for m in mutants:
                copy = tmp / f"w-{len(states)}"
                shutil.copytree(solved(), copy, symlinks=True)
                if m.files is not None:
                    m.files(copy)
                if m.cluster is not None:
                    dirty[0] = True
                    m.cluster(lab, copy)
                slug = re.sub(r"[^a-z0-9]+", "-", m.id.lower()).strip("-")[:60]  # its file's name
                keep(slug, copy, sorted(m.fails), m.id)
            recorded.mkdir(parents=True, exist_ok=True)
            for old in recorded.glob("*.gpushare.tgz"):
                old.unlink()
            for ident, (path, _, _) in states.items():
                shutil.copy(path, recorded / f"{ident}.gpushare.tgz")
        index = {i: {"fails": f, "what": w} for i, (_, f, w) in states.items()}
        text = json.dumps(index, indent=1, sort_keys=True) + "\n"
        (recorded / "index.json").write_text(text, encoding="utf-8")
        return recorded
