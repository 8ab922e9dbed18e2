"""``report.html``: one self-contained page about a class, for the instructor.

A score histogram, the pass rate of each step and of each check as bar charts (SVG written by
:mod:`gpushare.classroom.charts`, inline in the page, text kept as text so the browser draws
Chinese and Korean with its own fonts), the most common failure reasons of each check with
counts and example learners, the regrade diff when there is one, the submissions that could not
be graded, and every submission with links to its results. No script, no stylesheet or font
from elsewhere: the file can be mailed or opened from a USB stick.
"""

from __future__ import annotations

import bisect
import html
import re
import statistics
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from gpushare import __version__
from gpushare.classroom import charts, feedback, flags, texts
from gpushare.classroom.diff import Diff
from gpushare.classroom.gradebook import CheckInfo, Row, columns, write_text
from gpushare.classroom.texts import text
from gpushare.reports import clean, messages

REPORT_NAME = "report.html"
TOP_REASONS = 5
EXAMPLES = 3
_PASS, _FAIL, _MID, _BLUE = "#2e7d32", "#c62828", "#f9a825", "#0969da"


def write(
    path: Path,
    rows: list[Row],
    checks: list[CheckInfo],
    lang: str,
    *,
    seed: int,
    diff: Diff | None = None,
) -> Path:
    return write_text(path, render(rows, checks, lang, seed=seed, diff=diff))


def render(
    rows: list[Row], checks: list[CheckInfo], lang: str, *, seed: int, diff: Diff | None = None
) -> str:
    """The whole page as one string."""
    t = _Words(lang)
    graded = [r for r in rows if r.status != "error"]
    errors = [r for r in rows if r.status == "error"]
    steps, numbers = columns(rows, checks)
    parts = [
        _head(t("title"), lang),
        f"<h1>{_e(t('title'))}</h1>",
        f'<p class="meta">{_e(t("made_by", version=__version__, seed=seed, n=len(rows)))}</p>',
        _summary(t, rows, graded, errors),
        _isolation(t, graded),
    ]
    if diff is not None:
        parts.append(_diff(t, diff))
    parts.append(_histogram(t, graded))
    parts.append(_step_rates(t, graded, steps))
    parts.append(_check_rates(t, graded, numbers))
    parts.append(_failures(t, graded, numbers, lang))
    if errors:
        parts.append(_errors(t, errors))
    if any(r.flags for r in rows):
        parts.append(_flagged(t, rows))
    parts.append(_everyone(t, rows))
    parts.append("</body></html>\n")
    return "\n".join(parts)


class _Words:
    def __init__(self, lang: str) -> None:
        self.lang = lang

    def __call__(self, key: str, **params: object) -> str:
        return text(key, self.lang, **params)


def _e(value: object) -> str:
    # bidi overrides and controls shown, not obeyed
    return html.escape(clean.text(value), quote=True)


def _table(t: _Words, *heads: str, attrs: str = "") -> str:
    """A table's start: its header row, a column per word."""
    return f"<table{attrs}><tr>" + "".join(f"<th>{_e(t(h))}</th>" for h in heads) + "</tr>"


def _link(row: Row, name: str) -> str:
    return quote(f"{row.folder}/{name}")


def _head(title: str, lang: str) -> str:
    html_lang = messages.catalog(lang)["class"].get("html_lang") or lang  # its catalog says
    return f"""<!DOCTYPE html>
<html lang="{html_lang}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>
body {{ font-family: {charts.font_stack(lang)}; margin: 2rem auto;
  max-width: 1100px; padding: 0 1rem; color: #1f2328; line-height: 1.45; }}
h1 {{ margin-bottom: .2rem; }} h2 {{ margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; }}
h3 {{ margin: 1.4rem 0 .4rem; font-size: 1.05rem; }}
.meta, .note {{ color: #59636e; font-size: .9rem; }}
.cards {{ display: flex; flex-wrap: wrap; gap: .8rem; margin: 1rem 0; }}
.card {{ border: 1px solid #d0d7de; border-radius: 8px; padding: .6rem 1rem; min-width: 7rem; }}
.card b {{ display: block; font-size: 1.5rem; }}
table {{ border-collapse: collapse; width: 100%; margin: .4rem 0 1rem; font-size: .92rem; }}
th, td {{ border-bottom: 1px solid #d8dee4; padding: .3rem .5rem; text-align: left;
  vertical-align: top; }}
th {{ background: #f6f8fa; }} td.n {{ text-align: right; white-space: nowrap; }}
.passed {{ color: {_PASS}; }} .failed {{ color: {_FAIL}; }} .error {{ color: #8250df; }}
.up {{ color: {_PASS}; font-weight: 600; }} .down {{ color: {_FAIL}; font-weight: 600; }}
figure {{ margin: .5rem 0; }} figure svg {{ width: 100%; height: auto; }}
code {{ font-size: .88em; }}
table.reasons {{ table-layout: fixed; }} table.reasons th:nth-child(1) {{ width: 66%; }}
table.reasons th:nth-child(2) {{ width: 8%; }} table.reasons td {{ overflow-wrap: anywhere; }}
</style></head><body>"""


