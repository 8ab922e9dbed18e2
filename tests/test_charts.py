"""The class report's charts: SVG the project writes (gpushare.classroom.charts), no plotting
library anywhere, the same bytes for the same class, CJK fonts named for zh and ko text."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

from gpushare.classroom import charts, gradebook, report
from tests.helpers import ROOT

SVG = "{http://www.w3.org/2000/svg}"
CLASS = ROOT / "examples" / "class"


def _rows_of_the_sample_class(tmp_path):
    out = tmp_path / "class"
    subprocess.run(
        [sys.executable, "-m", "gpushare", "class", "grade", str(CLASS), "--out", str(out),
         "--lang", "zh", "--jobs", "1", "--unsafe-no-sandbox"],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return gradebook.load_rows(out)


def _figures(page: str) -> list[ET.Element]:
    return [ET.fromstring(svg) for svg in re.findall(r"<figure>(<svg.*?</svg>)</figure>", page)]


def test_the_report_draws_its_three_charts_itself_byte_stable(tmp_path):
    rows = _rows_of_the_sample_class(tmp_path)
    checks = gradebook.catalog()
    page = report.render(rows, checks, "zh", seed=0)
    assert page == report.render(list(rows), checks, "zh", seed=0)
    histogram, steps, by_check = _figures(page)
    # the histogram: one bar per bin, their heights the learners per bin (7 graded: 2 + 5)
    bins = [float(r.get("height", 0)) for r in histogram.iter(f"{SVG}rect")]
    assert len(bins) == 20 and sum(1 for h in bins if h) == 2
    low, high = sorted(h for h in bins if h)
    assert abs(high / low - 5 / 2) < 0.01
    words = ["".join(t.itertext()) for t in histogram.iter(f"{SVG}text")]
    assert "分数" in words and "学员人数" in words and words[6:9] == ["0", "20", "40"]
    # the steps: a column and its percentage each, 100% the tallest
    names = ["".join(t.itertext()) for t in steps.iter(f"{SVG}text")]
    assert [n for n in names if n.startswith("步骤")] == [f"步骤 {i}" for i in range(1, 9)]
    assert "100%" in names and "86%" in names
    # the checks: a row per check, in order, the first at the top
    ys = [float(r.get("y", 0)) for r in by_check.iter(f"{SVG}rect")]
    assert len(ys) == len(checks) and ys == sorted(ys)
    # nothing measured, nothing loaded: text as text in the page's fonts
    assert "<script" not in page and "url(" not in page and "<image" not in page


def test_cjk_fonts_are_named_and_korean_puts_its_own_first():
    zh, ko = charts.font_stack("zh"), charts.font_stack("ko")
    assert '"Noto Sans CJK SC"' in zh and '"Malgun Gothic"' in zh and zh.endswith("sans-serif")
    assert ko.index("Noto Sans CJK KR") < ko.index("Noto Sans CJK SC")
    assert zh.index("Noto Sans CJK SC") < zh.index("Noto Sans CJK KR")
    svg = charts.horizontal([charts.Bar(-0.4, 0.4, 50, "#000")], ["1.1"], top=110, xlabel="통과율",
                            lang="ko")  # fmt: skip
    root = ET.fromstring(svg)  # well-formed: the fonts' quotes fit the attribute
    assert root.get("font-family") == charts.font_stack("ko", quote="'")


def test_ticks_are_round_and_whole_where_they_count_learners():
    assert charts.ticks(110) == [0, 20, 40, 60, 80, 100]
    assert charts.ticks(100.5) == [0, 20, 40, 60, 80, 100]
    assert charts.ticks(5.25, integer=True) == [0, 1, 2, 3, 4, 5]
    assert charts.ticks(1.05, integer=True) == [0, 1]
    assert charts.ticks(31.5, integer=True) == [0, 5, 10, 15, 20, 25, 30]


def test_no_plotting_library_is_pinned_or_imported(tmp_path):
    for path in [*(ROOT / "requirements").glob("*.lock"), ROOT / "pyproject.toml"]:
        assert "matplotlib" not in path.read_text().lower(), path
    code = (
        "import sys; from pathlib import Path; from gpushare.classroom import report, gradebook;"
        f"report.write(Path({str(tmp_path / 'r.html')!r}), [], gradebook.catalog(), 'en', seed=0);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('matplotlib', 'numpy', 'PIL')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    assert (tmp_path / "r.html").read_text().count("<svg") == 3
