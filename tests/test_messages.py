"""Message catalogs are data, complete in zh, ko and en, with the same placeholders."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpushare.grading.checks import CheckFailed, T
from gpushare.reports import messages

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


@pytest.mark.parametrize("lang", ["zh", "ko"])
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
    from gpushare.grading import requestcases

    for reason in [*requestcases.REASONS, "timeout", "killed", "not_run", "crashed"]:
        assert f"script_reason_{reason}" in values
    for problem in ("missing", "dangling_link", "directory", "not_executable", "not_regular"):
        assert f"script_problem_{problem}" in values


def test_every_check_has_a_title_and_hint_in_every_language():
    numbers = set()
    for path in ROOT.glob("graders/test_step*.py"):
        numbers |= set(re.findall(r'@check\("(\d+\.\d+)"', path.read_text()))
    assert len(numbers) == 33
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
