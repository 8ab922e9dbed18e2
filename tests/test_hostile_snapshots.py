"""Hostile snapshots (issue 18, items 3 to 6): bombs, shapes, escapes, and exact regrades.

Every file here is built the way an attacker would: from the real reference snapshot
(``examples/reference.gpushare.tgz``, recorded from a real lab by ``gpushare snapshot``), with
its members changed and every hash recomputed, since the learner computes the hashes. Each is
graded by the real ``gpushare grade --snapshot`` (or ``class grade``, or ``gradescope run``) in
a process of its own, whose peak memory is measured with ``getrusage``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpushare.reports import clean
from gpushare.reports.results import GRADED_PROPERTIES
from gpushare.submissions import bounded, snapshot
from gpushare.submissions.workdir import load_yaml_text
from tests.helpers import MAX_SCORE, ROOT

REFERENCE = ROOT / "examples" / "reference.gpushare.tgz"
MIB = 1024 * 1024
# What no byte of our output to a terminal, an XML or a CSV may hold: ESC, CSI (C1), BEL,
# backspace, CR, and the bidi override that reverses text.
FORBIDDEN = re.compile("[\x07\x08\x0d\x1b\x9b\u202e]")


# --------------------------------------------------------------------------- forging


def _reference_members() -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(REFERENCE) as tar:
        return [(ti, tar.extractfile(ti).read() if ti.isreg() else b"") for ti in tar]


def _work_file(rel: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    ti = tarfile.TarInfo(f"work/{rel}")
    ti.size, ti.mode, ti.mtime = len(data), mode, 0
    return ti, data


def forge(
    out: Path,
    *,
    files: dict[str, bytes] | None = None,
    cluster: Any = None,
    edit_cluster: Callable[[dict], None] | None = None,
    edit_manifest: Callable[[dict], Any] | None = None,
    extra: list[tuple[tarfile.TarInfo, bytes]] = (),
    fmt: int = tarfile.PAX_FORMAT,
) -> Path:
    """The reference snapshot with ``files`` (work dir paths) replaced or added, cluster.json
    replaced (``cluster``: data, or raw bytes) or edited, ``extra`` members appended, every
    hash recomputed; then ``edit_manifest`` may change the manifest (return bytes to write
    those instead of its JSON)."""
    members = _reference_members()
    manifest = json.loads(members[0][1])
    cluster_raw = members[1][1]
    if edit_cluster is not None:
        data = json.loads(cluster_raw)
        edit_cluster(data)
        cluster_raw = json.dumps(data, sort_keys=True, ensure_ascii=False).encode()
    if cluster is not None:
        cluster_raw = cluster if isinstance(cluster, bytes) else json.dumps(cluster).encode()
    work = [(ti, data) for ti, data in members[2:]]
    for rel, data in (files or {}).items():
        work = [(ti, d) for ti, d in work if ti.name != f"work/{rel}"]
        work.append(_work_file(rel, data, 0o755 if rel.startswith("bin/") else 0o644))
    work += list(extra)
    digests = {"cluster.json": hashlib.sha256(cluster_raw).hexdigest()}
    for ti, data in work:
        digests[ti.name] = snapshot._member_digest(ti, data)
    manifest.update(members=digests, sha256=snapshot._whole(digests))
    raw = edit_manifest(manifest) if edit_manifest else None
    if not isinstance(raw, bytes):
        raw = json.dumps(manifest, indent=1).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz", format=fmt) as tar:
        for name, data in (("manifest.json", raw), ("cluster.json", cluster_raw)):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            tar.addfile(ti, io.BytesIO(data))
        for ti, data in work:
            tar.addfile(ti, io.BytesIO(data) if ti.isreg() else None)
    return out


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The billion laughs in YAML: ``width ** levels`` values once expanded."""
    lines = ["a0: &a0 [" + ",".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def pod_bomb() -> bytes:
    """k8s/team-over.yaml as a Pod whose labels are an alias bomb (what step 5 sends to the
    dry-run through json.dumps)."""
    bomb = textwrap.indent(alias_bomb(), "    ")
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: team-over\n  namespace: team-a\n"
        f"  annotations:\n{bomb}"
        "spec:\n  containers:\n  - name: c\n    image: busybox\n"
        "    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
    ).encode()


