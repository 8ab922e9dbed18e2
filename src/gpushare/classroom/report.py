"""``report.html``: one self-contained page about a class, for the instructor.

A score histogram, the pass rate of each step and of each check as plots (matplotlib, rendered
to SVG inline in the page, text kept as text so the browser draws Chinese and Korean with its
own fonts), the most common failure reasons of each check with counts and example learners,
the regrade diff when there is one, the submissions that could not be graded, and every
submission with links to its results. No script, no stylesheet or font from elsewhere: the
file can be mailed or opened from a USB stick.
"""

from __future__ import annotations

import contextlib
import html
import io
import os
import re
import shutil
import statistics
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from gpushare import __version__
from gpushare.classroom import feedback, flags
from gpushare.classroom.diff import Diff
from gpushare.classroom.gradebook import CheckInfo, Row, columns, write_text
from gpushare.classroom.texts import text
from gpushare.reports import clean, messages

if TYPE_CHECKING:
    from matplotlib.figure import Figure

REPORT_NAME = "report.html"
TOP_REASONS = 5
EXAMPLES = 3
_PASS, _FAIL, _MID = "#2e7d32", "#c62828", "#f9a825"


def write(
    path: Path,
    rows: list[Row],
    checks: list[CheckInfo],
    lang: str,
    *,
    seed: int,
    diff: Diff | None = None,
) -> Path:
    with _matplotlib_home(path.parent):
        page = render(rows, checks, lang, seed=seed, diff=diff)
    return write_text(path, page)


@contextlib.contextmanager
def _matplotlib_home(near: Path) -> Iterator[None]:
    """matplotlib stops with a traceback when it finds no writable config folder
    (``MPLCONFIGDIR``, else ``~/.config/matplotlib``, else a new one in the temp dir): so it is
    in a pod with a read-only root and no writable ``/tmp``, and report.html was never
    written. There, a folder beside the report is lent to it for the plots, then removed."""
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR") or _default_writable():
        yield
        return
    near.mkdir(parents=True, exist_ok=True)
    lent = tempfile.mkdtemp(prefix=".matplotlib-", dir=near)
    os.environ["MPLCONFIGDIR"] = lent
    try:
        yield
    finally:
        os.environ.pop("MPLCONFIGDIR", None)
        shutil.rmtree(lent, ignore_errors=True)


