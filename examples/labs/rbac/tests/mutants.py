"""Broken submissions, each aimed at the checks it must fail (exactly those): the lab kit's
mutant gate holds every check to one, and ``record.py`` records each for the offline gates."""

from __future__ import annotations

from pathlib import Path

from gpushare.labkit import Lab, Mutant, kubectl, mutant


def _unlabel(lab: Lab, _: Path) -> None:
    kubectl(lab, "label", "namespace", "shop", "team-")


def _may_delete(lab: Lab, _: Path) -> None:
    add = '[{"op": "add", "path": "/rules/0/verbs/-", "value": "delete"}]'
    kubectl(lab, "-n", "shop", "patch", "role", "pod-reader", "--type=json", "-p", add)


def _default_account(lab: Lab, _: Path) -> None:
    swap = '[{"op": "replace", "path": "/subjects/0/name", "value": "default"}]'
    kubectl(
        lab, "-n", "shop", "patch", "rolebinding", "auditor-reads-pods", "--type=json", "-p", swap
    )


def _verbs_as_one_string(work: Path) -> None:
    path = work / "rbac.yaml"
    text = path.read_text()
    path.write_text(text.replace('verbs: ["get", "list", "watch"]', 'verbs: "get, list, watch"'))


def _prints_every_verb(work: Path) -> None:
    (work / "bin/readonly.sh").write_text('#!/bin/sh\ncat "$1"\n')


MUTANTS: list[Mutant] = [
    mutant("namespace without the team label", {"1.1"}, cluster=_unlabel),
    mutant("role that may delete pods too", {"2.1"}, cluster=_may_delete),
    mutant("binding to the default service account", {"2.2"}, cluster=_default_account),
    mutant("file's role with its verbs as one string", {"2.3"}, files=_verbs_as_one_string),
    mutant("script prints every verb", {"3.1"}, files=_prints_every_verb),
]
