"""The fast tier (issue 12): the graders on recorded lab states, with no cluster at all.

Every state the full tier plays on a real lab (the fresh lab, the reference solution, every
mutant) was captured from one by ``tests/record_states.py`` (``make record``); here each is
graded offline, in-process, and must fail exactly the checks it failed live, through the lab
kit's gates (:mod:`gpushare.labkit`, as any lab's tests call them). The full tier proves that
offline grading matches live grading (``tests.helpers.run_grade``); this tier lets a
developer run the graders on every change in seconds. The recordings were written by the
gpushare of their time: that they grade the same is what keeps an old snapshot gradable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare.labkit import Kit
from gpushare.submissions import snapshot
from tests.helpers import ROOT

RECORDED = Path(__file__).with_name("recorded")
KIT = Kit(ROOT)


@pytest.mark.parametrize("ident", sorted(KIT.index(RECORDED)))
def test_recorded_state_fails_exactly_its_checks(ident):
    assert KIT.verdict(RECORDED, ident) == []


def test_recordings_are_of_the_current_format(tmp_path):
    """A format change must come with new recordings (`make record`)."""
    files = sorted(RECORDED.glob("*.gpushare.tgz"))
    for i, path in enumerate(files):
        assert snapshot.load(path, tmp_path / str(i)).manifest["format"] == snapshot.FORMAT


def test_every_check_is_proven_both_ways():
    """Each check fails on some recorded state and passes on another, and the index and the
    recordings name the same states."""
    assert KIT.both_ways(RECORDED) == []