def _isolation(t: _Words, graded: list[Row]) -> str:
    """The banner: at which isolation level learners' scripts ran, loud when at ``none``."""
    counts = Counter(r.isolation or "?" for r in graded)
    if not counts:
        return ""
    levels = ", ".join(f"{level} ({n})" for level, n in sorted(counts.items()))
    out = f'<p class="meta">{_e(t("isolation_used", levels=levels))}</p>'
    if counts.get("none"):
        out += f'<p class="warning"><b>{_e(t("isolation_none", n=counts["none"]))}</b></p>'
    return out


def stats(scores: list[int]) -> dict[str, object]:
    """The scores' mean, median, lowest and highest, as the report and the summary write them."""
    mean, median = f"{statistics.fmean(scores):.1f}", f"{statistics.median(scores):g}"
    return {"mean": mean, "median": median, "low": min(scores), "high": max(scores)}


def _summary(t: _Words, rows: list[Row], graded: list[Row], errors: list[Row]) -> str:
    scores = [r.score for r in graded if r.score is not None]
    cards: list[tuple[str, object]] = [
        (t("submissions"), len(rows)),
        (t("graded"), len(graded)),
        (t("errors"), len(errors)),
    ]
    if scores:
        said = stats(scores)
        cards += [
            (t("mean"), said["mean"]),
            (t("median"), said["median"]),
            (t("lowest"), said["low"]),
            (t("highest"), said["high"]),
            (t("all_passed"), sum(1 for r in graded if r.status == "passed")),
        ]
    inner = "".join(f'<div class="card">{_e(label)}<b>{_e(v)}</b></div>' for label, v in cards)
    return f'<div class="cards">{inner}</div>'


# --------------------------------------------------------------------------- plots


def _figure(t: _Words, heading: str, svg: str) -> str:
    """A chart under its heading."""
    return f"<h2>{_e(t(heading))}</h2>\n<figure>{svg}</figure>"


def _histogram(t: _Words, graded: list[Row]) -> str:
    """Learners per score bin: bins of a twentieth of the maximum score, the last holding it."""
    scores = [r.score for r in graded if r.score is not None]
    top = max([r.max_score for r in graded] or [100]) or 100
    step = max(1, round(top / 20))
    edges: list[float] = list(range(0, top + step, step))
    if edges[-1] < top:
        edges.append(top)
    edges[-1] = edges[-1] + 0.001  # the last bin holds the full score
    counts = [0] * (len(edges) - 1)
    for score in scores:
        at = bisect.bisect_right(edges, score) - 1
        if 0 <= at < len(counts):
            counts[at] += 1
    most = max(counts, default=0)
    bars = [
        charts.Bar(lo, hi, n, _BLUE) for lo, hi, n in zip(edges, edges[1:], counts, strict=False)
    ]
    svg = charts.vertical(
        bars,
        span=(0, top + 0.5),
        top=max(1.0, most * 1.05),
        xlabel=t("score"),
        ylabel=t("learners"),
        lang=t.lang,
        height=236,
        integer=True,
        edge="#ffffff",
    )
    return _figure(t, "histogram", svg)


def _rate_bars(rates: list[float]) -> list[charts.Bar]:
    """A bar per pass rate, at 0, 1, ..., green from 80 %, amber from 50 %, its percentage on it."""
    return [
        charts.Bar(i - 0.4, i + 0.4, r * 100, _rate_color(r), f"{r:.0%}")
        for i, r in enumerate(rates)
    ]


