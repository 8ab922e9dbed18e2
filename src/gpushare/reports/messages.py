"""Feedback in the learner's language, from message catalogs that are data.

A language's catalog is one or two files, merged table by table, the lab's over the engine's:

- the engine's, ``messages/<lang>.toml`` here: the labels of a feedback block (``[labels]``),
  the values the engine itself says (``[values]``), and the instructor's words of the class
  report (``[class]``, read by :mod:`gpushare.classroom.texts`);
- the lab's, ``messages/<lang>.toml`` in its graders folder: its step names (``[labels]
  step<N>``), each check's title and hint (``[checks."<step>.<n>"]``) and its graders' values.
  It may hold the engine's tables too: a lab adds a language the engine lacks with this one
  file. The lab's ``glossary.toml`` fixes its terms in each language (tests/test_feedback.py).

A language is a file ``<two letters>.toml`` in either folder whose merged catalog is complete:
every key of the reference (English), with the same placeholders; :func:`gaps` names what an
incomplete one lacks, and it is not offered. The TOML files are read once per process, with no
build step: an edited catalog is what the next grade shows.
"""

from __future__ import annotations

import os
import string
import sys
import tomllib
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TypedDict

from gpushare.feedback import CheckFailed, Failure
from gpushare.feedback import T as T  # re-exported, as from_data and to_data: said values
from gpushare.feedback import from_data as from_data
from gpushare.feedback import to_data as to_data
from gpushare.lab import definition
from gpushare.locations import graders_dir

# One language's words, in the four tables a catalog file may hold (this form because "class"
# is a keyword). A check's entry holds its "title" and "hint".
Catalog = TypedDict(
    "Catalog",
    {
        "labels": dict[str, str],
        "values": dict[str, str],
        "class": dict[str, str],
        "checks": dict[str, dict[str, str]],
    },
)

CATALOGS = Path(__file__).with_name("messages")
REFERENCE = "en"  # the catalog every other language must be complete against


def langs() -> tuple[str, ...]:
    """The languages offered, the lab's default first, then by name: every language with a
    catalog file (the engine's or the lab's in use) whose catalog is complete."""
    offered = [lang for lang in found() if not gaps(lang)]
    first = lab_default()
    return tuple(sorted(offered, key=lambda lang: (lang != first, lang)))


def lab_default() -> str:
    """The learners' language of the lab in use: ``default_lang`` of its ``lab.toml``; the
    reference where there is no lab (every lab has it complete)."""
    lab = definition.found()
    return lab.default_lang if lab else REFERENCE


def found() -> frozenset[str]:
    """Every language with a catalog file, complete or not."""
    return _found(_lab_texts())


def gaps(lang: str) -> list[str]:
    """What ``lang``'s catalog lacks against the reference: each key missing, and each key
    whose placeholders are not the reference's. Empty: the language is complete."""
    return list(_gaps(lang, _lab_texts()))


def resolve_lang(option: str | None, *, instructor: bool = False, locale: bool = True) -> str:
    """``--lang``, else ``GPUSHARE_LANG``, else the locale (LC_ALL, LC_MESSAGES, LANG) when the
    lab offers it, else English for an instructor's command, the lab's :func:`lab_default` for a
    learner. A fallback the lab does not offer becomes a language it has, with a warning, rather
    than feedback half of whose texts are missing.

    The one place a language is chosen: each entry point (``gpushare.cli.choose_lang``, the
    pytest plugin) calls it once and passes the language down. ``locale=False``: a Gradescope
    bundle is built on the instructor's machine for learners elsewhere. ValueError for a
    language not offered.
    """
    for value in (option, os.environ.get("GPUSHARE_LANG")):
        if value:
            return offered(value)
    for var in ("LC_ALL", "LC_MESSAGES", "LANG") if locale else ():
        value = os.environ.get(var, "")
        if value and value not in ("C", "POSIX") and not value.startswith("C."):
            lang = value.lower()[:2]
            if lang in found() and not gaps(lang):
                return lang
            break
    wanted = REFERENCE if instructor else lab_default()
    have = langs()
    if wanted in have or not have:
        return wanted
    chosen = REFERENCE if REFERENCE in have else have[0]
    _warn_once(f"gpushare: the lab has no complete {wanted} texts; using {chosen} (--lang)")
    return chosen


