"""One lock for grading (issue 19): requirements/grade.lock pins what grading imports, with the
hashes of every file; the grading image and the Gradescope bundle install from it, and the
official ``kubernetes`` package is the ``live`` extra, which grading a snapshot never imports.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from importlib.metadata import version

from packaging.requirements import Requirement

from gpushare.lms import gradescope
from tests.helpers import MAX_SCORE, ROOT

LOCK = ROOT / "requirements" / "grade.lock"
EXAMPLE = ROOT / "examples" / "reference.gpushare.tgz"


def _pins() -> dict[str, str]:
    """{normalised name: version} of the lock."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", LOCK.read_text(), re.M)
    return {name.lower().replace("_", "-"): ver for name, ver in found}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_lock_pins_every_dependency_with_hashes_and_no_kubernetes():
    pins = _pins()
    for dep in map(Requirement, _project()["dependencies"]):
        name = dep.name.lower()
        assert name in pins, f"{name} is a dependency but not in {LOCK.name}"
        assert dep.specifier.contains(pins[name]), (name, str(dep.specifier), pins[name])
    assert "kubernetes" not in pins and "urllib3" not in pins
    assert [Requirement(r).name for r in _project()["optional-dependencies"]["live"]] == [
        "kubernetes"
    ]
    # every pin has hashes (pip then checks them all: --require-hashes is implied)
    entries = re.split(r"\n(?=\S)", LOCK.read_text().split("\n\n", 1)[-1].strip())
    entries = [e for e in entries if not e.startswith("#")]
    assert len(entries) == len(pins)
    assert all("--hash=sha256:" in e for e in entries), entries
    # what the tests run with is what ships (make install installs the lock first)
    for name, ver in pins.items():
        assert version(name) == ver, f"{name} {version(name)} installed, {ver} locked"


def test_the_bundle_pins_what_the_lock_pins(tmp_path):
    text = gradescope.requirements()
    lock = LOCK.read_text()
    for entry in re.split(r"\n(?=\S)", text.strip()):
        assert entry + "\n" in lock, entry  # verbatim, hashes and all
    names = {Requirement(e.split(" ")[0]).name.lower() for e in text.splitlines() if "==" in e}
    assert names == {"pyyaml", "psutil"}
    out = tmp_path / "autograder.zip"
    assert gradescope.bundle(out, lang="en") == out
    with zipfile.ZipFile(out) as zf:
        assert zf.read("requirements.txt").decode() == text


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_grading_a_snapshot_imports_no_kubernetes(tmp_path):
    """``gpushare grade --snapshot`` as a process of its own: with the package installed, no
    module of it (nor its urllib3) is loaded at the end; with it missing (an import raises, as
    in the grading image), the reference still scores full marks."""
    code = """
        import json, sys
        if sys.argv[3] == "blocked":
            sys.modules["kubernetes"] = None  # not installed: importing it raises ImportError
        from gpushare.cli import main
        code = main(["grade", "--snapshot", sys.argv[1], "--json", sys.argv[2], "--lang", "en",
                     "--unsafe-no-sandbox", "--seed", "7"])
        loaded = [m for m, mod in sys.modules.items()
                  if mod is not None and m.split(".")[0] in ("kubernetes", "urllib3")]
        print(json.dumps({"code": code, "loaded": loaded}))
        """
    for mode in ("installed", "blocked"):
        out = tmp_path / f"{mode}.json"
        proc = _run(code, str(EXAMPLE), str(out), mode)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"code": 0, "loaded": []}
        assert json.loads(out.read_text())["score"] == MAX_SCORE


def test_the_live_path_without_the_extra_says_so_in_one_line(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    proc = _run(
        """
        import sys
        sys.modules["kubernetes"] = None
        from gpushare.cli import main
        sys.exit(main(["grade", "--kubeconfig", sys.argv[1], "--lang", "en"]))
        """,
        str(kubeconfig),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "gpushare[live]" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
