"""docs/report.png: the class report of the sample class, as Chromium draws it.

``make docs-pictures`` grades ``examples/class`` (eight learners: a copy pair, a late one, a
cut-short upload) with ``gpushare class grade`` into a scratch folder and has headless Chromium
photograph its ``report.html``. Nothing in the picture is drawn by hand.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "report.png"
DEADLINE = "2026-12-03T18:05:18Z"  # examples/class/README.md: farah is the late one


def main() -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("docs/report.png needs chromium (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "class"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gpushare",
                "class",
                "grade",
                str(ROOT / "examples" / "class"),
                "--deadline",
                DEADLINE,
                "--out",
                str(out),
                "--lang",
                "en",
            ],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--hide-scrollbars",
                "--window-size=1200,1500",
                f"--screenshot={OUT}",
                (out / "report.html").as_uri(),
            ],
            check=True,
            capture_output=True,
        )
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
