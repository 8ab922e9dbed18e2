"""Reading untrusted learner files (no cluster needed): every problem is a value, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

from gpushare.submissions.workdir import FileProblem, Workdir, load_yaml_text


def _wd(tmp_path: Path, rel: str, content: bytes | str) -> Workdir:
    p = tmp_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content.encode() if isinstance(content, str) else content)
    return Workdir(tmp_path)


def test_missing_directory_and_dangling_link(tmp_path):
    wd = Workdir(tmp_path)
    assert wd.read_text("out/x.txt").problem.key == "file_missing"
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "dir.txt").mkdir()
    assert wd.read_text("out/dir.txt").problem.key == "file_is_directory"
    os.symlink(tmp_path / "nowhere", tmp_path / "out" / "link.txt")
    assert wd.read_text("out/link.txt").problem.key == "file_dangling_link"


def test_fifo_and_devices_are_not_read(tmp_path):
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "fifo.txt")  # reading it would block forever
    os.symlink("/dev/zero", tmp_path / "out" / "zero.txt")  # reading it would never end
    wd = Workdir(tmp_path)
    assert wd.read_text("out/fifo.txt").problem.key == "file_not_regular"
    zero = wd.read_text("out/zero.txt")  # a link out of the work dir: never followed
    assert zero.problem.key == "file_link_outside" and zero.problem.params["target"] == "/dev/zero"


def test_links_inside_are_followed_links_out_are_not(tmp_path):
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "a.yaml").write_text("kind: Pod\n")
    os.symlink("a.yaml", tmp_path / "k8s" / "b.yaml")
    os.symlink("/etc/hostname", tmp_path / "k8s" / "c.yaml")
    wd = Workdir(tmp_path)
    assert wd.read_text("k8s/b.yaml") == "kind: Pod\n"
    assert wd.read_text("k8s/c.yaml").problem.key == "file_link_outside"


def test_binary_non_utf8_empty_and_huge(tmp_path):
    assert _wd(tmp_path, "a", b"\x00\x01ELF").read_text("a").problem.key == "file_binary"
    bad = _wd(tmp_path, "b", b"ok\nstill ok\n\xff\xfe bad\n").read_text("b")
    assert bad.problem.key == "file_not_utf8" and bad.line == 3
    assert _wd(tmp_path, "c", " \n\n").read_text("c").problem.key == "file_empty"
    big = _wd(tmp_path, "d", b"x" * (1024 * 1024 + 1)).read_text("d")
    assert big.problem.key == "file_too_large"


def test_crlf_bom_and_spaces_are_tolerated(tmp_path):
    wd = _wd(tmp_path, "out/t.txt", "\ufeffA=yes  \r\n\r\n  B = no\r\n# comment\r\n")
    assert wd.key_values("out/t.txt") == {"A": ("yes", 1), "B": ("no", 3)}


def test_key_value_problems_name_the_line(tmp_path):
    wd = _wd(tmp_path, "o.txt", "A=1\nnot a pair\n")
    problem = wd.key_values("o.txt")
    assert isinstance(problem, FileProblem)
    assert problem.problem.key == "line_not_key_value" and problem.where == "o.txt:2"
    dup = _wd(tmp_path, "p.txt", "A=1\nA=2\n").key_values("p.txt")
    assert dup.problem.key == "line_duplicate_key" and dup.line == 2


def test_malformed_yaml_gives_line_and_column(tmp_path):
    wd = _wd(tmp_path, "k8s/x.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [oops\n")
    problem = wd.objects("k8s/x.yaml")
    assert isinstance(problem, FileProblem)
    assert problem.problem.key == "yaml_invalid"
    assert problem.line is not None and problem.line >= 4
    assert problem.where.startswith("k8s/x.yaml:")
    assert problem.problem.params["column"] >= 1


def test_yaml_lines_are_remembered_and_lists_flattened(tmp_path):
    text = (
        "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata:\n    name: a\n"
        "---\n\n---\nkind: Pod\nmetadata:\n  name: b\n"
    )
    objs = _wd(tmp_path, "k.yaml", text).objects("k.yaml")
    assert [o["metadata"]["name"] for o in objs] == ["a", "b"]
    assert objs[1].line == 10 and objs[1]["metadata"].line_of("name") == 12


def test_non_object_documents_and_hostile_yaml(tmp_path):
    assert _wd(tmp_path, "s.yaml", "just a string\n").objects("s.yaml").problem.key == (
        "yaml_not_object"
    )
    # python-specific tags are refused by the safe loader rather than executed
    tag = _wd(tmp_path, "t.yaml", "!!python/object/apply:os.system ['true']\n").objects("t.yaml")
    assert isinstance(tag, FileProblem) and tag.problem.key == "yaml_invalid"
    # a self-referencing alias does not hang or crash
    rec = load_yaml_text("a: &x [*x]\n", "r.yaml")
    assert isinstance(rec, list | FileProblem)


# --------------------------------------------------------------------------- a missing work dir


def test_a_missing_work_dir_is_one_problem_with_one_cause(tmp_path):
    """Every file of a work dir that does not exist fails for that one root (its ``cause``),
    not as so many files the learner forgot."""
    from gpushare.grading.checks import WORKDIR_ABSENT

    root = tmp_path / "gpushare"
    wd = Workdir(root)
    for read in (wd.read_text("k8s/a.yaml"), wd.objects("k8s/b.yaml"), wd.key_values("out/c")):
        assert isinstance(read, FileProblem)
        assert read.problem.key == "workdir_absent" and read.cause == WORKDIR_ABSENT
        assert read.problem.params["root"] == str(root)
    (tmp_path / "file").write_text("x")
    assert Workdir(tmp_path / "file").read_text("k8s/a.yaml").cause == WORKDIR_ABSENT
    root.mkdir()  # a work dir that exists: its missing files are the learner's own
    here = Workdir(root).read_text("k8s/a.yaml")
    assert here.problem.key == "file_missing" and here.cause is None


def test_the_scripts_check_points_to_the_missing_work_dir(tmp_path):
    from gpulab.requestruns import RequestRuns
    from gpushare.grading.checks import WORKDIR_ABSENT

    (tmp_path / "here").mkdir()
    for folder, cause, key in (
        ("gone", WORKDIR_ABSENT, "workdir_absent"),
        ("here", None, "script_problem_missing"),
    ):
        runs = RequestRuns(tmp_path / folder, seed=1)
        try:
            assert runs.cause == cause and runs.problem_said().key == key
        finally:
            runs.close()


def _report(workdir: str, absent: bool, lang: str):
    from gpushare.reports.results import CheckResult, Report

    check = CheckResult(
        number="1.2",
        step=1,
        title="t",
        max_score=2,
        score=0,
        passed=False,
        output="o",
        error="",
        nodeid="n",
    )
    return Report(
        checks=[check],
        execution_time=0.1,
        lang=lang,
        seed=1,
        workdir=workdir,
        server=None,
        workdir_absent=absent,
    )


def test_a_missing_work_dir_is_said_once_first_with_how_to_name_another():
    from gpushare.reports import messages, terminal

    for lang in messages.langs():
        shown = terminal.render(_report("/root/gpushare", True, lang), color=False)
        first, *rest = shown.splitlines()
        assert "/root/gpushare" in first and "WORKDIR=" in first and "--workdir" in first
        assert first not in rest  # once
        assert rest[0] == messages.label("summary_title", lang)
        said = _report("/root/gpushare", True, lang).as_json()
        assert said["output"].startswith(first) and said["extra_data"]["workdir_absent"]
    plain = terminal.render(_report("/root/gpushare", False, "en"), color=False)
    assert plain.splitlines()[0] == messages.label("summary_title", "en")
