"""`gpushare submit` (`make submit`): the learner's hand-in, named after them, in the work dir.

The id is never the pod's user name (``root`` for everyone): ``--learner``, else
``$GPUSHARE_LEARNER``, else the id given last time, else asked once on the terminal. The file
goes into the work dir, and the command says where it is and to upload it to the assignment.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gpushare.grading import submit
from gpushare.reports import messages
from gpushare.submissions import snapshot
from tests.helpers import ROOT, grade_snapshot


def test_the_learner_id_comes_from_the_option_the_env_the_last_answer_or_one_question(
    tmp_path, monkeypatch
):
    store = tmp_path / "config" / "learner"
    monkeypatch.delenv("GPUSHARE_LEARNER", raising=False)
    asked: list[str] = []

    def ask() -> str:
        asked.append("?")
        return " ada \n"

    with pytest.raises(submit.NoLearner, match="--learner ID"):
        submit.learner_id(None, None, store)  # no terminal: never the user name
    assert submit.learner_id(None, ask, store) == "ada" and asked == ["?"]
    assert submit.learner_id(None, ask, store) == "ada" and asked == ["?"]  # asked once
    monkeypatch.setenv("GPUSHARE_LEARNER", "grace")
    assert submit.learner_id(None, ask, store) == "grace"
    assert submit.learner_id("alan", ask, store) == "alan"
    assert asked == ["?"]


def test_earlier_submissions_in_the_work_dir_are_not_captured_again(tmp_path):
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "a.yaml").write_text("kind: Pod\n")
    (tmp_path / f"ada-1{snapshot.SUFFIX}").write_bytes(b"x" * 1000)
    members, recorded = snapshot.capture_workdir(tmp_path)
    assert sorted(ti.name for ti, _ in members) == ["work/k8s", "work/k8s/a.yaml"]
    assert recorded == {}


def _submit(tmp_path: Path, *args: str, tty: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "GPUSHARE_LEARNER")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), GPUSHARE_CACHE=str(tmp_path / "cache"))
    cmd = [sys.executable, "-m", "gpushare", "submit", "--lang", "en", *args]
    if not tty:
        return subprocess.run(
            cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60
        )
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"ada\n")
        return subprocess.run(
            cmd, capture_output=True, text=True, env=env, stdin=follower, timeout=60
        )
    finally:
        os.close(leader)
        os.close(follower)


def test_submit_asks_on_a_terminal_once_and_keeps_the_answer(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    proc = _submit(tmp_path, "--workdir", str(work))  # no terminal, no id
    assert proc.returncode == 2 and "no learner id" in proc.stderr, proc.stderr
    proc = _submit(tmp_path, "--workdir", str(work), tty=True)
    assert messages.render_value(messages.T("submit_ask"), "en") in proc.stderr
    assert (tmp_path / "config" / "gpushare" / "learner").read_text() == "ada\n"
    # the answer was taken; the capture then finds no lab here, and says so
    assert proc.returncode == 2 and "could not capture" in proc.stderr, proc.stderr
    again = _submit(tmp_path, "--workdir", str(work))
    assert "no learner id" not in again.stderr and "could not capture" in again.stderr


def test_submit_refuses_a_work_dir_that_does_not_exist(tmp_path):
    proc = _submit(tmp_path, "--workdir", str(tmp_path / "gone"), "--learner", "ada")
    assert proc.returncode == 2 and "gone does not exist" in proc.stderr, proc.stderr
    assert "WORKDIR=" in proc.stderr


def test_submit_writes_into_the_work_dir_and_says_what_to_do(lab, state, tmp_path):
    work = state.solve()
    before = set(work.glob(f"*{snapshot.SUFFIX}"))
    proc = _submit(tmp_path, "--workdir", str(work), "--kubeconfig", str(lab.kubeconfig))
    assert proc.returncode == 2  # no id: never `root`
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    env["KUBECONFIG"] = str(lab.kubeconfig)
    make = ["make", "--no-print-directory", "-C", str(ROOT), "submit", f"WORKDIR={work}"]
    env_id = subprocess.run(
        [*make, "LEARNER=ada", "SUBMIT_ARGS=--lang en"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert env_id.returncode == 0, env_id.stderr
    made = set(work.glob(f"*{snapshot.SUFFIX}")) - before
    assert len(made) == 1
    path = made.pop()
    try:
        assert path.name.startswith("ada-")
        lines = env_id.stdout.splitlines()
        assert lines[0] == f"Your submission: {path}"
        assert "Upload this one file" in lines[1] and "assignment" in lines[1]
        with tarfile.open(path) as tar:
            assert not any(n.endswith(snapshot.SUFFIX) for n in tar.getnames())
        graded = grade_snapshot(path, tmp_path, "--lang", "en", "--unsafe-no-sandbox")
        assert graded.rc == 0, graded.stdout + graded.stderr
    finally:
        path.unlink()
