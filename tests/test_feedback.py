"""Feedback a learner can trust (issue 13): the lab's own words, no internals, one charge.

Two kinds of test. The glossary tests read the three catalogs against
``messages/glossary.toml``: no banned variant of a term, and the same term wherever the
English message names it. The feedback tests replay every recorded case of
``tests/feedback_cases.py`` (real submissions recorded on a real lab; the learner's script
runs for real), render every failure in zh, ko and en, and search the text: no Python type
name, repr or bare "-", every ``fail(...)`` of the graders reached by some case.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from gpulab.requestruns import stderr_tail
from gpushare.grading.objects import show_yaml
from gpushare.reports import messages
from gpushare.submissions.workdir import load_yaml_text
from tests.feedback_cases import ALL, Outcome, all_cases, load, replay
from tests.helpers import ALL_CHECKS

ROOT = Path(__file__).resolve().parents[1]
LAB_TEXTS = ROOT / "graders" / "messages"  # the GPU lab's titles, hints, values and glossary
GLOSSARY = tomllib.loads((LAB_TEXTS / "glossary.toml").read_text(encoding="utf-8"))
PLACEHOLDER = re.compile(r"\{[a-z_]+\}")
CODE = [re.compile(p) for p in GLOSSARY["code"]["spans"]]


def _strings(lang: str) -> dict[str, str]:
    """Every catalog string of ``lang`` by its flat key (labels, values, titles, hints, and the
    instructor's words)."""
    return messages.flat(messages.catalog(lang))


def _prose(text: str) -> str:
    """The text as prose: placeholders as N, commands, paths, labels and names removed."""
    text = PLACEHOLDER.sub("N", text)
    for pattern in CODE:
        text = pattern.sub(" ", text)
    return text


TERMS = sorted(GLOSSARY["terms"].items())
# the languages held to the glossary: every one offered but the reference, whose words the
# glossary's "en" patterns find (a new language adds its entries: <lang>, _source, _banned)
OTHERS = [lang for lang in messages.langs() if lang != messages.REFERENCE]


def test_glossary_names_a_source_for_every_word():
    for name, term in TERMS:
        re.compile(term["en"])
        for lang in OTHERS:
            assert term[f"{lang}_source"].strip(), (name, lang)
            for pattern in [term[lang], *term[f"{lang}_banned"]]:
                re.compile(pattern)


@pytest.mark.parametrize("lang", OTHERS)
@pytest.mark.parametrize(("name", "term"), TERMS, ids=[n for n, _ in TERMS])
def test_no_banned_variant(lang, name, term):
    found = {
        key: m.group()
        for key, text in _strings(lang).items()
        for pattern in term[f"{lang}_banned"]
        if (m := re.search(pattern, _prose(text)))
    }
    assert found == {}, f"{lang} uses a variant of {name} the glossary bans"


@pytest.mark.parametrize("lang", OTHERS)
@pytest.mark.parametrize(("name", "term"), TERMS, ids=[n for n, _ in TERMS])
def test_the_same_term_everywhere(lang, name, term):
    """Where the English message names the term, this language uses the glossary's word."""
    en, other = _strings("en"), _strings(lang)
    missing = {
        key: other[key]
        for key, text in en.items()
        if re.search(term["en"], _prose(text)) and not re.search(term[lang], _prose(other[key]))
    }
    assert missing == {}, f"{lang} does not say {term[lang]!r} for {name}"


def test_the_decisions_of_the_second_review():
    """shared/reviews/feedback-native-review-2.md settled these words; the glossary holds them
    and the catalogs follow it (one gloss each, where the review put it)."""
    terms = GLOSSARY["terms"]
    assert terms["namespace"]["zh"] == "名字空间" and "命名空间" in terms["namespace"]["zh_banned"]
    assert terms["memory"]["zh"] == "显存" and "内存" in terms["memory"]["zh_banned"]
    assert terms["grader"]["zh"] == "评分器" and "评分程序" in terms["grader"]["zh_banned"]
    assert terms["pod"]["ko"] == "파드" and terms["configmap"]["ko"] == "컨피그맵"
    assert terms["time_slicing"]["zh"] == "time-slicing" and terms["slice"]["zh"] == "slice"
    assert terms["node_constraint"]["zh"] == "节点选择条件"
    zh, ko = _strings("zh"), _strings("ko")
    glossed = {
        "名字空间（namespace）": ("zh", "checks.1.1.title"),
        "time-slicing（时间片）": ("zh", "checks.1.4.hint"),
        "할당 가능한 자리(슬롯)": ("ko", "checks.2.3.hint"),
    }
    for gloss, (lang, key) in glossed.items():
        where = [k for k, v in (zh if lang == "zh" else ko).items() if gloss in v]
        assert where == [key], gloss
    # the particle: a node advertises in capacity and allocatable (…에), not with them (…로)
    for number in ("2.3", "2.4", "3.2"):
        assert "capacity와 allocatable에 " in ko[f"checks.{number}.title"], number
    assert re.search(terms["advertise"]["ko_banned"][-1], "capacity와 allocatable로 GPU를 알림")
    # ConfigMap in ko only as a YAML kind, never in prose
    assert not any("ConfigMap" in _prose(v) for v in ko.values())


def test_zh_punctuation_is_full_width():
    """Chinese labels end in "：" and lists use "；"; no ASCII colon right after Chinese."""
    zh = _strings("zh")
    assert zh["labels.sep"] == "：" and zh["labels.list_sep"] == "；"
    ascii_colon = {k: v for k, v in zh.items() if re.search(r"[\u4e00-\u9fff]: ", v)}
    assert ascii_colon == {}


def test_hint_facts_name_their_source():
    """Each [source] named in a catalog comment is defined in the lab's en.toml header."""
    en = (LAB_TEXTS / "en.toml").read_text(encoding="utf-8")
    header = en.split("[labels]")[0]
    defined = set(re.findall(r"^#\s+\[([a-z0-9-]+)\]", header, re.M))
    assert {"dp-config", "dp-replicas", "dp-readme", "dp-mig", "mig-guide", "k8s-quota"} <= defined
    for lang in messages.langs():
        text = (LAB_TEXTS / f"{lang}.toml").read_text(encoding="utf-8")
        body = text.split("[checks.", 1)[1]
        used = set(re.findall(r"^#.*?\[([a-z0-9-]+)\]", body, re.M))
        assert used and used <= defined, (lang, used - defined)
    # every hint that states a fact names its source right above it, in every language;
    # these three only give advice (keep the file and the cluster in step, create first...)
    advice_only = {"1.1", "1.2", "4.1"}
    for lang in messages.langs():
        text = (LAB_TEXTS / f"{lang}.toml").read_text(encoding="utf-8")
        for number in messages.catalog(lang)["checks"]:
            block = text.split(f'[checks."{number}"]')[1].split("[checks.")[0]
            sourced = re.search(r"^#.*\[(dp|mig|mps|k8s|lab)[a-z-]*\]", block, re.M)
            assert bool(sourced) != (number in advice_only), (lang, number)


# --- the recorded cases ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    return list(replay(load()))


def test_every_case_fails_exactly_its_checks(outcomes):
    assert {o.case for o in outcomes} == {c.id for c in all_cases()}, "re-record the cases"
    for o in outcomes:
        assert o.errors == {}, (o.case, o.errors)
        expected = set(o.expected)
        if ALL in expected:
            assert set(o.failures) == ALL_CHECKS, o.case
        else:
            assert set(o.failures) == expected, o.case


# A Python type name, a repr, an unfilled placeholder, a bare "-" standing for nothing, a
# Python literal where YAML's was written, or a plain word quoted the way Python quotes it.
INTERNALS = re.compile(
    r"LineDict|FileProblem|NoneType|RunResult|CaseRun|Decimal\(|<class |object at 0x"
    r"|\b[A-Z]\w*\(\w+="
    r"|\b(True|False|None)\b"
    r"|\{[a-z_]+\}"
    r"|(?:^|[\s=:：(])-(?=$|[\s,;；)])"
    r"|: '(?!(true|false|null|yes|no|on|off|~)')[A-Za-z][\w./-]*'"
)
CODE_SPAN = re.compile(r"`[^`]*`")  # a command or the learner's own text in backquotes
DASH = re.compile(r"(?:^|[\s=:：(])-(?=$|[\s,;；)])")


def _rendered(outcomes):
    for o in outcomes:
        for number, failure in sorted(o.failures.items()):
            for lang in messages.langs():
                yield o, number, lang, messages.render_failure(number, failure, lang)


def _ours(text: str) -> str:
    """The text without the learner's own stderr, which is shown verbatim (indented)."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("  "))


def test_no_internals_reach_a_learner(outcomes):
    leaks = {}
    for o, number, lang, text in _rendered(outcomes):
        for line in _ours(text).splitlines():
            m = INTERNALS.search(line)
            if m:
                leaks.setdefault((number, lang), (o.case, line))
    assert leaks == {}


def test_no_bare_dash_anywhere(outcomes):
    """An absent quantity says it is not set, never a bare "-"."""
    dashes = {
        (number, o.case): line
        for o, number, lang, text in _rendered(outcomes)
        for line in _ours(text).splitlines()
        if DASH.search(line)
    }
    assert dashes == {}


def test_found_never_shows_null_or_none(outcomes):
    """A missing field says that it is missing, in the learner's language: never kubectl's
    ``<none>`` nor YAML's ``null``, which read as something the learner wrote."""
    raw = re.compile(r"<none>|(?<![\w.-])null(?![\w.-])")
    hits = {
        (number, lang): (o.case, line)
        for o, number, lang, text in _rendered(outcomes)
        for line in _ours(text).splitlines()
        if raw.search(CODE_SPAN.sub(" ", line)) and "(null)" not in line  # a YAML type's name
    }
    assert hits == {}


def test_feedback_is_in_the_learners_language(outcomes):
    """zh feedback has Chinese and full-width label colons; ko has Hangul; en has neither."""
    cjk, hangul = re.compile(r"[\u4e00-\u9fff]"), re.compile(r"[\uac00-\ud7a3]")
    for _o, _number, lang, text in _rendered(outcomes):
        ours = _ours(text)
        if lang == "zh":
            assert cjk.search(ours) and not hangul.search(ours), text
            assert not re.search(r"^(预期|实际|位置|提示): ", ours, re.M), text
            assert "line " not in ours, text
        elif lang == "ko":
            assert hangul.search(ours), text
            assert "line " not in ours, text
        else:
            assert not cjk.search(ours) and not hangul.search(ours), text


def test_rendered_punctuation_follows_each_language(outcomes):
    """The punctuation lint of tests/test_messages.py on every rendered failure too: values the
    graders put together (a pod's request and node, a list of fields) are text as well."""
    from tests.test_messages import CODE_SPANS, KO_SPACE_PAREN, ZH_HALF_WIDTH

    rules = {"zh": [ZH_HALF_WIDTH], "ko": [KO_SPACE_PAREN, re.compile(";")], "en": []}
    hits = {
        (number, lang): (o.case, line)
        for o, number, lang, text in _rendered(outcomes)
        for line in _ours(text).splitlines()
        for rule in rules[lang]
        if rule.search(CODE_SPANS.sub(" ", line))
    }
    assert hits == {}


def _fail_sites() -> set[tuple[str, int]]:
    sites = set()
    files = [
        *sorted((ROOT / "graders").glob("test_step*.py")),
        ROOT / "graders/gpulab/rules.py",
        ROOT / "src/gpushare/grading/objects.py",  # the generic readers the lab's checks call
    ]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "fail":
                sites.add((path.name, node.lineno))
    return sites


# fail(...) calls no real submission reaches, and why (by the text on their line and above).
UNREACHABLE = {
    "quota_status_filled": "the controller manager fills a quota's status within a second of "
    "its creation; a grade cannot catch the moment before",
    "status.used[": "the quota controller counts the very pods the check has just counted",
}


def test_every_failure_path_is_rendered(outcomes):
    reached = set().union(*(o.sites.values() for o in outcomes))
    missed = {}
    for name, line in sorted(_fail_sites() - reached):
        path = next(
            p
            for p in [
                ROOT / "graders" / name,
                ROOT / "graders/gpulab" / name,
                ROOT / "src/gpushare/grading" / name,
            ]
            if p.exists()
        )
        text = "\n".join(path.read_text().splitlines()[line - 1 : line + 2])
        if not any(marker in text for marker in UNREACHABLE):
            missed[f"{name}:{line}"] = text
    assert missed == {}, "add a case to tests/feedback_cases.py for each"


def _case(outcomes, case_id: str) -> Outcome:
    return next(o for o in outcomes if o.case == case_id)


def test_a_crashing_script_shows_the_end_of_its_stderr(outcomes):
    o = _case(outcomes, "6.x the script crashes with a traceback")
    for lang in messages.langs():
        text = messages.render_failure("6.2", o.failures["6.2"], lang)
        assert "KeyError: 'nvidia.com/gpus'" in text, text
        assert text.count("\n") < 20


def test_a_form_slip_costs_7_2_only(outcomes):
    assert set(
        _case(outcomes, "7.2 only: Yes instead of yes (right answer, wrong form)").failures
    ) == {"7.2"}
    wrong = _case(outcomes, "7.2 and 7.3: No instead of yes (wrong answer, wrong form)")
    en = messages.render_failure("7.3", wrong.failures["7.3"], "en")
    assert "MIG_MEMORY_ISOLATION=No" in en and "yes" not in en.split("wrong:")[1]
    unread = _case(outcomes, "7.2 and 7.3: a value that is not an answer")
    en = messages.render_failure("7.3", unread.failures["7.3"], "en")
    assert "wrong:" not in en and "MPS_MEMORY_ISOLATION" in en and "see 7.2" in en


def test_a_hostname_selector_says_what_hostname_is(outcomes):
    o = _case(outcomes, "8.1 notebook placed by hostname label")
    for lang, words in (("en", "node's name"), ("zh", "节点名"), ("ko", "노드 이름")):
        text = messages.render_failure("8.1", o.failures["8.1"], lang)
        assert "kubernetes.io/hostname" in text and words in text, text


def test_a_config_written_as_a_mapping_says_so(outcomes):
    o = _case(outcomes, "1.2 shared written as a YAML mapping, not a |- string")
    for lang, words in (("en", "a YAML mapping"), ("zh", "YAML 映射"), ("ko", "YAML 매핑")):
        text = messages.render_failure("1.2", o.failures["1.2"], lang)
        assert words in text and "|-" in text, text


def test_config_lines_are_located_in_the_learners_language(outcomes):
    o = _case(outcomes, "1.3 replicas 1")
    where = {
        lang: messages.render_value(o.failures["1.3"].where, lang) for lang in messages.langs()
    }
    assert re.search(r"data\.shared, line \d+", where["en"])
    assert re.search(r"data\.shared，该配置的第 \d+ 行", where["zh"])
    assert re.search(r"data\.shared, 그 설정의 \d+번째 줄", where["ko"])


# --- units --------------------------------------------------------------------------------


def test_show_yaml_writes_yaml_not_python():
    (doc,) = load_yaml_text("a: {b: [1, x]}\nt: 'true'\nf: false\nn: null\n", "x")
    assert show_yaml(doc["a"]) == "{b: [1, x]}"
    assert show_yaml(doc["t"]) == "'true'"
    assert show_yaml(doc["f"]) == "false"
    assert show_yaml(doc["n"]) == "null"
    assert show_yaml("x" * 500).endswith("…") and len(show_yaml("x" * 500)) == 120


def test_stderr_tail_is_capped_and_clean():
    text = "\n".join(f"line {i}" for i in range(100)) + "\n\x1b[31mred\x1b[0m\x07 end\n"
    tail = stderr_tail(text)
    assert tail.splitlines()[-1] == "[31mred[0m end"
    assert len(tail.splitlines()) == 6 and tail.splitlines()[0] == "line 95"
    long = stderr_tail("x" * 5000)
    assert len(long) == 600 and long.startswith("…")
    assert stderr_tail("\n\n  \n") == ""


# --- facts the grader adds (issue 21, review 2) ------------------------------------------------


def _render(o: Outcome, number: str, part: str | None = None) -> dict[str, str]:
    """The failure of ``number`` in every language: the whole text, or one part of it."""
    failure = o.failures[number]
    if part is None:
        return {lang: messages.render_failure(number, failure, lang) for lang in messages.langs()}
    return {lang: messages.render_value(getattr(failure, part), lang) for lang in messages.langs()}


def _keys(value) -> set[str]:
    """Every catalog key in a failure's value (a T, a list or tuple of them, or text)."""
    if isinstance(value, messages.T):
        return {value.key} | set().union(*(_keys(v) for v in value.params.values()))
    if isinstance(value, list | tuple):
        return set().union(*(_keys(v) for v in value)) if value else set()
    return set()


def test_2_4_names_the_labs_8(outcomes):
    """Review 1, 2: the count a wrong replicas gives is not the lab's; the lab's 8 is said."""
    hard = _case(outcomes, "2.4 replicas 2 but 8 hard-coded on lab-node-1")
    expected = _render(hard, "2.4", "expected")
    assert "lab_replicas_note" in _keys(hard.failures["2.4"].expected)
    for text in expected.values():
        assert text.startswith("4") or "均为 4" in text or "모두 4" in text, text
        assert "replicas: 4" in text and "1.5" in text and text.rstrip().endswith("8"), text
    # replicas 1 is refused by the device plugin: the lab's 2 x 4 = 8 is expected, not 2 x 1
    refused = _case(outcomes, "2.4 replicas 1 and lab-node-1 advertising 2 × 1")
    assert {"derive_lab_because", "why_refused"} <= _keys(refused.failures["2.4"].expected)
    for text in _render(refused, "2.4", "expected").values():
        assert re.search(r"(^|[^\d])8([^\d]|$)", text) and "1.3" in text and "1" in text, text
    assert "2.4" not in _case(outcomes, "1.3 replicas 1").failures  # 8 there is right


def test_default_with_sharing_is_told_to_have_none(outcomes):
    """Review 4: 1.3 on default says what the lab asks (no sharing), not how to repair it."""
    o = _case(outcomes, "1.3 sharing written as a string in default")
    assert _keys(o.failures["1.3"].expected) == {"default_no_sharing"}
    for text in _render(o, "1.3", "expected").values():
        assert "sharing" in text and "1.6" in text and "YAML" not in text, text


def test_a_missing_answer_is_missing_not_unreadable(outcomes):
    """Review 5 / issue: a key left out or a value left empty is no answer; ``maybe`` is one
    that cannot be read."""
    for case, key in (
        ("7.2 and 7.3: a key left out", "MIG_FAULT_ISOLATION"),
        ("7.2 and 7.3: a value left empty", "MPS_MEMORY_ISOLATION"),
    ):
        o = _case(outcomes, case)
        keys = _keys(o.failures["7.3"].found)
        assert "missing_answers" in keys and "unread_answers" not in keys, case
        en = _render(o, "7.3", "found")["en"]
        assert f"no answer (see 7.2): {key}" in en, en
    o = _case(outcomes, "7.2 and 7.3: a value that is not an answer")
    assert "missing_answers" not in _keys(o.failures["7.3"].found)


def test_hints_say_where_the_lab_text_is_wrong_and_name_the_labels():
    """Review 6, 10: 3.2 says the lab's "A100 40GB" is wrong; 3.1 names both labels."""
    for lang, wrong in (("en", "slip"), ("zh", "有误"), ("ko", "잘못된 표기")):
        text = messages.hint("3.2", lang)
        assert "A100 40GB" in text and wrong in text and "H100 80GB" in text, text
        text = messages.hint("3.1", lang)
        assert "nvidia.com/mig.strategy=mixed" in text and "nvidia.com/gpu.product" in text


def test_a_config_that_is_a_list_says_list(outcomes):
    """Review 25: the grader knows it is a list; it says so."""
    o = _case(outcomes, "1.x the shared config is a YAML list")
    for number in ("1.3", "1.4", "1.5", "7.1"):
        found = _render(o, number, "found")
        assert "a YAML list" in found["en"], found
        assert "YAML 列表" in found["zh"] and "YAML 리스트" in found["ko"], found


def test_a_node_that_also_advertises_the_profile_is_named(outcomes):
    """Review 26: mig-job went to lab-node-0 because lab-node-0 offers the profile too."""
    o = _case(outcomes, "4.3 mig-job on lab-node-0, which advertises the profile too")
    assert "also_advertises" in _keys(o.failures["4.3"].found)
    for text in _render(o, "4.3", "found").values():
        assert text.count("lab-node-0") == 2 and "nvidia.com/mig-1g.10gb" in text, text


def test_a_pending_pod_says_why(outcomes):
    """Review 27: the scheduler's own reason, from the pod's PodScheduled condition."""
    for case, number in (
        ("4.3 mig-job never scheduled (MIG node cordoned)", "4.3"),
        ("4.4 plain-gpu never scheduled (GPU nodes cordoned)", "4.4"),
    ):
        o = _case(outcomes, case)
        assert "scheduler_says" in _keys(o.failures[number].found), case
        for text in _render(o, number, "found").values():
            assert "unschedulable" in text and "0/3 nodes are available" in text, text
            assert "preemption" not in text.lower(), text


def test_binarydata_is_named(outcomes):
    """Review 28."""
    o = _case(outcomes, "1.2 the ConfigMap file has binaryData instead of data")
    for text in _render(o, "1.2", "found").values():
        assert "binaryData" in text and "data" in text.replace("binaryData", ""), text


def test_utf16_is_told_apart_from_binary(outcomes):
    """Review 29: NUL bytes of UTF-16 text (PowerShell's >) are named as such."""
    o = _case(outcomes, "5.5 quota-denied.txt is UTF-16 (PowerShell's redirection)")
    assert o.failures["5.5"].problem.key == "file_utf16"
    for text in _render(o, "5.5", "problem").values():
        assert "UTF-16" in text and "PowerShell" in text and "UTF-8" in text, text
    o = _case(outcomes, "7.2 and 7.3: isolation.txt holds binary data")
    assert o.failures["7.2"].problem.key == "file_binary"


def test_utf16_detection(tmp_path):
    from gpushare.submissions.workdir import Workdir

    text = "MIG_MEMORY_ISOLATION=yes\n"
    for name, raw in (
        ("bom.txt", text.encode("utf-16")),
        ("le.txt", text.encode("utf-16-le")),
        ("be.txt", text.encode("utf-16-be")),
        ("binary.txt", b"\x00\x01\x02binary"),
        ("elf.txt", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))),
    ):
        (tmp_path / name).write_bytes(raw)
    work = Workdir(tmp_path)
    for name, key in (
        ("bom.txt", "file_utf16"),
        ("le.txt", "file_utf16"),
        ("be.txt", "file_utf16"),
        ("binary.txt", "file_binary"),
        ("elf.txt", "file_binary"),
    ):
        assert work.read_text(name).problem.key == key, name