def _rate_color(rate: float) -> str:
    return _PASS if rate >= 0.8 else _MID if rate >= 0.5 else _FAIL


def _step_rates(t: _Words, graded: list[Row], steps: list[int]) -> str:
    rates = []
    for step in steps:
        judged = [r for r in graded if any(c.step == step for c in r.cells.values())]
        ok = sum(1 for r in judged if all(c.passed for c in r.cells.values() if c.step == step))
        rates.append(ok / len(judged) if judged else 0.0)
    svg = charts.vertical(
        _rate_bars(rates),
        span=(-0.6, len(steps) - 0.4),
        top=110,
        xlabel="",
        ylabel=f"{t('pass_rate')} (%)",
        lang=t.lang,
        height=216,
        categories=[(i, t("step", n=s)) for i, s in enumerate(steps)],
    )
    return _figure(t, "step_rates", svg)


def check_rates(graded: list[Row], numbers: list[str]) -> dict[str, tuple[int, int]]:
    """check -> (passed, judged) over the graded submissions (not-judged checks left out)."""
    out = {}
    for n in numbers:
        cells = [r.cells[n] for r in graded if n in r.cells and not r.cells[n].error]
        out[n] = (sum(1 for c in cells if c.passed), len(cells))
    return out


def _check_rates(t: _Words, graded: list[Row], numbers: list[str]) -> str:
    rates = [(p / j if j else 0.0) for p, j in check_rates(graded, numbers).values()]
    xlabel = f"{t('pass_rate')} (%)"
    svg = charts.horizontal(_rate_bars(rates), numbers, top=110, xlabel=xlabel, lang=t.lang)
    return _figure(t, "check_rates", svg)


# --------------------------------------------------------------------------- tables


def common_failures(
    graded: list[Row], number: str, lang: str | None = None
) -> list[tuple[str, int, list[Row]]]:
    """(reason, count, learners) of check ``number``'s failures, most common first; grouped
    by their problem's key and said in ``lang`` (see classroom.feedback)."""
    by_reason: dict[str, list[Row]] = {}
    for r in graded:
        cell = r.cells.get(number)
        if cell is not None and not cell.passed and not cell.error:
            by_reason.setdefault(feedback.reason(cell, lang), []).append(r)
    ranked = sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(k, len(v), v) for k, v in ranked]


def _failures(t: _Words, graded: list[Row], numbers: list[str], lang: str) -> str:
    out = [f"<h2>{_e(t('failures'))}</h2>", f'<p class="note">{_e(t("failures_note"))}</p>']
    counts = check_rates(graded, numbers)
    any_failed = False
    for n in numbers:
        reasons = common_failures(graded, n, lang)
        if not reasons:
            continue
        any_failed = True
        passed, judged = counts[n]
        title = messages.title(n, lang)
        out.append(
            f'<h3 id="check-{_e(n)}">{_e(n)} {_e(title)} '
            f'<span class="note">{_e(t("failed_of", failed=judged - passed, judged=judged))}'
            "</span></h3>"
        )
        out.append(_table(t, "reason", "count", "examples", attrs=" class='reasons'"))
        for reason, count, learners in reasons[:TOP_REASONS]:
            examples = ", ".join(
                f'<a href="{_link(r, "results.json")}">{_e(r.folder)}</a>'
                for r in learners[:EXAMPLES]
            )
            more = f" +{len(learners) - EXAMPLES}" if len(learners) > EXAMPLES else ""
            out.append(
                f"<tr><td>{_e(reason)}</td><td class='n'>{count}</td><td>{examples}{more}</td></tr>"
            )
        rest = reasons[TOP_REASONS:]
        if rest:
            others = sum(c for _, c, _ in rest)
            out.append(f"<tr><td>… ({len(rest)})</td><td class='n'>{others}</td><td></td></tr>")
        out.append("</table>")
    if not any_failed:
        out.append(f"<p>{_e(t('no_failures'))}</p>")
    return "\n".join(out)