def long_name_header(size: int, fmt: int) -> tuple[tarfile.TarInfo, bytes]:
    """A work member whose name is ``size`` bytes: a GNU long-name or a pax header that big."""
    ti = tarfile.TarInfo("work/" + "a/" * (size // 2))
    ti.size, ti.mode, ti.mtime = 1, 0o644, 0
    return ti, b"x"


def unlisted(manifest: dict) -> None:
    """Leave the long name out of the manifest (which must stay small to be read at all): the
    hashes are checked only once every member was read, after the header."""
    for name in [k for k in manifest["members"] if len(k) > 1000]:
        del manifest["members"][name]


# --------------------------------------------------------------------------- running


MEASURE = """
import resource, subprocess, sys, json
proc = subprocess.run(sys.argv[1:], capture_output=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
sys.stdout.write(json.dumps({"rc": proc.returncode, "peak": peak,
    "out": proc.stdout.decode("utf-8", "surrogateescape"),
    "err": proc.stderr.decode("utf-8", "surrogateescape")}))
"""


def gpushare(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> dict:
    """Run gpushare in a process of its own; its exit status, peak RSS (bytes), stdout, stderr
    (peak: the largest of it and its children, from getrusage in a parent of its own)."""
    environ = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    environ.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, sys.executable, "-m", "gpushare", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environ,
        timeout=timeout,
        check=True,
    )
    return json.loads(proc.stdout)


def grade(path: Path, tmp_path: Path, *extra: str) -> dict:
    """``gpushare grade --snapshot`` with results.json and junit.xml; adds them when written."""
    out = tmp_path / f"{path.name}.json"
    xml = tmp_path / f"{path.name}.xml"
    run = gpushare(
        "grade", "--snapshot", str(path), "--json", str(out), "--junitxml", str(xml),
        "--lang", "en", "--color", "yes", *extra,
    )  # fmt: skip
    run["results"] = json.loads(out.read_text()) if out.exists() else None
    run["junit"] = xml if xml.exists() else None
    return run


def check_of(results: dict, number: str) -> dict:
    return next(t for t in results["tests"] if t["number"] == number)


def refused_in_one_line(run: dict, what: str) -> None:
    assert run["rc"] == 2, (what, run)
    assert "Traceback" not in run["err"] + run["out"], (what, run["err"])
    lines = run["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpushare:"), (what, run["err"])


# --------------------------------------------------------------------------- item 3: bounds


def test_yaml_bounds_refuse_bombs_before_anything_is_expanded():
    bomb = alias_bomb()
    assert len(bomb) < 700  # 9**9 = 387 420 489 values once expanded
    for name, text in {
        "alias bomb": bomb,
        "merge-key bomb": "a0: &a0 {x: 1, y: 2}\n"
        + "".join(
            f"a{i}: &a{i}\n  <<: [" + ", ".join([f"*a{i - 1}"] * 9) + "]\n  k{i}: v\n"
            for i in range(1, 9)
        ),
        "recursive alias": "a: &a [1, *a]\n",
        "deep flow": "[" * 300 + "]" * 300,
        "deep block": "".join("  " * i + "- \n" for i in range(300)),
        "many documents": "---\nx: 1\n" * (bounded.MAX_YAML_DOCUMENTS + 1),
    }.items():
        found = load_yaml_text(text, "k8s/team-over.yaml")
        assert not isinstance(found, list), name
        assert found.problem.key in ("yaml_invalid", "yaml_invalid_nowhere"), name
        said = found.problem.params["error"]
        assert any(w in said for w in ("values", "nested", "alias", "documents", "nesting")), (
            name,
            said,
        )
    # the lab's own files stay well inside: same documents as PyYAML gives
    for path in (ROOT / "solutions").rglob("*.yaml"):
        text = path.read_text()
        import yaml

        assert load_yaml_text(text, path.name) == list(yaml.safe_load_all(text)), path


def test_json_bounds():
    with pytest.raises(bounded.TooLarge, match="nests"):
        bounded.json_loads(b"[" * 200 + b"]" * 200, "x")
    with pytest.raises(bounded.TooLarge, match="nests"):
        bounded.json_loads(b"[" * 100_000 + b"]" * 100_000, "x")
    with pytest.raises(bounded.TooLarge, match="objects and arrays"):
        bounded.json_loads(b"[" + b"[]," * bounded.MAX_JSON_CONTAINERS + b"[]]", "x")
    with pytest.raises(bounded.Malformed, match="Unicode"):
        bounded.json_loads(b'{"learner": "\\ud800"}', "x")
    assert bounded.json_loads('{"a": ["\\ud83d\\ude00"]}', "x") == {"a": ["\U0001f600"]}


def test_an_alias_bomb_costs_its_checks_not_the_graders_memory(tmp_path):
    """Before: 547 bytes in team-over.yaml took 1.09 GB and 14 s (json.dumps in step 5)."""
    bomb = pod_bomb()
    assert len(bomb) < 900
    path = forge(
        tmp_path / "bomb.gpushare.tgz",
        files={"k8s/team-over.yaml": bomb},
        # and the same bomb in the ConfigMap the cluster holds (steps 1 and 2 parse it)
        edit_cluster=lambda c: c["configmap"]["value"]["data"].update(shared=alias_bomb()),
    )
    run = grade(path, tmp_path)
    assert run["rc"] == 1, run["err"]
    assert run["peak"] < 256 * MIB, run["peak"]
    results = run["results"]
    for number in ("5.4", "5.5"):
        assert check_of(results, number)["status"] == "failed"
        assert "once its aliases are expanded" in check_of(results, number)["output"], number
        assert not check_of(results, number)["extra_data"]["grader_error"]
    bombed = [t["number"] for t in results["tests"] if "aliases are expanded" in t["output"]]
    assert len(bombed) >= 3, bombed  # 5.4, 5.5 and the checks that read the ConfigMap's "shared"
    assert check_of(results, "3.1")["status"] == "passed"  # the rest is graded as usual


@pytest.mark.parametrize(
    ("size", "fmt"),
    [(1 * MIB, tarfile.GNU_FORMAT), (7 * MIB, tarfile.GNU_FORMAT), (7 * MIB, tarfile.PAX_FORMAT)],
    ids=["gnu-1MB", "gnu-7MB", "pax-7MB"],
)
def test_an_oversized_tar_header_is_refused_before_it_is_read(tmp_path, size, fmt):
    """Before: 1 MB of GNU long name cost 1.08 GB of RSS, 7.5 MB asked for 16 GiB."""
    path = forge(
        tmp_path / "header.gpushare.tgz",
        extra=[long_name_header(size, fmt)],
        fmt=fmt,
        edit_manifest=unlisted,
    )
    run = grade(path, tmp_path)
    refused_in_one_line(run, "header")
    assert "tar header claims" in run["err"]
    assert run["peak"] < 128 * MIB, run["peak"]
    with pytest.raises(snapshot.SnapshotError) as err:
        snapshot.load(path, tmp_path / "scratch")
    assert err.value.kind == "refused"


def test_a_chain_of_extension_headers_is_refused(tmp_path):
    path = tmp_path / "chain.gpushare.tgz"
    base = forge(tmp_path / "base.gpushare.tgz")
    raw = io.BytesIO()
    with (
        tarfile.open(base) as src,
        tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as dst,
    ):
        for ti in src:
            dst.addfile(ti, src.extractfile(ti) if ti.isreg() else None)
    body = raw.getvalue()
    # 100 GNU long-name headers in front of the last member
    header = tarfile.TarInfo("././@LongLink")
    header.type, header.size = tarfile.GNUTYPE_LONGNAME, 8
    block = header.tobuf(tarfile.GNU_FORMAT) + b"work/zz\0".ljust(512, b"\0")
    end = body.rstrip(b"\0")
    end += b"\0" * (-len(end) % 512)
    one = tarfile.TarInfo("work/zz")
    one.size = 0
    import gzip

    path.write_bytes(gzip.compress(end + block * 100 + one.tobuf() + b"\0" * 1024))
    with pytest.raises(snapshot.SnapshotError) as err:
        snapshot.load(path, tmp_path / "scratch")
    assert err.value.kind == "refused" and "in a row" in str(err.value)


def test_grade_snapshot_runs_under_the_memory_cap(tmp_path):
    """The learner's script runs under a data limit at every level, never above the grader's
    own (1 GiB): ``ulimit -d`` shows the sandbox's per-process cap (gpushare.sandbox.limits)."""
    from gpushare.sandbox.limits import DEFAULT_LIMITS as DEFAULT

    script = b'#!/bin/sh\necho "DATA=$(ulimit -d)"\n'
    path = forge(tmp_path / "ulimit.gpushare.tgz", files={"bin/check-request.sh": script})
    expected = f"DATA={min(DEFAULT.data, 1024**3) // 1024}"  # KiB
    for extra in ((), ("--unsafe-no-sandbox",)):
        run = grade(path, tmp_path, *extra)
        outputs = " ".join(t["output"] for t in run["results"]["tests"])
        assert expected in outputs, (extra, outputs)


def test_a_grade_over_the_memory_cap_is_one_line_exit_2(tmp_path):
    """A cap so small that the grade cannot be taken: a clear error, never a traceback."""
    run = gpushare(
        "grade", "--snapshot", str(REFERENCE), "--color", "no",
        env={"GPUSHARE_GRADE_MEMORY_MIB": "40"},
    )  # fmt: skip
    assert run["rc"] == 2, run
    assert "Traceback" not in run["err"], run["err"]
    assert "memory" in run["err"] or "could not grade" in run["err"], run["err"]


def test_the_hard_deadline_ends_a_stuck_grade_in_one_line():
    code = (
        "from gpushare.grading.guard import hard_deadline\n"
        "with hard_deadline(0.3, 'the grade of x\\x1b[2J.tgz'):\n"
        "    while True: pass\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpushare: could not grade: the grade of x")
    assert len(proc.stderr.splitlines()) == 1 and "\x1b" not in proc.stderr


def test_the_memory_cap_is_put_back_after_an_in_process_grade():
    import resource

    from gpushare.grading import guard

    before = resource.getrlimit(resource.RLIMIT_DATA)
    with guard.capped_memory(512 * MIB) as cap:
        assert cap <= 512 * MIB
        assert resource.getrlimit(resource.RLIMIT_DATA)[0] == cap
        with pytest.raises(MemoryError):
            bytearray(600 * MIB)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


def test_grade_snapshot_has_a_default_deadline():
    from gpushare.cli import build_parser
    from gpushare.grading import guard

    args = build_parser().parse_args(["grade", "--snapshot", str(REFERENCE)])
    assert args.timeout is None
    seen = {}

    def fake_run(args, started):
        seen["timeout"] = args.timeout
        return 0

    import gpushare.grading.grade as grade_mod

    original = grade_mod._run_cli
    grade_mod._run_cli = fake_run
    try:
        grade_mod.run_cli(args)
    finally:
        grade_mod._run_cli = original
    assert seen["timeout"] == guard.SNAPSHOT_TIMEOUT


# --------------------------------------------------------------------------- item 4: shapes

SHAPES: dict[str, dict[str, Any]] = {
    "cluster-list": {"edit_manifest": lambda m: m.update(cluster=["a", "b"])},
    "cluster-string": {"edit_manifest": lambda m: m.update(cluster="kwok")},
    "members-list": {"edit_manifest": lambda m: m.update(members=list(m["members"]))},
    "recorded-list": {"edit_manifest": lambda m: m.update(recorded=["k8s/a.yaml"])},
    "runtime-list": {"edit_manifest": lambda m: m.update(runtime=["3.11", "6.0"])},
    "format-true": {"edit_manifest": lambda m: m.update(format=True)},
    "learner-number": {"edit_manifest": lambda m: m.update(learner=7)},
    "learner-surrogate": {"edit_manifest": lambda m: m.update(learner="\ud800x")},
    "manifest-deep": {
        "edit_manifest": lambda m: (
            json.dumps(m).encode()[:-1] + b', "deep": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
        )
    },
    "cluster-json-list": {"cluster": [1, 2, 3]},
    "cluster-json-deep": {"cluster": b"[" * 100_000 + b"]" * 100_000},
    "dry-run-answer-string": {"edit_cluster": lambda c: _dry_run(c).update(answer="denied")},
    "dry-run-answer-short": {"edit_cluster": lambda c: _dry_run(c).update(answer=[403])},
    "dry-run-answer-types": {"edit_cluster": lambda c: _dry_run(c).update(answer=["403", 1, 2])},
    "items-not-objects": {
        "edit_cluster": lambda c: c["nodes"]["value"].update(items=[1, "two", None])
    },
    "value-list": {"edit_cluster": lambda c: c["configmap"].update(value=[1, 2])},
    # deeper: fields whose type the apiserver fixes, as the graders read them
    "quota-status-true": {
        "edit_cluster": lambda c: c["quotas:team-a"]["value"]["items"][0].update(status=True)
    },
    "configmap-data-number": {
        "edit_cluster": lambda c: c["configmap"]["value"]["data"].update(shared=5)
    },
    "labels-list": {
        "edit_cluster": lambda c: c["nodes"]["value"]["items"][0]["metadata"].update(labels=["a"])
    },
    "containers-string": {
        "edit_cluster": lambda c: c["pods:team-a"]["value"]["items"][0]["spec"].update(
            containers="work"
        )
    },
}


def _dry_run(cluster: dict) -> dict:
    return next(v for k, v in cluster.items() if k.startswith("dry-run:"))


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("shapes")
    return {name: forge(folder / f"{name}.gpushare.tgz", **kw) for name, kw in SHAPES.items()}


def test_every_wrong_shape_is_one_snapshot_error(shapes, tmp_path):
    for name, path in shapes.items():
        with pytest.raises(snapshot.SnapshotError) as err:
            snapshot.load(path, tmp_path / name)
        kind = "format" if name == "format-true" else None
        if name.endswith("deep"):
            kind = "refused"
        assert err.value.kind == (kind or "unreadable"), (name, err.value.kind, str(err.value))
        assert "\n" not in str(err.value), name


def test_grade_refuses_every_wrong_shape_with_exit_2_and_one_line(shapes, tmp_path):
    for name, path in shapes.items():
        refused_in_one_line(grade(path, tmp_path), name)


# --------------------------------------------------------------------------- item 5: output

ESC = {
    "osc52": "\x1b]52;c;ZWNobyBwd25lZA==\x07",
    "osc8": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "title": "\x1b]0;owned\x07",
    "paint": "\x1b[1A\x1b[2K\r  All checks passed. Total: 100/100",
    "c1": "\x9b31m",
    "bidi": "\u202eevil",
}
NASTY = "".join(ESC.values())
# a grade's own properties (Report.properties), before what was graded (GRADED_PROPERTIES)
KNOWN = {"score", "max_score", "complete", "seed", "lang", "tool_version", "verdict"}
KNOWN |= {"kwok_version", "kubernetes_version", "etcd_version", "could_not_grade", "isolation"}


def _escapes_everywhere(out: Path) -> Path:
    def manifest(m: dict) -> None:
        m["learner"] = "=HYPERLINK(1)" + NASTY
        m["workdir"] = "/home/x" + NASTY
        m["captured_at"] = "2026-11-30T00:00:00Z" + ESC["paint"]
        m["runtime"] = {"python3": "3.11.7" + ESC["title"], "pyyaml": "6.0" + ESC["osc52"]}
        m["cluster"] = {
            **m["cluster"],
            "server": "https://x" + ESC["osc8"],
            "score": "100",  # a forged JUnit property
            "max_score\x07": "1",
        }
        m["recorded"] = {"k8s/mig-job.yaml": {"kind": "link_outside", "target": "/etc" + NASTY}}

    script = (
        "#!/bin/sh\nprintf '" + NASTY.replace("\\", "\\\\").replace("'", "") + "\\n'\necho OK\n"
    ).encode()
    return forge(
        out,
        files={
            "bin/check-request.sh": script,
            "out/quota-denied.txt": ("denied " + NASTY + "\n").encode(),
            "k8s/mig-job.yaml": b"",  # recorded instead: its link target is shown
        },
        edit_manifest=manifest,
    )


def test_no_escape_reaches_the_terminal_the_xml_or_the_csv(tmp_path):
    path = _escapes_everywhere(tmp_path / "escapes.gpushare.tgz")
    run = grade(path, tmp_path)
    assert run["rc"] == 1, run["err"]
    painted = run["out"].replace("\x1b[32m", "").replace("\x1b[31m", "").replace("\x1b[1m", "")
    painted = painted.replace("\x1b[2m", "").replace("\x1b[0m", "")
    assert not FORBIDDEN.search(painted), [m.group() for m in FORBIDDEN.finditer(painted)]
    assert not FORBIDDEN.search(run["err"]), run["err"]
    assert "\\x1b]52;c;" in painted  # shown, inert
    # the learner-facing JSON keeps what the learner wrote
    results = run["results"]
    assert results["extra_data"]["cluster"]["learner"] == "=HYPERLINK(1)" + NASTY
    assert any(ESC["osc52"] in t["output"] for t in results["tests"])
    # JUnit: well-formed, only the known properties, the real score
    text = run["junit"].read_text(encoding="utf-8")
    assert not FORBIDDEN.search(text)
    suite = ET.parse(run["junit"]).getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert set(props) <= KNOWN | set(GRADED_PROPERTIES), set(props) - KNOWN
    assert props["score"] == str(results["score"]) != str(MAX_SCORE)
    assert next(iter(suite.iter("property"))).get("name") == "score"


def test_pytest_graders_on_the_snapshot_stays_clean_too(tmp_path):
    path = _escapes_everywhere(tmp_path / "escapes.gpushare.tgz")
    xml = tmp_path / "pytest.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "graders", "-p", "no:cacheprovider", "-q",
         "--color=no", "--snapshot", str(path), "--junitxml", str(xml), "--lang", "en"],
        capture_output=True, text=True, cwd=ROOT, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    terminal = proc.stdout + proc.stderr
    assert not FORBIDDEN.search(terminal), [m.group() for m in FORBIDDEN.finditer(terminal)]
    suite = ET.parse(xml).getroot().find("testsuite")
    names = [p.get("name") for p in suite.iter("property")]
    assert names.count("score") == 1 and "learner" in names
    assert set(names) <= KNOWN | set(GRADED_PROPERTIES), set(names) - KNOWN
    assert not FORBIDDEN.search(xml.read_text(encoding="utf-8"))


def test_clean_shows_controls_and_neutralises_formulas():
    assert clean.line("a\x1b[1Ab\nc\td\u202e") == "a\\x1b[1Ab\\x0ac\\x09d\\u202e"
    assert clean.text("a\x1b]0;t\x07\nb\tc\r") == "a\\x1b]0;t\\x07\nb\tc\\x0d"
    assert clean.text("张三 한국어 ok") == "张三 한국어 ok"
    assert clean.text("\x9b\x85\ud800") == "\\x9b\\x85\\ud800"
    for bad in ("=1+1", "+1", "-A1-B1", "@SUM(A1)", "\tx", "\rx", "  =1"):
        cell = clean.csv_cell(bad)
        assert cell.startswith("'"), bad
    assert clean.csv_cell(85) == 85 and clean.csv_cell("alice") == "alice"
    assert clean.csv_cell("") == ""


def test_a_class_run_stays_clean_and_grades_the_others(tmp_path):
    """Hostile files among honest ones: each hostile one is its own error row, the honest are
    graded, no escape reaches the terminal, every CSV cell is inert."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    honest = inbox / f"honest-20261130T000000Z-{'0' * 12}.gpushare.tgz"
    honest.write_bytes(REFERENCE.read_bytes())
    forge(
        inbox / "-A1-B1.gpushare.tgz",
        edit_manifest=lambda m: m.update(learner="-A1-B1"),
    )
    _escapes_everywhere(inbox / f"{ESC['title']}{ESC['osc52']}.gpushare.tgz")

    def learner(name: str, then: Callable[[dict], Any] | None = None) -> Callable[[dict], Any]:
        def edit(m: dict) -> Any:
            m["learner"] = name
            return then(m) if then else None

        return edit

    forge(
        inbox / "bomb.gpushare.tgz",
        files={"k8s/team-over.yaml": pod_bomb()},
        edit_manifest=learner("bomb"),
    )
    forge(
        inbox / "header.gpushare.tgz",
        extra=[long_name_header(7 * MIB, tarfile.GNU_FORMAT)],
        fmt=tarfile.GNU_FORMAT,
        edit_manifest=learner("header", unlisted),
    )
    # a 7 MiB long name before the manifest: what the class run reads first of every file
    with (
        tarfile.open(inbox / "header-first.gpushare.tgz", "w:gz", format=tarfile.GNU_FORMAT) as tar,
        tarfile.open(REFERENCE) as ref,
    ):
        ti, data = long_name_header(7 * MIB, tarfile.GNU_FORMAT)
        tar.addfile(ti, io.BytesIO(data))
        for member in ref:
            tar.addfile(member, ref.extractfile(member) if member.isreg() else None)
    for name in ("cluster-list", "dry-run-answer-string", "learner-surrogate", "manifest-deep"):
        kw = dict(SHAPES[name])
        kw["edit_manifest"] = learner(name, kw.get("edit_manifest"))
        forge(inbox / f"{name}.gpushare.tgz", **kw)
    out = tmp_path / "class"
    run = gpushare("class", "grade", str(inbox), "--out", str(out), "--lang", "en", "--jobs", "2")
    assert run["rc"] == 0, run["err"]
    assert run["peak"] < 1024 * MIB, run["peak"]
    print(f"class run of {len(list(inbox.iterdir()))}: peak RSS {run['peak'] / MIB:.0f} MiB")
    terminal = run["out"] + run["err"]
    assert not FORBIDDEN.search(terminal), [m.group() for m in FORBIDDEN.finditer(terminal)]
    assert "Traceback" not in terminal
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 10, rows
    for row in rows:
        for cell in row.values():
            assert not FORBIDDEN.search(cell or ""), row
            assert not (cell or "").lstrip(" ").startswith(("=", "+", "-", "@")), row
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
    # honest and -A1-B1 (the reference, renamed): full marks; the escapes and the bomb: failed
    assert sum(1 for r in rows if r["score"] == str(MAX_SCORE)) == 2, rows
    assert by_status.get("error", 0) == 6, rows  # the two headers and the four bad shapes
    html = (out / "report.html").read_text(encoding="utf-8")
    assert not FORBIDDEN.search(html)


# --------------------------------------------------------------------------- item 6: seed


def test_run_autograder_regrades_one_upload_with_one_seed(tmp_path):
    """The seed comes from the snapshot's content hash, as class grade derives it."""
    from gpushare.classroom.inputs import seed_for

    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    os.symlink(ROOT / "graders", root / "source" / "graders")
    os.symlink(ROOT / "fixtures", root / "source" / "fixtures")
    (root / "source" / "gpushare-autograder.json").write_text(json.dumps({"lang": "en"}))
    (root / "submission" / "mine.gpushare.tgz").write_bytes(REFERENCE.read_bytes())
    seeds = set()
    for _ in range(3):
        run = gpushare("gradescope", "run", "--root", str(root))
        assert run["rc"] == 0, run
        results = json.loads((root / "results" / "results.json").read_text())
        seeds.add(results["extra_data"]["seed"])
    digest = snapshot.load(REFERENCE, tmp_path / "scratch").digest
    assert seeds == {seed_for(0, digest)}