def test_a_deleted_lab_node_asks_for_a_reset(outcomes):
    """Review 30: the learner cannot create a lab node; a reset brings it back."""
    o = _case(outcomes, "fresh lab with lab-node-0 and lab-node-2 deleted")
    for number, node in (("2.1", "lab-node-0"), ("2.3", "lab-node-0"), ("3.1", "lab-node-2")):
        assert o.failures[number].problem.key == "lab_node_missing"
        for text in _render(o, number, "problem").values():
            assert node in text and "make reset" in text, text
    # review 3, N1: a reset also puts every node's labels and status back to fresh, so the
    # node patches of steps 2 and 3 are to be redone, not only the files applied again
    redo = {
        "en": "redo the node labels and status patches of steps 2 and 3",
        "zh": "重做第 2、3 步的节点标签和 status patch",
        "ko": "2·3단계의 노드 레이블과 status patch를 다시",
    }
    for lang, text in _render(o, "2.1", "problem").items():
        assert redo[lang] in text, text


def test_a_crash_is_called_a_crash(outcomes):
    """Review 31: no answer and an error exit is a crash, not "did not print OK"."""
    o = _case(outcomes, "6.x the script crashes with a traceback")
    for number in ("6.2", "6.3", "6.4"):
        assert o.failures[number].problem.key == "script_reason_crashed", number
    quiet = _case(outcomes, "6.x the script prints nothing")  # exit 0: not a crash
    assert {quiet.failures[n].problem.key for n in ("6.2", "6.3", "6.4")} == {
        "script_reason_missing_over_line",
        "script_reason_missing_ok",
    }


