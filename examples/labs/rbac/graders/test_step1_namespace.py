"""Step 1: the seeded namespace ``shop`` carries the team's label."""

from __future__ import annotations

from rbaclab import NAMESPACE, QUERIES, TEAM_LABEL

from gpushare.lab_api import LabState, T, check, dig, fail

READS = {"namespace": QUERIES["namespace"]}


@check("1.1", 2)
def test_1_1_namespace_has_the_team_label(lab: LabState) -> None:
    ns = lab.read("namespace")
    where = T("where_namespace", namespace=NAMESPACE)
    if ns is None:  # the lab seeds it: only a learner's delete removes it, a reset restores it
        fail(problem=T("namespace_missing", namespace=NAMESPACE), where=where)
    key, value = TEAM_LABEL
    found = dig(ns, "metadata", "labels", key)
    if found != value:
        shown = f"{key}={found}" if isinstance(found, str) else T("no_label", label=key)
        fail(expected=f"{key}={value}", found=shown, where=where)
