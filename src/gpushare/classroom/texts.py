"""The words of the class report and summary, in the three languages of the feedback.

They live in the message catalogs, one file per language (``reports/messages/<lang>.toml``,
table ``[class]``), beside the learners' feedback: a test proves every key and placeholder is in
all three, and the punctuation lint and ``make feedback-book`` read them with the rest. Check
titles and the learners' feedback come from the same catalogs (:mod:`gpushare.reports.messages`).
"""

from __future__ import annotations

from gpushare.reports import messages


def _words(lang: str) -> dict[str, str]:
    table = messages.catalog(lang).get("class") if lang in messages.LANGS else None
    return table if isinstance(table, dict) else {}


def text(key: str, lang: str, **params: object) -> str:
    """The instructor's word ``key`` in ``lang`` (English when the language lacks it)."""
    template = _words(lang).get(key) or _words("en")[key]
    return template.format(**params) if params else template


def has(key: str) -> bool:
    """Whether ``key`` is one of the instructor's words."""
    return key in _words("en")


def languages() -> list[str]:
    return sorted(messages.LANGS)


def words() -> list[str]:
    """Every instructor's word, in the order they are defined (for a book of them all)."""
    return list(_words("en"))