def test_node_conditions_read_as_set(outcomes):
    """Review 42."""
    o = _case(outcomes, "4.2 mig-job pinned with nodeName in the file")
    found = _render(o, "4.2", "found")
    assert found == {"en": "nodeName set", "zh": "设置了 nodeName", "ko": "설정된 항목: nodeName"}


def test_step_6_shows_no_internals(outcomes):
    """Review 46, 47, 48: no seed, no fixture path, no temporary or interpreter path; several
    expected lines say "one per line"; the first failing case is called that."""
    for o, number, _lang, text in _rendered(outcomes):
        if number.startswith("6."):
            for internal in ("seed", "fixtures/", "gpushare-replay", "/opt/", "/tmp/"):
                assert internal not in text, (o.case, number, text)
    o = _case(outcomes, "6.5 script misses quoted quantities")
    text = _render(o, "6.5")
    assert "first failing case:" in text["en"] and "(one per line)" in text["en"]
    assert "第一个出错的用例：" in text["zh"] and "（每行一条）" in text["zh"]
    assert "첫 번째로 틀린 케이스:" in text["ko"] and "(한 줄에 하나씩)" in text["ko"]
    crash = _render(_case(outcomes, "6.x the script crashes with a traceback"), "6.2")["en"]
    assert '"/root/gpushare/bin/check-request.sh", line 4' in crash, crash


