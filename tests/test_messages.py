"""Message catalogs are data, complete in every language, with the same placeholders."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpushare.grading.checks import CheckFailed, T
from gpushare.reports import messages
from tests.helpers import ALL_CHECKS

ROOT = Path(__file__).resolve().parents[1]


def _flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


@pytest.mark.parametrize("lang", [lang for lang in messages.LANGS if lang != "en"])
def test_catalog_has_every_key_with_the_same_placeholders(lang):
    en = _flatten(messages.catalog("en"))
    other = _flatten(messages.catalog(lang))
    assert sorted(other) == sorted(en)
    for key, text in en.items():
        assert messages.placeholders(other[key]) == messages.placeholders(text), key


def _keys_used_in_code() -> set[str]:
    """Every literal catalog key passed to T(...) in the graders and the package."""
    keys: set[str] = set()
    for path in [*ROOT.glob("graders/*.py"), *ROOT.glob("src/gpushare/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "T"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                keys.add(node.args[0].value)
    return keys


def test_every_key_used_in_code_exists():
    values = messages.catalog("en")["values"]
    missing = sorted(k for k in _keys_used_in_code() if k not in values)
    assert missing == []
    # keys built at run time: script problems and judge reasons
    from gpulab import requestcases

    for reason in [*requestcases.REASONS, "timeout", "killed", "not_run", "crashed"]:
        assert f"script_reason_{reason}" in values
    for problem in ("missing", "dangling_link", "directory", "not_executable", "not_regular"):
        assert f"script_problem_{problem}" in values


def test_every_check_has_a_title_and_hint_in_every_language():
    numbers = set()
    for path in ROOT.glob("graders/test_step*.py"):
        numbers |= set(re.findall(r'@check\("(\d+\.\d+)"', path.read_text()))
    assert numbers == ALL_CHECKS  # what the runner loads, as the files spell it
    for lang in messages.LANGS:
        checks = messages.catalog(lang)["checks"]
        for n in numbers:
            assert checks[n]["title"].strip() and checks[n]["hint"].strip(), (lang, n)


HANGUL = re.compile(r"[\uac00-\ud7a3]")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize(("lang", "script"), [("zh", CJK), ("ko", HANGUL), ("en", None)])
def test_feedback_is_in_the_learners_language(lang, script):
    failure = CheckFailed(
        expected=T("gpu_count", value=8, derivation=T("derive_replicas", gpus=2, replicas=4)),
        found="4",
        where=T("node_status", node="lab-node-1", fields="capacity", resource="nvidia.com/gpu"),
    )
    text = messages.render_failure("2.4", failure, lang)
    assert "8" in text and "lab-node-1" in text and "nvidia.com/gpu" in text
    if script is not None:
        assert script.search(text), text
    else:
        assert not CJK.search(text) and not HANGUL.search(text)
        assert "Expected: 8 in capacity and in allocatable" in text


def test_language_choice(monkeypatch):
    for var in ("GPUSHARE_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    assert messages.resolve_lang(None) == "zh"
    monkeypatch.setenv("LANG", "ko_KR.UTF-8")
    assert messages.resolve_lang(None) == "ko"
    monkeypatch.setenv("GPUSHARE_LANG", "en")
    assert messages.resolve_lang(None) == "en"
    assert messages.resolve_lang("zh") == "zh"
    with pytest.raises(ValueError):
        messages.resolve_lang("fr")


# --- punctuation lint (review 2, items 43 and 45) ------------------------------------------

IDEOGRAPH = "\u4e00-\u9fff"
# a half-width , : ; ( ) ! ? touching a Chinese character on either side, or ending a Chinese
# word (the zh catalog writes ，：；（）！？ there; "status.capacity, allocatable" between Latin
# words is not Chinese text and may keep its comma)
ZH_HALF_WIDTH = re.compile(
    rf"[{IDEOGRAPH}] ?[,:;()!?]|[,:;()!?] ?[{IDEOGRAPH}]|[{IDEOGRAPH}][,:;!?]"
)
# a space before an opening parenthesis right after a word ("매핑 (key: …)"): Korean writes
# "매핑(key: …)"; after a sentence's end (". (…)") the space stays
KO_SPACE_PAREN = re.compile(r"[\w})\]'\"…] \(")
CODE_SPANS = re.compile(r"#!|`[^`]*`")  # a shebang, a command in backquotes


def _catalog_strings(lang: str) -> dict[str, str]:
    return {k: v for k, v in _flatten(messages.catalog(lang)).items() if isinstance(v, str)}


def _lint(pattern: re.Pattern[str], lang: str) -> dict[str, str]:
    hits = {}
    for key, text in _catalog_strings(lang).items():
        m = pattern.search(CODE_SPANS.sub(" ", text))
        if m:
            hits[key] = m.group()
    return hits


def test_zh_has_no_half_width_punctuation_in_chinese_text():
    assert _lint(ZH_HALF_WIDTH, "zh") == {}


def test_ko_has_no_space_before_a_parenthesis_and_no_semicolon():
    assert _lint(KO_SPACE_PAREN, "ko") == {}
    assert _lint(re.compile(r";"), "ko") == {}


@pytest.mark.parametrize(
    ("pattern", "text", "flagged"),
    [
        (ZH_HALF_WIDTH, "replicas：不小于 2 (整数)", True),
        (ZH_HALF_WIDTH, "名字空间,节点", True),
        (ZH_HALF_WIDTH, "实际: 不存在", True),
        (ZH_HALF_WIDTH, "team-a-1 (nvidia.com/gpu=1, lab-node-1)，名字空间", False),
        (ZH_HALF_WIDTH, "replicas 应为不小于 2 的整数（replicas: 4）", False),
        (KO_SPACE_PAREN, "YAML 매핑 (key: value 형식의 줄)", True),
        (KO_SPACE_PAREN, "모두 {value} ({derivation})", True),
        (KO_SPACE_PAREN, "YAML 매핑(key: value 형식의 줄)", False),
        (KO_SPACE_PAREN, "그런 GPU가 없습니다. (MIG 장치를 노출하는 것은)", False),
    ],
)
def test_the_punctuation_lint_catches_what_the_review_found(pattern, text, flagged):
    """The lint itself, proven both ways on the review's own examples."""
    assert bool(pattern.search(text)) is flagged, text


