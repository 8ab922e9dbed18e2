"""The docs state today's facts: what they name exists, the CLI reference is the parser's.

Read: README.md, docs/*.md and the lab's handout (graders/handout/*.md). Checked:

- every repository path they name in backticks exists (placeholders such as ``<lang>`` and
  ``*`` match any file), and every ``gpushare.<module>`` they name imports;
- every ``make TARGET`` is a target of the Makefile;
- every ``gpushare COMMAND ... --option`` uses options that COMMAND has, and every
  ``pytest graders/ --option`` one the graders' plugin or pytest takes;
- docs/cli.md is what tools/cli_reference.py writes from the parser, and names every option of
  every command;
- README.md is at most 150 lines; no prose tells of past work by its numbered runs;
- the scripts the site ships are the files their note hashes, and the site check finds a page
  that loads from elsewhere;
- the instructor's walk from a folder of snapshots to the LMS files runs as written.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import cli_reference  # tools/: the generator of docs/cli.md, and the site check
import site_check
import terminal_svg

from gpushare.cli import build_parser

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
HANDOUTS = sorted((ROOT / "graders" / "handout").glob("*.md"))
PAGES = DOCS + HANDOUTS
TOP = ("src", "tests", "graders", "docs", "deploy", "benchmarks", "examples", "fixtures")
TOP += ("solutions", "requirements", "tools", ".ci")
ROOT_FILES = ("Makefile", "Containerfile", "mkdocs.yml", "README.md", "pyproject.toml")
ROOMS = ("kube", "lab", "sandbox", "reports", "submissions", "grading", "classroom", "lms")


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _spans(text: str) -> list[str]:
    """Inline code spans, and the lines of fenced blocks."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return inline + [line for block in blocks for line in block.splitlines()]


def _exists(token: str) -> bool:
    """A repository path, with ``<placeholder>``, ``*`` and ``...`` matching anything."""
    token = token.split("::")[0].rstrip(".,:;")
    if token.startswith("gpushare/"):
        token = "src/" + token
    elif token.split("/")[0] in ROOMS:
        token = "src/gpushare/" + token
    pattern = re.sub(r"<[^>]+>|\.\.\.|…", "*", token).rstrip("/")
    if "*" not in pattern:
        return (ROOT / pattern).exists()
    base = ROOT / pattern.split("*")[0].rsplit("/", 1)[0]
    depth = pattern.count("/")
    for path in base.rglob("*") if base.is_dir() else []:
        rel = path.relative_to(ROOT).as_posix()
        if rel.count("/") == depth and fnmatch.fnmatch(rel, pattern):
            return True
    return False


def _named_paths(text: str) -> set[str]:
    found = set()
    for span in _spans(text):
        for token in span.split():
            token = token.strip("()[]'\",`")
            first = token.split("/")[0]
            if "/" in token and (first in TOP or first in ROOMS or first == "gpushare"):
                if not token.startswith(("tests/**", "subs/")) and "://" not in token:
                    found.add(token)
            elif token in ROOT_FILES:
                found.add(token)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_named_exists(page):
    missing = sorted(t for t in _named_paths(_text(page)) if not _exists(t))
    assert not missing, missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_module_named_imports(page):
    missing = []
    for name in set(re.findall(r"`(gpushare(?:\.\w+)+)", _text(page))):
        parts = name.split(".")
        for n in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:n]))
            except ImportError:
                continue
            for attr in parts[n:]:
                obj = getattr(obj, attr, None)
            if obj is None:
                missing.append(name)
            break
        else:
            missing.append(name)
    assert not missing, missing


def _targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-zA-Z][\w-]*)\s*:(?!=)", makefile, flags=re.M))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_make_target_named_exists(page):
    named = {
        target
        for span in _spans(_text(page))
        for _, target in re.findall(r"(?:^|[\s;&(])make ((?:[A-Z_]+=\S+ )*)([a-z][\w-]*)", span)
    }
    assert named or page.name in ("cli.md", "index.md") or page.name.startswith("RULES"), page
    missing = sorted(named - _targets())
    assert not missing, missing