def test_interpreter_paths_are_neutral():
    from graders.test_step6_check_request import neutral_paths

    err = (
        'File "/opt/gpushare-python/lib/python3.11/site-packages/yaml/__init__.py", line 1\n'
        'File "/root/gpushare/bin/check-request.sh", line 4, in <module>\n'
        "/opt/gpushare-python/bin/python3.11: No module named yaml\n"
        'File "/usr/lib/python3/dist-packages/yaml/composer.py", line 41\n'
    )
    assert neutral_paths(err).splitlines() == [
        'File "…/lib/python3.11/site-packages/yaml/__init__.py", line 1',
        'File "/root/gpushare/bin/check-request.sh", line 4, in <module>',
        "python3.11: No module named yaml",
        'File "…/lib/python3/dist-packages/yaml/composer.py", line 41',
    ]


def test_pods_in_another_namespace_are_found_there(outcomes):
    """Issue 21: the step 4 pods exist, but in default, because the file sets no namespace."""
    o = _case(outcomes, "4.x mig-job.yaml sets no namespace: its pods went to default")
    for number in ("4.1", "4.2", "4.3", "4.4"):
        assert {"pod_in_namespaces", "file_sets_no_namespace"} <= _keys(o.failures[number].found), (
            number
        )
        for text in _render(o, number, "found").values():
            assert "default" in text and "-n gpu-share" in text, text
    for number in ("4.2", "4.3", "4.4"):
        assert _keys(o.failures[number].expected) == {"pod_in_namespace"}


