"""The lab's gates, through the lab kit: every check is aimed at by a mutant, every recorded
state grades to exactly its failures, and every check is proven both ways. Offline: no
cluster, the recordings of ``record.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare.labkit import Kit
from mutants import MUTANTS

LAB = Path(__file__).resolve().parents[1]
RECORDED = LAB / "tests" / "recorded"
KIT = Kit(LAB)


def test_every_check_is_targeted_by_a_mutant() -> None:
    assert KIT.untargeted(MUTANTS) == []
    assert KIT.unknown(MUTANTS) == []


@pytest.mark.parametrize("ident", sorted(KIT.index(RECORDED)))
def test_recorded_state_fails_exactly_its_checks(ident: str) -> None:
    assert KIT.verdict(RECORDED, ident) == []


def test_every_check_is_proven_both_ways() -> None:
    assert KIT.both_ways(RECORDED) == []
