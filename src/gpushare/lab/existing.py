"""Which lab clusters exist on this machine, and what to say when the one asked for is not up.

A misspelt ``GPUSHARE_CLUSTER`` names a lab that does not exist. A grade, a capture or `make
grade` must never create it: the learner's work is in the lab they meant, and an empty new lab
graded 0 reads as if that work were gone. So the answer names the labs that exist and suggests
the closest one. Only ``os``, ``pathlib`` and ``difflib``: a grade that cannot start anyway
should say so at once.
"""

from __future__ import annotations

import difflib

from gpushare.locations import kwok_workdir, lab_dir


def labs() -> list[str]:
    """The names of the lab clusters that exist here (kwokctl wrote their kubeconfig)."""
    try:
        folders = list((kwok_workdir() / "clusters").iterdir())
    except OSError:
        return []
    return sorted(p.name for p in folders if (p / "kubeconfig.yaml").is_file())


def closest(name: str, among: list[str]) -> str | None:
    """The existing lab ``name`` most likely misspells, if one is close enough."""
    found = difflib.get_close_matches(name, among, n=1, cutoff=0.6)
    return found[0] if found else None


def not_up(name: str, doing: str | None = "grade") -> str:
    """One line (without the ``gpushare:`` of a command's errors): the lab ``name`` does not
    exist; the labs that do, the closest one first.

    ``doing``: what could not be done ("grade", "capture"; None: a warning only). It offers to
    create ``name`` only when no lab exists at all: with others there, a new one is most likely
    a typo's."""
    kubeconfig = lab_dir(name) / "kubeconfig.yaml"
    head = f"the lab {name} does not exist (no {kubeconfig})."
    head = f"could not {doing}: {head}" if doing else head
    others = [n for n in labs() if n != name]
    if not others:
        return (
            f"{head} No lab exists here yet: start it with `make up` (or `gpushare up "
            f"--cluster {name}`), or pass --kubeconfig FILE for another cluster."
        )
    near = closest(name, others)
    listed = ", ".join(others)
    if near is not None:
        return (
            f"{head} The labs here: {listed}. Did you mean {near}? Then set "
            f"GPUSHARE_CLUSTER={near} (or pass --cluster {near})."
        )
    return (
        f"{head} The labs here: {listed}; name one with GPUSHARE_CLUSTER=NAME (or --cluster "
        f"NAME), or start {name} with `gpushare up --cluster {name}`."
    )
