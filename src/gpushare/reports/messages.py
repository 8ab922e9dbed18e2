"""Feedback in the learner's language, from message catalogs that are data.

Two catalogs make each language's, merged table by table, the lab's over the engine's:

- the engine's, ``messages/<lang>.toml`` here: the labels of a feedback block, the values the
  engine itself says (``[values]``: "the file does not exist", a snapshot refused, a grade
  that could not be taken), and the instructor's words of the class report (``[class]``, read
  by :mod:`gpushare.classroom.texts`). The languages are these files;
- the lab's, ``messages/<lang>.toml`` in its graders folder: its step names (``[labels]
  step<N>``), each check's title and hint (``[checks."<step>.<n>"]``) and the values its
  graders say. Its ``glossary.toml`` fixes the word for each of its terms in each language;
  tests/test_feedback.py holds the catalogs to it.

Chinese is the default; Korean and English are complete too (a test proves every key and
placeholder exists in all three). The TOML files are read as they are, once per process
(``tomllib``): an edited catalog is what the next grade shows, with no build step in between.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpushare.grading.checks import CheckFailed


@dataclass(init=False)
class T:
    """A translatable value: a catalog key under ``[values]`` and its parameters.

    Checks and readers of learners' files say what they found as these, never as prose; the
    catalogs of this module turn them into the learner's language.
    """

    key: str
    params: Any

    def __init__(self, key: str, /, **params: Any) -> None:
        self.key = key
        self.params = params


CATALOGS = Path(__file__).with_name("messages")
DEFAULT_LANG = "zh"
# The languages are the engine's catalog files present: a new language is one file here (and
# the lab's texts in it, with its words in the lab's glossary). The default first, then by name.
LANGS = tuple(
    sorted(
        (p.stem for p in CATALOGS.glob("*.toml")),
        key=lambda lang: (lang != DEFAULT_LANG, lang),
    )
)


def resolve_lang(option: str | None) -> str:
    """``--lang``, else ``GPUSHARE_LANG``, else the locale (LC_ALL, LC_MESSAGES, LANG), else zh."""
    for value in (option, os.environ.get("GPUSHARE_LANG")):
        if value:
            lang = value.strip().lower()[:2]
            if lang not in LANGS:
                raise ValueError(f"unknown language {value!r}; choose one of {', '.join(LANGS)}")
            return lang
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var, "")
        if value and value not in ("C", "POSIX") and not value.startswith("C."):
            lang = value.lower()[:2]
            return lang if lang in LANGS else DEFAULT_LANG
    return DEFAULT_LANG


def catalog(lang: str) -> dict[str, Any]:
    """The catalog of ``lang``: the engine's, with the lab's (of the graders in use) over it."""
    from gpushare.locations import graders_dir

    return _merged(lang, graders_dir() / "messages")


@cache
def _merged(lang: str, lab: Path) -> dict[str, Any]:
    import tomllib

    merged: dict[str, Any] = {}
    for path in (CATALOGS / f"{lang}.toml", lab / f"{lang}.toml"):
        if path.is_file():
            for table, entries in tomllib.loads(path.read_text(encoding="utf-8")).items():
                merged.setdefault(table, {}).update(entries)
    merged.setdefault("checks", {})
    return merged


class _Safe(dict):  # type: ignore[type-arg]
    """Format mapping that leaves an unknown placeholder visible instead of raising."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def placeholders(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def render_value(value: Any, lang: str) -> str:
    if value is None:
        return ""
    # A tuple enumerates names (keys, nodes: "yes、no、partial"), a list strings clauses
    # together ("4 of 5 right; wrong: ..."): each in the language's own punctuation.
    if isinstance(value, tuple):
        return label("enum_sep", lang).join(render_value(v, lang) for v in value)
    if isinstance(value, list):
        return label("list_sep", lang).join(render_value(v, lang) for v in value)
    if isinstance(value, T):
        template = catalog(lang)["values"].get(value.key) or catalog("en")["values"].get(
            value.key, value.key
        )
        params = {k: render_value(v, lang) for k, v in value.params.items()}
        return template.format_map(_Safe(params))
    return str(value)


def title(number: str, lang: str) -> str:
    entry = catalog(lang)["checks"].get(number) or catalog("en")["checks"].get(number) or {}
    return entry.get("title", number)


def hint(number: str, lang: str) -> str:
    entry = catalog(lang)["checks"].get(number) or catalog("en")["checks"].get(number) or {}
    return entry.get("hint", "")


def label(key: str, lang: str) -> str:
    return catalog(lang)["labels"][key]


def step_name(step: int, lang: str) -> str:
    """A step's name (``[labels] step<N>``); a new step without one yet is shown by number."""
    for source in (lang, "en"):
        name = catalog(source)["labels"].get(f"step{step}")
        if name:
            return str(name)
    return f"{label('step', lang)} {step}" if "step" in catalog(lang)["labels"] else f"{step}"


def labelled(key: str, value: str, lang: str) -> str:
    """``<label><sep><value>``, punctuated as the language does: "预期：8", "Expected: 8"."""
    return f"{label(key, lang)}{label('sep', lang)}{value}"


def render_failure(number: str, failure: CheckFailed, lang: str) -> str:
    """The learner's feedback for one failed check: problem, expected, found, where, hint."""
    lines = []
    if failure.problem is not None:
        lines.append(render_value(failure.problem, lang))
    for key in ("expected", "found", "where"):
        value = getattr(failure, key)
        if value is not None and value != "":
            lines.append(labelled(key, render_value(value, lang), lang))
    own = getattr(failure, "hint", None)  # a failure whose check's hint would mislead
    text = render_value(own, lang) if own is not None else hint(number, lang)
    if text:
        lines.append(labelled("hint", text, lang))
    return "\n".join(lines)


def render_error(number: str, exc: BaseException, lang: str) -> str:
    """Feedback for a grader that raised unexpectedly: the learner loses nothing silently."""
    return render_value(T("grader_error", error=f"{type(exc).__name__}: {exc}"[:300]), lang)


def to_data(value: Any) -> Any:
    """A translatable value as JSON data (``{"key": ..., "params": {...}}``), so a reason kept in
    a results.json can be said again later in another language (a class report's)."""
    if isinstance(value, T):
        return {"key": value.key, "params": {k: to_data(v) for k, v in value.params.items()}}
    if isinstance(value, tuple | list):
        return [to_data(v) for v in value]
    return value if isinstance(value, str | int | float) or value is None else str(value)


def from_data(data: Any) -> Any:
    """The inverse of :func:`to_data`; anything else read back (a file is a stranger's) is text,
    and a key no catalog knows shows as itself rather than failing a report."""
    if isinstance(data, dict) and isinstance(data.get("key"), str):
        params = data.get("params") if isinstance(data.get("params"), dict) else {}
        return T(data["key"], **{str(k): from_data(v) for k, v in params.items()})
    if isinstance(data, list):
        return tuple(from_data(v) for v in data)
    return data if isinstance(data, str | int | float) or data is None else str(data)
