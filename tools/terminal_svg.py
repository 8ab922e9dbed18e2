"""docs/terminal.svg: a learner's terminal after a grade with failed checks, drawn from a real one.

``make docs-pictures`` runs :data:`COMMAND` (a grade of the shipped submission with mistakes,
with colours, a fixed seed and two steps, so the picture is the same on every machine) and draws
what it printed, colours and all, as an SVG: one ``<text>`` per terminal line, wrapped at
:data:`COLUMNS` as a terminal of that width wraps it. Nothing in the picture is typed by hand.
"""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "terminal.svg"
COMMAND = [
    "gpushare",
    "grade",
    "--snapshot",
    "examples/mistakes.gpushare.tgz",
    "--lang",
    "en",
    "--seed",
    "7",
    "--step",
    "7",
    "--step",
    "8",
]
COLUMNS = 100
CELL_W, LINE_H, PAD = 8.4, 18, 14
MARK = "made by tools/terminal_svg.py from a real grade"
SGR = re.compile(r"\x1b\[([0-9;]*)m")
COLOURS = {
    30: "#3b4048",
    31: "#ef6b73",
    32: "#8cc265",
    33: "#d8b15b",
    34: "#61afef",
    35: "#c678dd",
    36: "#56b6c2",
    37: "#d7dae0",
}
FG, BG = "#d7dae0", "#1e2127"
NBSP = "\u00a0"


@dataclass(frozen=True)
class Style:
    colour: str = FG
    bold: bool = False
    dim: bool = False


def _apply(style: Style, codes: str) -> Style:
    """The style after one SGR sequence (the few codes a grade's colours use)."""
    for code in [int(c) for c in codes.split(";") if c] or [0]:
        if code == 0:
            style = Style()
        elif code == 1:
            style = Style(style.colour, True, style.dim)
        elif code == 2:
            style = Style(style.colour, style.bold, True)
        elif code in (22,):
            style = Style(style.colour, False, False)
        elif code in COLOURS or 90 <= code <= 97:
            style = Style(COLOURS.get(code if code < 90 else code - 60, FG), style.bold, style.dim)
        elif code == 39:
            style = Style(FG, style.bold, style.dim)
    return style


def _width(char: str) -> int:
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def lines(output: str, columns: int = COLUMNS) -> list[list[tuple[str, Style]]]:
    """The terminal's lines: runs of (text, style), wrapped at ``columns`` cells."""
    out: list[list[tuple[str, Style]]] = []
    style = Style()
    for raw in output.splitlines():
        line: list[tuple[str, Style]] = []
        used = 0
        pos = 0
        for match in [*SGR.finditer(raw), None]:
            end = match.start() if match else len(raw)
            for char in raw[pos:end]:
                if used + _width(char) > columns:
                    out.append(line)
                    line, used = [], 0
                if line and line[-1][1] == style:
                    line[-1] = (line[-1][0] + char, style)
                else:
                    line.append((char, style))
                used += _width(char)
            if match:
                style = _apply(style, match.group(1))
                pos = match.end()
        out.append(line)
    return out


def svg(
    output: str,
    command: list[str],
    label: str = "A learner's terminal: gpushare grade with failed checks",
) -> str:
    rows = [[(f"$ {' '.join(command)}", Style("#8cc265", True))], *lines(output)]
    width = PAD * 2 + CELL_W * COLUMNS
    height = PAD * 2 + 22 + LINE_H * len(rows)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'aria-label="{escape(label, {chr(34): "&quot;"})}">',
        f"<desc>{MARK}: {escape(' '.join(command))}</desc>",
        f'<rect width="100%" height="100%" rx="8" fill="{BG}"/>',
        *(
            f'<circle cx="{PAD + 6 + 18 * i}" cy="{PAD + 4}" r="5" fill="{c}"/>'
            for i, c in enumerate(("#ef6b73", "#d8b15b", "#8cc265"))
        ),
        "<g font-family=\"'DejaVu Sans Mono', Menlo, Consolas, 'Noto Sans Mono CJK SC', "
        f'monospace" font-size="14" fill="{FG}" xml:space="preserve" style="white-space: pre">',
    ]
    for n, row in enumerate(rows):
        y = PAD + 22 + LINE_H * (n + 1) - 4
        spans = []
        for text, style in row:
            attrs = "" if style.colour == FG else f' fill="{style.colour}"'
            attrs += ' font-weight="bold"' if style.bold else ""
            attrs += ' opacity="0.6"' if style.dim else ""
            # no-break spaces: a viewer that collapses white space keeps the terminal's columns
            spans.append(f"<tspan{attrs}>{escape(text).replace(' ', NBSP)}</tspan>")
        parts.append(f'<text x="{PAD}" y="{y}">{"".join(spans)}</text>')
    parts += ["</g>", "</svg>", ""]
    return "\n".join(parts)


def grade_output(command: list[str] = COMMAND) -> str:
    """What the command prints on a colour terminal (exit 1: checks failed, as they should)."""
    gpushare = [sys.executable, "-m", "gpushare", *command[1:]]
    proc = subprocess.run(
        [*gpushare, "--color", "yes"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if proc.returncode != 1:
        raise SystemExit(f"{' '.join(command)}: exit {proc.returncode}, not 1\n{proc.stderr}")
    return proc.stdout


if __name__ == "__main__":
    OUT.write_text(svg(grade_output(), COMMAND), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
