"""The class report's bar charts, as inline SVG written here: no plotting library.

Three charts, each a frame of two axes (left and bottom, as the report always drew them), ticks
at round numbers, labels and bars: a histogram (bins on a number line), columns (one bar per
category) and rows (horizontal bars, the first at the top). Text stays text, in the page's font
stack (:data:`FONT_STACK`), so the browser draws Chinese and Korean with its own fonts; nothing
here measures a glyph. The output depends on the data alone: the same class gives the same
bytes (no ids, no dates, every number written with the same precision).

Sizes are in CSS pixels of the chart's ``viewBox``; the page scales the chart to its width.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

# Latin first (the digits and the English words), then each CJK family under the names the
# systems install it as (Linux's Noto and Source Han, macOS, Windows); for Korean its own families
# come before the Chinese ones (:func:`font_stack`): a Chinese font's Hangul and a Korean font's
# Han differ in shape, and each language reads best in its own.
_LATIN = ("system-ui", "-apple-system", "Segoe UI", "Noto Sans")
_CHINESE = ("Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei")
_KOREAN = ("Noto Sans CJK KR", "Source Han Sans K", "Apple SD Gothic Neo", "Malgun Gothic")
FONT_STACK = (*_LATIN, *_CHINESE, *_KOREAN, "sans-serif")
_GENERIC = frozenset({"system-ui", "-apple-system", "sans-serif"})

WIDTH = 792  # a chart's width (11 in at 72 px/in): the page's, which scales it to fit
FONT_SIZE = 12
SMALL = 11
_TICK = 4  # a tick's length, outside the axis
_MOST = 8  # intervals between ticks, at most
_INK = "#1f2328"  # the page's text colour: axes, ticks and labels


def font_stack(lang: str, quote: str = '"') -> str:
    """:data:`FONT_STACK` as a CSS ``font-family`` value, Korean families first for ``ko``;
    ``quote`` the quote mark that fits where it is written (an XML attribute takes ``'``)."""
    names = (*_LATIN, *_KOREAN, *_CHINESE, "sans-serif") if lang == "ko" else FONT_STACK
    return ", ".join(n if n in _GENERIC else f"{quote}{n}{quote}" for n in names)


def _n(value: float) -> str:
    """A coordinate: two decimals at most, no trailing zeros, never ``-0``."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _text(x: float, y: float, words: str, *, anchor: str = "middle", size: int = FONT_SIZE,
          extra: str = "") -> str:  # fmt: skip
    return (
        f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" font-size="{size}"{extra}>'
        f"{html.escape(words, quote=False)}</text>"
    )


def ticks(top: float, *, integer: bool = False) -> list[float]:
    """Round ticks from 0 to at most ``top``: the smallest step of 1, 2, 2.5 or 5 times a power
    of ten that gives at most :data:`_MOST` intervals (whole numbers only with ``integer``)."""
    if top <= 0:
        return [0.0]
    power = 10.0 ** math.floor(math.log10(top / _MOST))
    for base in (1, 2, 2.5, 5, 10, 20):
        step = base * power
        if integer and (step < 1 or step != int(step)):
            continue
        if top / step <= _MOST:
            break
    count = math.floor(top / step + 1e-9)
    return [round(i * step, 10) for i in range(count + 1)]


@dataclass(frozen=True)
class Bar:
    """One bar: from ``start`` to ``end`` along the category axis (data units), ``value`` long;
    ``label`` written at its end, if any."""

    start: float
    end: float
    value: float
    color: str
    label: str = ""


@dataclass(frozen=True)
class _Frame:
    """The plot area inside the chart, in pixels, and the data ranges it shows."""

    left: float
    top: float
    width: float
    height: float
    span: tuple[float, float]  # the category axis (x of columns, y of rows)
    scale: float  # the value axis, from 0

    def along(self, v: float) -> float:
        lo, hi = self.span
        return (v - lo) / (hi - lo)


def _svg(height: float, lang: str, title: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {_n(height)}" '
        f'width="{WIDTH}" height="{_n(height)}" role="img" '
        f'aria-label="{html.escape(title, quote=True)}" '
        f'font-family="{font_stack(lang, quote=chr(39))}" fill="{_INK}">' + "".join(body) + "</svg>"
    )


def _axes(f: _Frame) -> list[str]:
    x0, y0 = f.left, f.top + f.height
    return [
        f'<path d="M{_n(x0)} {_n(f.top)}V{_n(y0)}H{_n(x0 + f.width)}" fill="none" '
        f'stroke="{_INK}" stroke-width="1"/>'
    ]


def vertical(
    bars: Sequence[Bar],
    *,
    span: tuple[float, float],
    top: float,
    xlabel: str,
    ylabel: str,
    lang: str,
    height: float,
    categories: Sequence[tuple[float, str]] = (),
    integer: bool = False,
    edge: str = "",
) -> str:
    """Columns up from 0 to ``top``: the category axis at the bottom (``categories`` name
    positions on it; none: round ticks of ``span``), the values' ticks on the left."""
    f = _Frame(58, 10, WIDTH - 58 - 12, height - 10 - (50 if xlabel else 34), span, top)
    base = f.top + f.height
    out = _axes(f)
    for v in ticks(top, integer=integer):
        y = base - v / top * f.height
        out.append(f'<path d="M{_n(f.left - _TICK)} {_n(y)}H{_n(f.left)}" stroke="{_INK}"/>')
        out.append(_text(f.left - _TICK - 3, y + 4, f"{v:g}", anchor="end", size=SMALL))
    marks = categories or [(v, f"{v:g}") for v in ticks(span[1]) if v >= span[0]]
    for pos, name in marks:
        x = f.left + f.along(pos) * f.width
        out.append(f'<path d="M{_n(x)} {_n(base)}V{_n(base + _TICK)}" stroke="{_INK}"/>')
        out.append(_text(x, base + _TICK + 13, name, size=SMALL))
    stroke = f' stroke="{edge}" stroke-width="1"' if edge else ""
    for b in bars:
        x1 = f.left + f.along(b.start) * f.width
        x2 = f.left + f.along(b.end) * f.width
        h = min(b.value, top) / top * f.height
        out.append(
            f'<rect x="{_n(x1)}" y="{_n(base - h)}" width="{_n(x2 - x1)}" height="{_n(h)}" '
            f'fill="{b.color}"{stroke}/>'
        )
        if b.label:
            out.append(_text((x1 + x2) / 2, base - h - 4, b.label, size=SMALL))
    if xlabel:
        out.append(_text(f.left + f.width / 2, height - 8, xlabel))
    mid = f.top + f.height / 2
    out.append(_text(16, mid, ylabel, extra=f' transform="rotate(-90 16 {_n(mid)})"'))
    return _svg(height, lang, ylabel, out)


def horizontal(
    bars: Sequence[Bar],
    names: Sequence[str],
    *,
    top: float,
    xlabel: str,
    lang: str,
) -> str:
    """Rows right from 0 to ``top``, one per name, the first at the top; each ``bars[i]``
    spans ``i - 0.4`` to ``i + 0.4``. The names' width is guessed from their length (they are
    check numbers, a few characters)."""
    row = 16
    longest = max((len(n) for n in names), default=1)
    left = 20 + 7 * longest
    height = 10 + row * max(len(names), 1) + 48
    f = _Frame(left, 10, WIDTH - left - 12, row * max(len(names), 1), (-0.5, len(names) - 0.5), top)
    base = f.top + f.height
    out = _axes(f)
    for v in ticks(top):
        x = f.left + v / top * f.width
        out.append(f'<path d="M{_n(x)} {_n(base)}V{_n(base + _TICK)}" stroke="{_INK}"/>')
        out.append(_text(x, base + _TICK + 13, f"{v:g}", size=SMALL))
    for i, name in enumerate(names):
        y = f.top + f.along(i) * f.height
        out.append(f'<path d="M{_n(f.left - _TICK)} {_n(y)}H{_n(f.left)}" stroke="{_INK}"/>')
        out.append(_text(f.left - _TICK - 3, y + 4, name, anchor="end", size=SMALL))
    for b in bars:
        y1 = f.top + f.along(b.start) * f.height
        y2 = f.top + f.along(b.end) * f.height
        w = min(b.value, top) / top * f.width
        out.append(
            f'<rect x="{_n(f.left)}" y="{_n(y1)}" width="{_n(w)}" height="{_n(y2 - y1)}" '
            f'fill="{b.color}"/>'
        )
        if b.label:
            out.append(
                _text(f.left + w + 3, (y1 + y2) / 2 + 4, b.label, anchor="start", size=SMALL)
            )
    out.append(_text(f.left + f.width / 2, height - 8, xlabel))
    return _svg(height, lang, xlabel, out)