@cache
def _warn_once(text: str) -> None:
    print(text, file=sys.stderr)


def offered(value: str) -> str:
    """``value`` as a language code (``"en_US"`` -> ``"en"``) when it is offered; ValueError
    (the usage error's text) when not. Reads no environment: for a language already chosen."""
    lang = value.strip().lower()[:2]
    if lang in found() and not gaps(lang):
        return lang
    missing = gaps(lang) if lang in found() else []  # an incomplete one: what it lacks
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    what = f"its catalog is incomplete ({len(missing)} to write: {shown})" if missing else "unknown"
    raise ValueError(f"language {value!r}: {what}; choose one of {', '.join(langs())}")


def _lab_texts() -> Path:
    return graders_dir() / "messages"


@cache
def _found(lab: Path) -> frozenset[str]:
    # a language's file is named by its two-letter code, so glossary.toml is none
    return frozenset(p.stem for folder in (CATALOGS, lab) for p in folder.glob("[a-z][a-z].toml"))


@cache
def _gaps(lang: str, lab: Path) -> tuple[str, ...]:
    reference, have = flat(_merged(REFERENCE, lab)), flat(_merged(lang, lab))
    out = []
    for key, text in reference.items():
        if key not in have:
            out.append(f"{key} (missing)")
        elif placeholders(have[key]) != placeholders(text):
            out.append(f"{key} (placeholders: {' '.join(sorted(placeholders(text))) or 'none'})")
    return tuple(out)


def catalog(lang: str) -> Catalog:
    """The catalog of ``lang``: the engine's, with the lab's (of the graders in use) over it.
    A language with no file (a stranger's results.json may name any) has empty tables."""
    return _merged(lang, _lab_texts())


def flat(words: Catalog) -> dict[str, str]:
    """A catalog as one mapping: ``labels.sep``, ``values.absent``, ``checks.1.1.title``..."""
    tables = {"labels": words["labels"], "values": words["values"], "class": words["class"]}
    tables.update({f"checks.{number}": entry for number, entry in words["checks"].items()})
    return {
        f"{table}.{key}": text for table, entries in tables.items() for key, text in entries.items()
    }


@cache
def _merged(lang: str, lab: Path) -> Catalog:
    """The engine's file, then the lab's over it, table by table. Both are the authors' (the
    engine's and the lab's), not strangers': :func:`gaps` is their lint."""
    merged: Catalog = {"labels": {}, "values": {}, "class": {}, "checks": {}}
    if lang not in _found(lab):
        return merged
    for path in (CATALOGS / f"{lang}.toml", lab / f"{lang}.toml"):
        if not path.is_file():
            continue
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for table in ("labels", "values", "class", "checks"):
            merged[table].update(data.get(table, {}))
    return merged


