"""The words of the class report and summary, in the languages of the feedback.

They live in the message catalogs (table ``[class]`` of the engine's
``reports/messages/<lang>.toml``, or of a lab's catalog for a language the engine lacks), beside
the learners' feedback: a test proves every key and placeholder is in every language, and the
punctuation lint and ``make feedback-book`` read them with the rest. Check titles and the
learners' feedback come from the same catalogs (:mod:`gpushare.reports.messages`).
"""

from __future__ import annotations

from gpushare.reports import messages


def text(key: str, lang: str, **params: object) -> str:
    """The instructor's word ``key`` in ``lang`` (English when the language lacks it)."""
    template = messages.catalog(lang)["class"].get(key) or _words()[key]
    return template.format(**params) if params else template


def no_grade(detail: object, why: str, reason: str, lang: str) -> str:
    """Why a submission has no grade, in ``lang``: ``detail`` (the reason as a translatable
    value) said; without one, the sort ``why`` said and then ``reason``, the technical reason
    (English)."""
    if detail is not None:
        return messages.render_value(detail, lang)
    return text("why_said", lang, why=text(f"why_{why}", lang), reason=reason) if why else reason


def has(key: str) -> bool:
    """Whether ``key`` is one of the instructor's words."""
    return key in _words()


def words() -> list[str]:
    """Every instructor's word, in the order they are defined (for a book of them all)."""
    return list(_words())


def _words() -> dict[str, str]:
    return messages.catalog(messages.REFERENCE)["class"]
