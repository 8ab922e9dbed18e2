"""The lab's handout (``gpushare lab``): the text of the steps, in the learner's language, paged.

A lab ships its handout as ``graders/handout/<lang>.md``, beside its messages: the learner's
pod has the graders, so it has the handout too, with no network. The language is the one a
grade would speak (``--lang``, ``GPUSHARE_LANG``, the locale); a lab that lacks a handout in it
shows one it has, and says so on stderr, rather than nothing.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from gpushare.locations import graders_dir
from gpushare.reports import messages

PAGER = "less -R"


class HandoutError(Exception):
    """The lab has no handout at all: there is nothing to show."""


def folder() -> Path:
    return graders_dir() / "handout"


def languages() -> tuple[str, ...]:
    """The languages the lab's handout is written in, the default language first."""
    first = messages.lab_default()
    found = (p.stem for p in folder().glob("*.md"))
    return tuple(sorted(found, key=lambda lang: (lang != first, lang)))


def choose(lang: str) -> tuple[str, str | None]:
    """``(language shown, warning)``: ``lang`` when the handout has it, else the first it has
    (the default language first), with a line saying so."""
    have = languages()
    if not have:
        raise HandoutError(f"this lab has no handout ({folder()}/<lang>.md)")
    if lang in have:
        return lang, None
    return have[0], f"the handout has no '{lang}' text; showing '{have[0]}' ({', '.join(have)})"


def text(lang: str) -> str:
    return (folder() / f"{lang}.md").read_text(encoding="utf-8")


def rules(lang: str) -> tuple[str, str | None]:
    """``(text, warning)``: how each step is graded, ``graders/RULES.<lang>.md`` (English is
    ``RULES.md``), else the English rules with a line saying so."""
    path = graders_dir() / ("RULES.md" if lang == "en" else f"RULES.{lang}.md")
    if path.exists():
        return path.read_text(encoding="utf-8"), None
    path = graders_dir() / "RULES.md"
    if not path.exists():
        raise HandoutError(f"this lab states no rules ({graders_dir()}/RULES.md)")
    return path.read_text(encoding="utf-8"), f"the rules have no '{lang}' text; showing 'en'"


def show(body: str) -> None:
    """Write ``body`` through ``$PAGER`` (else ``less -R``) on a terminal, plainly otherwise,
    and plainly too when the pager cannot be started (none installed in a slim image)."""
    out = sys.stdout
    if out.isatty():
        command = shlex.split(os.environ.get("PAGER") or PAGER)
        # less in the C locale would show zh and ko as <E4>
        env = {"LESSCHARSET": "utf-8", **os.environ}
        try:
            subprocess.run(command, input=body.encode(), env=env, check=False)
            return
        except OSError:
            pass
    out.write(body)
    out.flush()
