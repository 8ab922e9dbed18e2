"""The built site loads nothing from elsewhere: the last step of ``make docs``.

Every ``<script src>``, ``<link href>`` (stylesheets, fonts, icons), ``<img src>`` and
``<iframe src>`` of every page of build/site/ must be a file of the site. Links a reader clicks
(``<a href>``) may lead anywhere: following them is the reader's choice, not the page's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SITE = Path(__file__).resolve().parents[1] / "build" / "site"
LOADS = re.compile(r"<(script|link|img|iframe|source)\b[^>]*?\b(src|href)=\"([^\"]+)\"", re.I)


def external_loads(site: Path) -> list[str]:
    found = []
    for page in sorted(site.rglob("*.html")):
        for tag, _, url in LOADS.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^(?:[a-z][a-z0-9+.-]*:)?//", url, re.I):
                found.append(f"{page.relative_to(site)}: <{tag}> {url}")
    return found


if __name__ == "__main__":
    site = Path(sys.argv[1]) if len(sys.argv) > 1 else SITE
    pages = list(site.rglob("*.html"))
    bad = external_loads(site)
    if not pages or bad:
        print("\n".join(bad) or f"no pages in {site}", file=sys.stderr)
        raise SystemExit(1)
    print(f"site: {len(pages)} pages in {site}, nothing loaded from elsewhere")