def _default_writable() -> bool:
    """Whether matplotlib's own choices of a config folder would work (its order)."""
    try:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        folder = Path(base) / "matplotlib"
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK) and folder.is_dir():
            return True
    except (OSError, RuntimeError):  # RuntimeError: no home directory at all
        pass
    try:
        shutil.rmtree(tempfile.mkdtemp(prefix="matplotlib-"))
    except OSError:
        return False
    return True


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
    parts.append(f"<h2>{_e(t('histogram'))}</h2>")
    parts.append(_histogram(t, graded))
    parts.append(f"<h2>{_e(t('step_rates'))}</h2>")
    parts.append(_step_rates(t, graded, steps))
    parts.append(f"<h2>{_e(t('check_rates'))}</h2>")
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
body {{ font-family: system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC",
  "Noto Sans CJK KR", "PingFang SC", "Malgun Gothic", sans-serif; margin: 2rem auto;
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


def _summary(t: _Words, rows: list[Row], graded: list[Row], errors: list[Row]) -> str:
    scores = [r.score for r in graded if r.score is not None]
    cards: list[tuple[str, object]] = [
        (t("submissions"), len(rows)),
        (t("graded"), len(graded)),
        (t("errors"), len(errors)),
    ]
    if scores:
        cards += [
            (t("mean"), f"{statistics.fmean(scores):.1f}"),
            (t("median"), f"{statistics.median(scores):g}"),
            (t("lowest"), min(scores)),
            (t("highest"), max(scores)),
            (t("all_passed"), sum(1 for r in graded if r.status == "passed")),
        ]
    inner = "".join(f'<div class="card">{_e(label)}<b>{_e(v)}</b></div>' for label, v in cards)
    return f'<div class="cards">{inner}</div>'


# --------------------------------------------------------------------------- plots


def _new_figure(width: float, height: float) -> Figure:
    """A figure for one plot, set up for SVG: text as text, stable ids (and no date: :func:`_svg`).

    Imported here, not at the top: matplotlib reads its config folder when it is imported,
    which :func:`_matplotlib_home` may have to lend it first (and it costs 0.3 s that no other
    output of a class needs). A plain Figure, not pyplot: nothing is shown, nothing to close."""
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "gpushare-class",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return Figure(figsize=(width, height))


def _svg(fig: Figure) -> str:
    """The plot as a ``<figure>`` of the page."""
    buf = io.StringIO()
    with warnings.catch_warnings():  # CJK glyphs are missing from the measuring font only
        warnings.simplefilter("ignore")
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    svg = buf.getvalue()
    return f"<figure>{svg[svg.index('<svg') :]}</figure>"  # no XML prologue or doctype inside HTML


def _histogram(t: _Words, graded: list[Row]) -> str:
    from matplotlib.ticker import MaxNLocator  # lazy: see _new_figure

    scores = [r.score for r in graded if r.score is not None]
    top = max([r.max_score for r in graded] or [100]) or 100
    step = max(1, round(top / 20))
    edges: list[float] = list(range(0, top + step, step))
    if edges[-1] < top:
        edges.append(top)
    edges[-1] = edges[-1] + 0.001  # the last bin holds the full score
    fig = _new_figure(11, 2.8)
    ax = fig.add_subplot()
    ax.hist(scores, bins=edges, color="#0969da", edgecolor="white")
    ax.set_xlabel(t("score"))
    ax.set_ylabel(t("learners"))
    ax.set_xlim(0, top + 0.5)
    locator = ax.yaxis.get_major_locator()
    if isinstance(locator, MaxNLocator):  # the default one is
        locator.set_params(integer=True)
    return _svg(fig)


def _rate_color(rate: float) -> str:
    return _PASS if rate >= 0.8 else _MID if rate >= 0.5 else _FAIL


def _step_rates(t: _Words, graded: list[Row], steps: list[int]) -> str:
    rates = []
    for step in steps:
        judged = [r for r in graded if any(c.step == step for c in r.cells.values())]
        ok = sum(1 for r in judged if all(c.passed for c in r.cells.values() if c.step == step))
        rates.append(ok / len(judged) if judged else 0.0)
    fig = _new_figure(11, 2.6)
    ax = fig.add_subplot()
    labels = [t("step", n=s) for s in steps]
    bars = ax.bar(labels, [r * 100 for r in rates], color=[_rate_color(r) for r in rates])
    ax.bar_label(bars, labels=[f"{r:.0%}" for r in rates], padding=2, fontsize=9)
    ax.set_ylim(0, 110)
    ax.set_ylabel(f"{t('pass_rate')} (%)")
    return _svg(fig)


def check_rates(graded: list[Row], numbers: list[str]) -> dict[str, tuple[int, int]]:
    """check -> (passed, judged) over the graded submissions (not-judged checks left out)."""
    out = {}
    for n in numbers:
        cells = [r.cells[n] for r in graded if n in r.cells and not r.cells[n].error]
        out[n] = (sum(1 for c in cells if c.passed), len(cells))
    return out


def _check_rates(t: _Words, graded: list[Row], numbers: list[str]) -> str:
    counts = check_rates(graded, numbers)
    rates = [(p / j if j else 0.0) for p, j in counts.values()]
    fig = _new_figure(11, 0.6 + 0.2 * max(len(numbers), 1))
    ax = fig.add_subplot()
    ys = list(range(len(numbers)))
    bars = ax.barh(ys, [r * 100 for r in rates], color=[_rate_color(r) for r in rates])
    ax.bar_label(bars, labels=[f"{r:.0%}" for r in rates], padding=2, fontsize=8)
    ax.set_yticks(ys, numbers, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 110)
    ax.set_xlabel(f"{t('pass_rate')} (%)")
    return _svg(fig)


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
    if row.detail is not None:
        return _short(messages.render_value(row.detail, lang))
    if row.why:
        return text("why_said", lang, why=text(f"why_{row.why}", lang), reason=_short(row.reason))
    return _short(row.reason)


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
