"""The lab kit's gates (:mod:`gpushare.labkit`) catch what they are there to catch: a check no
mutant aims at, a mutant aimed at no check, a recorded state graded other than its index says,
a check that no state fails or none passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gpushare.labkit import Kit, mutant
from tests.helpers import ROOT

RECORDED = ROOT / "tests" / "recorded"
KIT = Kit(ROOT)


def _states(tmp_path: Path, states: dict[str, tuple[str, list[str]]]) -> Path:
    """A folder of recordings: each id a copy of a recorded state, with the fails given."""
    folder = tmp_path / "recorded"
    folder.mkdir(parents=True)
    for ident, (source, _) in states.items():
        shutil.copy(RECORDED / f"{source}.gpushare.tgz", folder / f"{ident}.gpushare.tgz")
    index = {i: {"fails": f, "what": i} for i, (_, f) in states.items()}
    (folder / "index.json").write_text(json.dumps(index))
    return folder


def test_the_mutant_gate_names_what_no_mutant_aims_at():
    checks = KIT.checks()
    aimed = [mutant("all but the last", checks[:-1]), mutant("a slip", ["1.1", "99.9"])]
    assert KIT.untargeted(aimed) == [checks[-1]]
    assert KIT.unknown(aimed) == ["a slip: 99.9"]


def test_a_state_graded_otherwise_than_its_index_is_named(tmp_path):
    folder = _states(tmp_path, {"claims-1-1": ("reference", ["1.1"])})
    assert KIT.verdict(folder, "claims-1-1") == ["1.1: passed, must fail"]


def test_both_ways_names_a_check_never_failed_or_never_passed(tmp_path):
    folder = _states(tmp_path, {"reference": ("reference", []), "fresh": ("fresh-lab", ["*"])})
    assert KIT.both_ways(folder) == []
    (folder / "extra.gpushare.tgz").write_bytes(b"")
    only_fresh = _states(tmp_path / "b", {"fresh": ("fresh-lab", ["*"])})
    problems = KIT.both_ways(only_fresh)
    assert problems and all(p.endswith("no recorded state passes it") for p in problems)
    assert "extra: recorded, not in index.json" in KIT.both_ways(folder)