def _diff(t: _Words, diff: Diff) -> str:
    out = [f"<h2>{_e(t('regrade', previous=diff.previous))}</h2>"]
    if not diff.changes:
        out.append(f"<p>{_e(t('no_changes', n=diff.compared))}</p>")
        return "\n".join(out)
    out.append(_table(t, "learner", "before", "after", "change", "flipped"))
    for c in diff.changes:
        before = _cell_score(t, c.before) if c.before else _e(t("new"))
        after = _cell_score(t, c.after) if c.after else _e(t("gone"))
        delta = c.delta
        shift = (
            f'<span class="{"up" if delta > 0 else "down" if delta < 0 else ""}">{delta:+d}</span>'
            if delta is not None
            else ""
        )
        flips = ", ".join(
            f'<a href="#check-{_e(n)}">{_e(n)}</a> {_state(t, a)} → {_state(t, b)}'
            for n, a, b in c.flips
        )
        out.append(
            f"<tr><td>{_e(c.folder)}</td><td class='n'>{before}</td><td class='n'>{after}</td>"
            f"<td class='n'>{shift}</td><td>{flips}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _state(t: _Words, state: str) -> str:
    shown = t(state) if state in ("passed", "failed", "error") else state
    return f'<span class="{_e(state)}">{_e(shown)}</span>'


def _cell_score(t: _Words, row: Row) -> str:
    if row.score is None:
        return f'<span class="error">{_e(t("error"))}</span>'
    return _e(row.score)


def _errors(t: _Words, errors: list[Row]) -> str:
    out = [
        f"<h2>{_e(t('not_graded_title'))}</h2>",
        _table(t, "learner", "snapshot", "reason"),
    ]
    for r in errors:
        out.append(
            f"<tr><td>{_e(r.folder)}</td><td><code>{_e(r.snapshot)}</code></td>"
            f"<td>{_e(reason_said(r, t.lang))}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _flagged(t: _Words, rows: list[Row]) -> str:
    """The rows with suspicion flags (classroom.flags), each flag said in words; first each
    group of rows that share something, once (its rows then name only the group)."""
    out = [
        f'<h2 id="flags">{_e(t("flags_title"))}</h2>',
        f'<p class="note">{_e(t("flags_note"))}</p>',
    ]
    groups = flags.grouped(rows)
    if groups:
        out.append(_table(t, "flag_group", "flags", "submissions"))
        for key, detail, members in groups:
            names = ", ".join(sorted(r.folder for r in members))
            out.append(
                f"<tr><td>{_e(detail.split(':', 1)[0])}</td><td><code>{_e(key)}</code> "
                f"{_e(t(f'flag_{key}', detail=detail))}</td><td>{_e(names)}</td></tr>"
            )
        out.append("</table>")
    out.append(_table(t, "learner", "snapshot", "flags"))
    for r in rows:
        if r.flags:
            said = "<br>".join(
                f"<code>{_e(k)}</code> {_e(t(f'flag_{k}', detail=v))}" for k, v in r.flags.items()
            )
            out.append(
                f"<tr><td>{_e(r.folder)}</td><td><code>{_e(r.snapshot)}</code></td>"
                f"<td>{said}</td></tr>"
            )
    out.append("</table>")
    return "\n".join(out)


def reason_said(row: Row, lang: str) -> str:
    """Why an error row has no grade, in ``lang``: the reason the row kept as a translatable
    value; for a row without one (:func:`gradebook._detail`), its sort in ``lang`` and then the
    technical reason (English), without the snapshot's long path."""
    return _short(texts.no_grade(row.detail, row.why, row.reason, lang))


def _short(reason: str) -> str:
    """A reason without the long absolute path of the snapshot, which the row already names."""
    return re.sub(r"/\S*/([^/\s]+\.gpushare\.tgz)", r"\1", reason)


def _everyone(t: _Words, rows: list[Row]) -> str:
    out = [
        f"<h2>{_e(t('everyone'))}</h2>",
        _table(t, "learner", "score", "status", "isolation", "snapshot", "files"),
    ]
    for r in rows:
        score = f"{r.score}/{r.max_score}" if r.score is not None else "-"
        out.append(
            f"<tr><td>{_e(r.folder)}</td><td class='n'>{_e(score)}</td>"
            f'<td class="{_e(r.status)}">{_e(t(r.status))}</td><td>{_e(r.isolation)}</td>'
            f"<td><code>{_e(r.snapshot)}</code></td>"
            f'<td><a href="{_link(r, "results.json")}">results.json</a> · '
            f'<a href="{_link(r, "junit.xml")}">junit.xml</a></td></tr>'
        )
    out.append("</table>")
    return "\n".join(out)
