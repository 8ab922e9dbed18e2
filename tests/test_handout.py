"""The lab's handout: in each language the lab offers, true to the graders, ``gpushare lab``.

The handout states each step's points and which checks judge it; those facts are read back
from the graders here, so a re-weighted check or a new one fails this test until the text
says it. ``gpushare lab`` is run as the learner runs it: plainly into a pipe, and through a
pager on a real pseudo-terminal.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import defaultdict

import pytest

from tests.helpers import ROOT, _gpushare, discovered_checks

HANDOUT = ROOT / "graders" / "handout"
LANGS = ("zh", "en", "ko")
# "(12)", "（12 分）", "(12점)": a step heading's points
POINTS = re.compile(r"[(（](\d+)(?: 分|점)?[)）]\s*$")


def _steps() -> dict[int, dict[str, int]]:
    steps: dict[int, dict[str, int]] = defaultdict(dict)
    for number, points in discovered_checks().items():
        steps[int(number.split(".")[0])][number] = points
    return steps


@pytest.mark.parametrize("lang", LANGS)
def test_each_step_states_its_points_and_names_its_checks(lang):
    text = (HANDOUT / f"{lang}.md").read_text(encoding="utf-8")
    headings = [h for h in text.splitlines() if h.startswith("### ")]
    steps = _steps()
    assert len(headings) == len(steps), headings
    sections = re.split(r"^### .*$", text, flags=re.M)[1:]
    for (_, checks), heading, section in zip(
        sorted(steps.items()), headings, sections, strict=True
    ):
        match = POINTS.search(heading)
        assert match, heading
        assert int(match.group(1)) == sum(checks.values()), (lang, heading, checks)
        for number in checks:
            assert re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", section), (lang, number)
    total = sum(sum(c.values()) for c in steps.values())
    assert str(total) in text.split("### ")[0]


@pytest.mark.parametrize("lang", LANGS)
def test_the_paths_it_names_are_the_graders(lang):
    """Every work-dir file the handout names is one a grader reads; every fixture exists."""
    text = (HANDOUT / f"{lang}.md").read_text(encoding="utf-8")
    graders = "\n".join(p.read_text() for p in (ROOT / "graders").glob("test_step*.py"))
    graders += (ROOT / "graders" / "gpulab" / "requestruns.py").read_text()
    for rel in set(re.findall(r"/root/gpushare/((?:k8s|bin|out)/[\w.-]+)", text)):
        assert rel in graders, rel
    for name in ("over.yaml", "one.yaml", "none.yaml"):
        assert name in text and (ROOT / "fixtures" / "check-request" / name).exists()


def _prose(text: str) -> str:
    """The handout without code: fenced blocks and `spans` are the same in every language."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`]*`", "", text)


@pytest.mark.parametrize("lang", ["zh", "ko"])
def test_it_keeps_the_glossary(lang):
    """The words the feedback uses are the handout's: no variant the glossary bans."""
    glossary = tomllib.loads((ROOT / "graders" / "messages" / "glossary.toml").read_text())
    prose = _prose((HANDOUT / f"{lang}.md").read_text(encoding="utf-8"))
    for name, term in glossary["terms"].items():
        for banned in term.get(f"{lang}_banned", []):
            hit = re.search(banned, prose)
            assert hit is None, (name, banned, prose[max(0, hit.start() - 30) : hit.end() + 30])


def test_the_open_choices_are_marked():
    """The choices the grader makes are one marked block per language, so they are easy to
    keep equal to the graders' rules."""
    for lang in LANGS:
        text = (HANDOUT / f"{lang}.md").read_text(encoding="utf-8")
        assert text.count("<!-- rules -->") == 1 == text.count("<!-- /rules -->"), lang
    counts = {
        lang: len(
            re.findall(
                r"^- ",
                (HANDOUT / f"{lang}.md").read_text().split("<!-- rules -->")[1],
                flags=re.M,
            )
        )
        for lang in LANGS
    }
    assert len(set(counts.values())) == 1, counts


def test_lab_writes_it_plainly_into_a_pipe():
    for lang in LANGS:
        proc = _gpushare("lab", "--lang", lang)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == (HANDOUT / f"{lang}.md").read_text(encoding="utf-8")
        assert proc.stderr == ""


def test_lab_pages_it_on_a_terminal(tmp_path):
    """On a terminal the text goes through $PAGER (a recording one here), whole."""
    paged = tmp_path / "paged"
    primary, secondary = os.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("GPUSHARE_LANG",)}
    env.update(PAGER=f"sh -c 'cat > {paged}'", LANG="ko_KR.UTF-8", LC_ALL="ko_KR.UTF-8")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gpushare", "lab"],
            stdout=secondary,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(secondary)
        os.close(primary)
    assert proc.returncode == 0, proc.stderr
    assert paged.read_text(encoding="utf-8") == (HANDOUT / "ko.md").read_text(encoding="utf-8")


def test_a_language_the_handout_lacks_shows_one_it_has(tmp_path):
    graders = tmp_path / "graders"
    shutil.copytree(ROOT / "graders", graders, ignore=shutil.ignore_patterns("__pycache__"))
    (graders / "handout" / "ko.md").unlink()
    proc = _gpushare("lab", "--lang", "ko", env={"GPUSHARE_GRADERS": str(graders)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (HANDOUT / "zh.md").read_text(encoding="utf-8")
    assert "'ko'" in proc.stderr and "zh" in proc.stderr


def test_the_learner_image_ships_it():
    """The lab image copies the graders folder whole, and nothing leaves the handout out."""
    containerfile = (ROOT / "deploy" / "lab.Containerfile").read_text()
    copies = re.findall(r"^COPY\s+(?!--from)(.+)$", containerfile, flags=re.M)
    assert any(line.split()[0].rstrip("/") == "graders" for line in copies), copies
    for ignore in (".containerignore", ".dockerignore"):
        path = ROOT / ignore
        if path.exists():
            for rule in path.read_text().splitlines():
                rule = rule.strip()
                assert not (rule and not rule.startswith("#") and "handout" in rule), rule
                assert rule.rstrip("/") not in ("graders", "graders/*", "**/*.md"), rule
    assert all((HANDOUT / f"{lang}.md").exists() for lang in LANGS)


def test_lab_rules_shows_how_each_step_is_graded(tmp_path):
    """``--rules``: graders/RULES.<lang>.md (RULES.md for English), else English with a line."""
    for lang, name in (("en", "RULES.md"), ("zh", "RULES.zh.md"), ("ko", "RULES.ko.md")):
        proc = _gpushare("lab", "--rules", "--lang", lang)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == (ROOT / "graders" / name).read_text(encoding="utf-8")
    graders = tmp_path / "graders"
    shutil.copytree(ROOT / "graders", graders, ignore=shutil.ignore_patterns("__pycache__"))
    (graders / "RULES.ko.md").unlink()
    proc = _gpushare("lab", "--rules", "--lang", "ko", env={"GPUSHARE_GRADERS": str(graders)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (ROOT / "graders" / "RULES.md").read_text(encoding="utf-8")
    assert "'ko'" in proc.stderr