def test_a_misplaced_field_is_told_where_it_belongs(outcomes):
    """Issue 21: failRequestsGreaterThanOne one level off is not "unknown" and "missing".
    The plugin drops it there, which costs 1.3 nothing: 1.4 says where it is and belongs."""
    o = _case(outcomes, "1.4 failRequestsGreaterThanOne under sharing, where the plugin drops it")
    assert "1.3" not in o.failures
    assert "field_found_at" in _keys(o.failures["1.4"].found)
    for text in _render(o, "1.4", "found").values():
        assert "sharing.timeSlicing" in text, text
    assert "written under sharing," in _render(o, "1.4", "found")["en"]


def test_8_2_hint_does_not_praise_more_gpus(outcomes):
    """Issue 21: "training is fastest on a whole GPU" must not meet a pod asking for two."""
    for case in (
        "8.2 batch-train recreated asking for 2 GPUs (the file asks for 1)",
        "8.2 notebook recreated asking for 2 GPUs (the file asks for 1)",
    ):
        o = _case(outcomes, case)
        assert o.failures["8.2"].hint.key == "hint_one_device_each", case
        text = _render(o, "8.2")
        assert "fastest" not in text["en"] and "最快" not in text["zh"], text
        assert "가장 빠릅" not in text["ko"], text
        # review 3, N2: "more is not faster" holds on the time-sliced node only; batch-train
        # belongs on the unshared node, where two nvidia.com/gpu are two real GPUs
        assert "On the time-sliced node more slices" in text["en"], text
        assert "在 time-slicing 节点上多申请 slice" in text["zh"], text
        assert "time-slicing 노드에서는 slice를 더 요청해도" in text["ko"], text
    # where the pod is on the wrong node, the check's own hint still applies
    o = _case(outcomes, "8.2 batch-train running on the shared node")
    assert o.failures["8.2"].hint is None