def test_a_translatable_value_survives_a_results_file():
    """A could-not-grade reason kept as data in results.json is said again in any language; a
    file that is not ours (a stranger's results.json) reads as text, never a crash."""
    import json

    from gpushare.reports.messages import T, from_data, render_value, to_data

    value = T("snapshot_altered", members=("work/k8s/a.yaml", "cluster.json"))
    back = from_data(json.loads(json.dumps(to_data(value))))
    for lang in messages.LANGS:
        assert render_value(back, lang) == render_value(value, lang)
    assert "work/k8s/a.yaml、cluster.json" in render_value(back, "zh")
    assert render_value(from_data({"key": "no_such_key", "params": []}), "zh") == "no_such_key"
    assert from_data({"params": {}}) == "{'params': {}}" and from_data(None) is None


def test_a_language_is_one_catalog_file(tmp_path):
    """``LANGS`` is the catalog files present: a copy of the module beside a new ``xx.toml``
    knows ``xx`` (the glossary, which holds every language's terms, is no language)."""
    (tmp_path / "messages").mkdir()
    for catalog in messages.CATALOGS.glob("*.toml"):
        shutil.copy(catalog, tmp_path / "messages" / catalog.name)
    shutil.copy(messages.CATALOGS / "en.toml", tmp_path / "messages" / "xx.toml")
    shutil.copy(messages.__file__, tmp_path / "copied.py")
    probe = (
        "import json, copied as m; "
        "print(json.dumps([m.LANGS, m.resolve_lang('xx'), m.title('1.1', 'xx')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    langs, chosen, title = json.loads(out.stdout)
    assert langs == ["zh", "en", "ko", "xx"] and chosen == "xx"
    assert title == messages.title("1.1", "en")
    assert messages.LANGS[0] == messages.DEFAULT_LANG
    assert set(messages.LANGS) == {"zh", "ko", "en"}  # the catalogs of this checkout