class _Safe(dict[str, str]):
    """Format mapping that leaves an unknown placeholder visible instead of raising."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def placeholders(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def render_value(value: object, lang: str) -> str:
    if value is None:
        return ""
    # A tuple enumerates names (keys, nodes: "yes、no、partial"), a list strings clauses
    # together ("4 of 5 right; wrong: ..."): each in the language's own punctuation.
    if isinstance(value, tuple):
        return label("enum_sep", lang).join(render_value(v, lang) for v in value)
    if isinstance(value, list):
        return label("list_sep", lang).join(render_value(v, lang) for v in value)
    if isinstance(value, T):
        template = catalog(lang)["values"].get(value.key) or catalog(REFERENCE)["values"].get(
            value.key, value.key
        )
        params = {k: render_value(v, lang) for k, v in value.params.items()}
        return template.format_map(_Safe(params))
    return str(value)


def _check(number: str, lang: str) -> dict[str, str]:
    return catalog(lang)["checks"].get(number) or catalog(REFERENCE)["checks"].get(number) or {}


def title(number: str, lang: str) -> str:
    return _check(number, lang).get("title", number)


def untitled(numbers: Iterable[str], lang: str = REFERENCE) -> list[str]:
    """The checks among ``numbers`` that lack a title or a hint in ``lang``'s catalog, each as
    ``5.6 (title, hint)``: such a check is shown as its bare number, with nothing to guide."""
    checks = catalog(lang)["checks"]
    out = []
    for number in numbers:
        entry = checks.get(number) or {}
        lacks = [key for key in ("title", "hint") if not str(entry.get(key) or "").strip()]
        if lacks:
            out.append(f"{number} ({', '.join(lacks)})")
    return out


def warn_untitled(numbers: Iterable[str]) -> None:
    """Warn once on stderr of the checks the reference catalog gives no title or hint: the
    lab's texts lack them in every language (any other language lacking them is incomplete)."""
    lacking = [n for n in untitled(numbers) if n not in _warned]
    if lacking:
        _warned.update(lacking)
        where = _lab_texts() / f"{REFERENCE}.toml"
        print(
            f"gpushare: warning: no text in {where} for check {', '.join(lacking)}: it is "
            'shown as its number, with no hint (add [checks."<number>"] title and hint in '
            "every language)",
            file=sys.stderr,
        )


_warned: set[str] = set()


def hint(number: str, lang: str) -> str:
    return _check(number, lang).get("hint", "")


def label(key: str, lang: str) -> str:
    return catalog(lang)["labels"][key]


def step_name(step: int, lang: str) -> str:
    """A step's name (``[labels] step<N>``); a new step without one yet is shown by number."""
    for source in (lang, REFERENCE):
        name = catalog(source)["labels"].get(f"step{step}")
        if name:
            return name
    return f"{label('step', lang)} {step}" if "step" in catalog(lang)["labels"] else f"{step}"


def labelled(key: str, value: str, lang: str) -> str:
    """``<label><sep><value>``, punctuated as the language does: "预期：8", "Expected: 8"."""
    return f"{label(key, lang)}{label('sep', lang)}{value}"


_SENTENCE_ENDS = (".", "?", "!", "。", "？", "！", "다", "요")


def render(
    number: str,
    failure: Failure | CheckFailed,
    lang: str,
    *,
    root: tuple[str, Failure] | None = None,
) -> str:
    """The learner's feedback for one failed check, from its data: what every output writes.
    ``root``: (number, failure) of the earlier check of the same cause; then one line points to
    it ("See 1.3: ...") instead of repeating its diagnosis."""
    if root is not None:
        check, cause = root
        # the root's diagnosis in one sentence: its problem, else what it found when that is a
        # sentence of its own ("sharing.timeSlcing (line 5): ... Did you mean ...?"), else its
        # title (what it found is then a bare value: "absent")
        why = render_value(cause.problem if cause.problem is not None else cause.found, lang)
        if why.rstrip().endswith(_SENTENCE_ENDS):
            return render_value(T("follows_from", check=check, why=why), lang)
        return render_value(T("follows_check", check=check, title=title(check, lang)), lang)
    return render_failure(number, failure, lang)


def render_failure(number: str, failure: Failure | CheckFailed, lang: str) -> str:
    """The learner's feedback for one failed check: problem, expected, found, where, hint."""
    if isinstance(failure, CheckFailed):
        failure = failure.failure
    lines = [] if failure.problem is None else [render_value(failure.problem, lang)]
    fields = {"expected": failure.expected, "found": failure.found, "where": failure.where}
    for key, value in fields.items():
        if value is not None and value != "":
            lines.append(labelled(key, render_value(value, lang), lang))
    if failure.kind:  # the grader could not judge: not the learner's mistake, and whom to tell
        lines.append(render_value(T("grader_side"), lang))
    text = hint(number, lang) if failure.check_hint else ""
    if failure.hint is not None:  # a failure whose check's hint would mislead carries its own
        text = render_value(failure.hint, lang)
    if text:
        lines.append(labelled("hint", text, lang))
    return "\n".join(lines)