def test_a_read_an_old_snapshot_lacks_does_not_void_the_grade():
    """The read of pods in other namespaces only explains; a recording without it grades."""
    from gpulab import HINT_QUERIES, QUERIES, namespaces_of_pod
    from gpushare.grading.labstate import LabState

    data = load()
    old = next(c for c in data["clusters"].values() if "pods:elsewhere" not in c)
    state = LabState.recorded(old, QUERIES, HINT_QUERIES)
    assert state.wait_all() is None
    assert namespaces_of_pod(state, "mig-job") == []


def test_pending_reason_is_one_clean_line():
    from gpushare.grading.labstate import pending_reason

    pod = {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "message": "0/3 nodes are available:\x1b[31m 1 Insufficient x.\n"
                    " preemption: not helpful.",
                }
            ]
        }
    }
    assert pending_reason(pod) == "0/3 nodes are available: [31m 1 Insufficient x."
    pod["status"]["conditions"][0]["status"] = "True"
    assert pending_reason(pod) is None
    assert pending_reason({}) is None


def test_one_config_slip_names_one_root(outcomes):
    """A config the plugin refuses, renames or misreads fails its own check, and every check
    that follows from it names the same root (``cause``), so the feedback tells it once."""
    refused, renamed = "config:shared:refused", "config:shared:renamed"
    dropped = "config:shared:ignored:sharing.timeSlcing"
    roots = {
        "1.5 renameByDefault: yes (a YAML 1.1 boolean) advertises nvidia.com/gpu.shared": {
            "1.5": renamed
        },
        "2.4 lab-node-1 advertises nvidia.com/gpu.shared: 8, as its renaming config would": {
            "1.5": renamed,
            "2.4": renamed,
        },
        "8.1 notebook asks for nvidia.com/gpu.shared, the name the renaming config advertises": {
            "1.5": renamed,
            "8.1": renamed,
        },
        "1.3 shared names the resource in upper case (nvidia.com/GPU)": {
            "1.3": refused,
            "1.5": refused,
        },
        "1.3 and 1.4: failRequestsGreaterThanOne quoted as 'true', which the plugin refuses": {
            "1.3": refused,
            "1.4": refused,
        },
        "2.4 replicas 1 and lab-node-1 advertising 2 × 1": {
            "1.3": refused,
            "1.5": refused,
            "2.4": refused,
        },
        "1.4 and 1.5: misspelt field sharing.timeSlcing, which the plugin drops": {
            "1.4": dropped,
            "1.5": dropped,
        },
        "7.1 mps config with migStrategy mixed, which the plugin refuses": {
            "7.1": "config:mps:refused"
        },
        "1.x the ConfigMap deleted from the cluster": dict.fromkeys(
            ("1.3", "1.4", "1.5", "1.6", "7.1"), "configmap:absent"
        ),
    }
    for case, want in roots.items():
        o = _case(outcomes, case)
        assert {n: o.failures[n].cause for n in want} == want, case
    # a slip of the node alone has no root beyond its own check
    assert _case(outcomes, "2.4 forgot to multiply (2 on lab-node-1)").failures["2.4"].cause is None