def _tree() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    return dict(cli_reference.commands(build_parser()))


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _invocations(text: str, program: str) -> list[list[str]]:
    """Each ``program ...`` command line of the page, as words (up to a comment or a pipe)."""
    out = []
    for span in _spans(text):
        for match in re.finditer(rf"(?:^|[\s(/]){re.escape(program)}((?: [^|#;&`]*)?)", span):
            try:
                out.append(shlex.split(match.group(1), comments=True))
            except ValueError:  # an unbalanced quote: the span is prose about the command
                out.append(match.group(1).split())
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_cli_option_named_exists(page):
    tree = _tree()
    wrong = []
    for words in _invocations(_text(page), "gpushare"):
        path: tuple[str, ...] = ()
        for word in words:
            if (*path, word) in tree:
                path = (*path, word)
            elif not word.startswith("-"):
                if path == () and word in ("|", "COMMAND"):
                    break
                continue
            else:
                option = word.split("=")[0]
                if option not in _options(tree[path]):
                    wrong.append(f"gpushare {' '.join(path)} {option}")
    assert not wrong, wrong


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_pytest_option_named_exists(page):
    """``pytest graders/ --opt``: the graders' plugin shares grade's options (gpushare.grading
    .grade.SHARED_OPTIONS); pytest itself takes --junitxml."""
    from gpushare.grading import grade

    taken = {name for name, _ in grade.SHARED_OPTIONS} | {"--junitxml", "-q", "-k", "-x"}
    wrong = [
        w.split("=")[0]
        for words in _invocations(_text(page), "pytest")
        if words[:1] == ["graders/"]
        for w in words
        if w.startswith("-") and w.split("=")[0] not in taken
    ]
    assert not wrong, wrong


def test_the_cli_reference_is_the_parsers():
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == cli_reference.render(), (
        "docs/cli.md is stale: run make cli-docs"
    )


def test_the_cli_reference_names_every_option_of_every_command():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## (gpushare[^\n]*)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    for path, parser in _tree().items():
        title = " ".join(("gpushare", *path))
        assert title in sections, title
        for option in _options(parser):
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", sections[title]), (
                title,
                option,
            )


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, len(lines)
    text = "\n".join(lines)
    for page in ("learner", "instructor", "operator", "lab-author", "developer", "performance"):
        assert f"(docs/{page}.md)" in text, page
    assert "docs/report.png" in text


def test_no_prose_tells_of_past_work():
    proc = subprocess.run(
        ["git", "grep", "-nE", r"\b(stop|turn|round) [0-9]+\b", "--", "*.md", "src", "graders"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout


def test_the_site_ships_the_scripts_its_note_hashes():
    note = (ROOT / "docs" / "assets" / "README.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|", note, flags=re.M)
    assert len(rows) == 2
    for rel, digest in rows:
        path = ROOT / "docs" / "assets" / rel
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, rel
        assert rel in (ROOT / "mkdocs.yml").read_text(), rel


def test_the_site_check_finds_a_page_that_loads_from_elsewhere(tmp_path):
    (tmp_path / "a.html").write_text('<script src="assets/x.js"></script><a href="https://x">')
    assert site_check.external_loads(tmp_path) == []
    (tmp_path / "b.html").write_text('<link rel="stylesheet" href="https://fonts.example/css">')
    (tmp_path / "c.html").write_text('<script src="//cdn.example/m.js"></script>')
    assert len(site_check.external_loads(tmp_path)) == 2


def _walkthrough() -> str:
    text = (ROOT / "docs" / "instructor.md").read_text(encoding="utf-8")
    start = text.index("## A class, end to end")
    return re.findall(r"```sh\n(.*?)```", text[start:], flags=re.S)[0]


def test_the_instructors_walk_to_the_lms_runs_as_written(tmp_path):
    """From the sample class to the Canvas and Moodle files, the page's commands as they are."""
    script = _walkthrough().replace("xdg-open class/report.html", "test -s class/report.html")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("grades.csv", "report.html", "canvas-import.csv", "moodle-import.csv"):
        assert (tmp_path / "class" / name).stat().st_size > 0, name
    assert (tmp_path / "class-2" / "grades.csv").read_text() == (
        tmp_path / "class" / "grades.csv"
    ).read_text()
    canvas = (tmp_path / "class" / "canvas-import.csv").read_text(encoding="utf-8-sig")
    assert "Ada Lovelace,1001,s1001,,A,100" in canvas


def test_the_terminal_picture_is_drawn_from_a_real_grade():
    """A grade's own output, colours and all, becomes the SVG's lines: the same text, one
    ``<text>`` per terminal line (a long line wrapped at the terminal's width)."""
    import xml.etree.ElementTree as ET

    output = terminal_svg.grade_output()
    assert "\x1b[31m" in output  # the failed checks in red, as on a terminal
    tree = ET.fromstring(terminal_svg.svg(output, terminal_svg.COMMAND))
    ns = "{http://www.w3.org/2000/svg}"
    drawn = ["".join(t.itertext()).replace(terminal_svg.NBSP, " ") for t in tree.iter(f"{ns}text")]
    plain = terminal_svg.SGR.sub("", output)
    assert "".join(drawn[1:]) == plain.replace("\n", "")
    assert all(len(line) <= terminal_svg.COLUMNS for line in drawn[1:])
    shipped = ET.parse(ROOT / "docs" / "terminal.svg").getroot()
    assert terminal_svg.MARK in "".join(shipped.find(f"{ns}desc").itertext())
    assert "docs/terminal.svg" in (ROOT / "Makefile").read_text()