def test_2_4_never_reads_a_count_from_a_config_that_gives_none(outcomes):
    """The shared config refused, renamed or sharing some GPUs advertises no nvidia.com/gpu
    count to read: 2.4 says the lab's replicas are used, and why; never "read from the
    ConfigMap"."""
    for case, why in (
        ("2.4 replicas 1 and lab-node-1 advertising 2 × 1", "why_refused"),
        (
            "2.4 lab-node-1 advertises nvidia.com/gpu.shared: 8, as its renaming config would",
            "why_renamed",
        ),
    ):
        keys = _keys(_case(outcomes, case).failures["2.4"].expected)
        assert {"derive_lab_because", why} <= keys and "derive_replicas" not in keys, case
    for case in (  # and these advertise the lab's 8 already: 2.4 passes
        "1.5 renameByDefault: yes (a YAML 1.1 boolean) advertises nvidia.com/gpu.shared",
        "1.5 shared devices: [0], only one GPU of a node shared",
        "1.3 shared devices malformed (devices: some)",
        "valid: shared lists nvidia.com/gpu twice (2, then 4): the plugin uses 4",
    ):
        assert "2.4" not in _case(outcomes, case).failures, case


# A finding whose check's own hint would send the learner elsewhere carries its own.
FINDING_HINTS = {
    "6.x OVER lines name the pod, not the container": {
        "6.2": "hint_container_name",
        "6.5": "hint_container_name",
    },
    "6.x the script always exits 0": {"6.2": "hint_exit_status", "6.5": "hint_exit_status"},
    "6.x the answer printed on standard error": {"6.2": "hint_answer_on_stdout"},
    "6.1 script not executable": {"6.1": "hint_not_executable"},
    "5.1 quota key without requests. (nvidia.com/gpu)": {"5.1": "hint_quota_key_prefix"},
    "3.1 nvidia.com/gpu.product set as an annotation": {"3.1": "hint_annotation_not_label"},
    "8.1 placement.yaml has a YAML syntax error": {"8.1": "hint_yaml_syntax"},
    "1.2 a config in the file is not valid YAML": {"1.2": "hint_yaml_in_value"},
    "4.3 mig-job never scheduled (MIG node cordoned)": {"4.3": "hint_node_cordoned"},
    "4.4 plain-gpu Pending: the GPU nodes tainted": {"4.4": "hint_node_tainted"},
    "4.x mig-job.yaml sets no namespace: its pods went to default": {"4.1": "hint_pods_elsewhere"},
    "5.4 team-over.yaml sets no namespace and went to default": {
        "5.4": "hint_over_elsewhere",
        "5.5": "hint_denial_after_elsewhere",
    },
    "5.4 and 5.5: team-over.yaml applied before the team pods filled the quota": {
        "5.4": "hint_applied_before_full",
        "5.5": "hint_denial_after_admitted",
    },
    "7.2 and 7.3: a line that is not KEY=value": {"7.2": "hint_key_value_form"},
    "4.2 plain-gpu with a preferred node affinity": {"4.2": "hint_preferred_affinity"},
}


def test_each_finding_carries_its_own_hint(outcomes):
    got = {
        o.case: {
            n: f.hint.key if f.hint is not None else None
            for n, f in o.failures.items()
            if n in FINDING_HINTS[o.case]
        }
        for o in outcomes
        if o.case in FINDING_HINTS
    }
    assert got == FINDING_HINTS
    # and a check whose finding has none of these keeps its own hint
    plain = _case(outcomes, "6.2 script reads only requests")
    assert plain.failures["6.2"].hint is None


def test_findings_say_what_was_found(outcomes):
    """The headline names the fault, and Found shows what the learner wrote, never <none>."""
    stderr = _case(outcomes, "6.x the answer printed on standard error").failures["6.2"]
    assert stderr.problem.key == "script_reason_stderr"
    pod = _case(outcomes, "6.x OVER lines name the pod, not the container").failures["6.2"]
    assert pod.problem.key == "script_reason_pod_name"
    quota = _case(outcomes, "5.1 quota key without requests. (nvidia.com/gpu)").failures["5.1"]
    en = messages.render_failure("5.1", quota, "en")
    assert "nvidia.com/gpu: '2'" in en and "<none>" not in en
    note = _case(outcomes, "3.1 nvidia.com/gpu.product set as an annotation").failures["3.1"]
    assert "annotation_not_label" in _keys(note.found)


def test_where_into_a_multi_pod_file_names_the_pod(outcomes):
    """k8s/placement.yaml:37 (pod batch-train): a line number alone makes the learner count
    documents. A file that cannot be read as YAML has no pods to name."""
    files = ("k8s/mig-job.yaml:", "k8s/placement.yaml:")
    unnamed = {}
    for o, number, lang, _text in _rendered(outcomes):
        failure = o.failures[number]
        if failure.problem is not None and failure.problem.key.startswith("yaml_"):
            continue
        where = render_where(failure, lang)
        if any(f in where for f in files) and not re.search(
            r"(\(pod |（Pod |\(파드 )\S+[)）]", where
        ):
            unnamed[(o.case, number, lang)] = where
    assert unnamed == {}
    named = _case(outcomes, "8.1 batch-train pinned by nodeName").failures["8.1"]
    assert messages.render_value(named.where, "en").endswith("(pod batch-train)")


def render_where(failure, lang: str) -> str:
    return messages.render_value(failure.where, lang) if failure.where is not None else ""


def test_a_quoted_value_names_the_type_it_should_be(outcomes):
    """Review 3, N21: replicas takes a whole number and failRequestsGreaterThanOne a boolean;
    a quoted one says which, not "a number or a boolean"."""
    replicas = _case(outcomes, "1.3 replicas quoted as '4'")
    flag = _case(
        outcomes,
        "1.3 and 1.4: failRequestsGreaterThanOne quoted as 'true', which the plugin refuses",
    )
    assert "a whole number" in _render(replicas, "1.5", "found")["en"]
    assert "true or false" in _render(flag, "1.4", "found")["en"]
    assert "整数" in _render(replicas, "1.5", "found")["zh"]
    assert "정수" in _render(replicas, "1.5", "found")["ko"]


def test_step_8_names_a_nodes_role_before_its_name(outcomes):
    """Review 3, N33: step 8 teaches choosing the node by its role; Expected says the role."""
    o = _case(outcomes, "8.2 batch-train running on the shared node")
    assert _render(o, "8.2", "expected") == {
        "en": "on the unshared node (lab-node-0)",
        "zh": "在不共享的节点（lab-node-0）上",
        "ko": "공유하지 않는 노드(lab-node-0)에 있음",
    }
    o = _case(outcomes, "8.1 node affinity selecting two nodes")
    assert "labels that select only the" in _render(o, "8.1", "expected")["en"]


def test_an_apiserver_refusal_is_said_in_the_learners_language_with_its_words_quoted():
    """5.4's dry-run refused for a missing namespace (or another quota, or any reason): zh and
    ko say why in their own words; the apiserver's English stays, as a quote."""
    import test_step5_quota as step5
    from gpushare.reports import messages

    said = step5._denial_said('namespaces "team-a" not found')
    assert said.key == "apiserver_no_namespace" and said.params["namespace"] == "team-a"
    other = step5._denial_said('pods "x" is forbidden: exceeded quota: other-q, requested: ...')
    assert other.key == "apiserver_other_quota" and other.params["quota"] == "other-q"
    assert step5._denial_said("Internal error").key == "apiserver_refused"
    for lang in ("zh", "ko"):
        text = messages.render_value(said, lang)
        assert text.index("“") < text.index('namespaces "team-a" not found') < text.index("”")
        assert not text.startswith("namespaces")
