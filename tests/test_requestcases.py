"""Tests for lab step 6 (``check-request.sh``): oracle, generator, judge, reference and mutants.

The point of generated cases is that a script tuned to the three samples can still be wrong, so
besides checking the oracle and the generator on their own, these tests run the reference
solution for real and a set of MUTANT solutions (each one a plausible learner mistake, made by
a one-line edit of the reference) and check that fresh cases catch every mutant on every seed,
while the samples alone let several of them through.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from gpulab.requestcases import (
    MIN_COUNT,
    REASONS,
    Case,
    Verdict,
    expected_verdict,
    generate,
    gpu_quantity,
    judge,
    parse_output,
    sample_cases,
)
from gpushare.reports import messages

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "check-request"
REFERENCE = REPO / "solutions" / "workdir" / "bin" / "check-request.sh"
GRADERS = REPO / "graders"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
GPU = "nvidia.com/gpu"
WORKERS = (os.cpu_count() or 2) + 1


def pod(containers: str, name: str = "p") -> str:
    """A minimal Pod document around an already indented ``containers`` block."""
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n{containers}"
    )


def container(name: str, limits: str | None = None, requests: str | None = None) -> str:
    lines = [f"    - name: {name}", "      image: busybox"]
    if limits is not None or requests is not None:
        lines.append("      resources:")
        if limits is not None:
            lines += ["        limits:", f"          {GPU}: {limits}"]
        if requests is not None:
            lines += ["        requests:", f"          {GPU}: {requests}"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Oracle
# --------------------------------------------------------------------------------------------


def test_oracle_on_fixtures() -> None:
    by_name = {c.name: c for c in sample_cases(FIXTURES)}
    assert set(by_name) == {"sample-over", "sample-one", "sample-none"}
    assert (by_name["sample-over"].expect_over, by_name["sample-over"].expect_rc) == (
        (("trainer", 2),),
        1,
    )
    for name in ("sample-one", "sample-none"):
        assert (by_name[name].expect_over, by_name[name].expect_rc) == ((), 0)
    assert all(c.description for c in by_name.values())


def test_sample_cases_accepts_the_fixtures_root() -> None:
    assert sample_cases(FIXTURES.parent) == sample_cases(FIXTURES)


def test_sample_cases_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        sample_cases(tmp_path)


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        ("2", None, 2),
        (None, "3", 3),
        ("'4'", None, 4),
        (None, '"5"', 5),
        ("1", "3", 3),  # both set and different: the larger one counts
        ("6", "1", 6),
        ("1", "1", None),
        ("1", None, None),
        (None, None, None),
        ("0", None, None),
    ],
)
def test_oracle_max_of_limits_and_requests(
    limits: str | None, requests: str | None, expected: int | None
) -> None:
    verdict = expected_verdict(pod(container("c", limits, requests)))
    if expected is None:
        assert verdict == Verdict(over=(), rc=0)
    else:
        assert verdict == Verdict(over=(("c", expected),), rc=1)


def test_oracle_documents_kinds_and_order() -> None:
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n"
        "  template:\n    spec:\n      containers:\n        - name: dep\n"
        f"          resources:\n            limits:\n              {GPU}: 4\n"
    )
    init = pod(container("main", "1")).replace(
        "  containers:\n",
        f"  initContainers:\n    - name: init\n      resources:\n        limits:\n"
        f"          {GPU}: 5\n  containers:\n",
    )
    text = "---\n".join(
        [
            "",  # empty document
            "# only a comment\n",
            "kind: ConfigMap\ndata:\n  a: b\n",
            deployment,  # not a Pod: ignored
            pod(container("a", "2") + container("b") + container("c", None, "'7'")),
            init,  # initContainers are not "containers"
            "just a string\n",
            pod(container("d", "3")),
        ]
    )
    assert expected_verdict(text) == Verdict(over=(("a", 2), ("c", 7), ("d", 3)), rc=1)
    assert Verdict(over=(("a", 2),), rc=1).stdout_lines == ("OVER=a=2",)
    assert Verdict(over=(), rc=0).stdout_lines == ("OK",)


def test_oracle_tolerates_null_blocks() -> None:
    text = (
        "kind: Pod\nspec:\n  containers:\n    - name: a\n      resources:\n"
        "    - name: b\n      resources:\n        limits:\n        requests: {}\n"
    )
    assert expected_verdict(text) == Verdict(over=(), rc=0)
    assert expected_verdict("kind: Pod\n") == Verdict(over=(), rc=0)
    assert expected_verdict("") == Verdict(over=(), rc=0)


@pytest.mark.parametrize("bad", [True, 1.5, "2k", "two", "-2", [2]])
def test_gpu_quantity_refuses_non_whole_numbers(bad: object) -> None:
    with pytest.raises(ValueError):
        gpu_quantity(bad)


def test_gpu_quantity_accepts_ints_and_digit_strings() -> None:
    assert [gpu_quantity(v) for v in (None, 0, 3, "3", " 4 ")] == [0, 0, 3, 3, 4]


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------


def test_generate_is_deterministic_per_seed() -> None:
    for seed in (0, 1, 42, 2**40, -7):
        assert generate(seed) == generate(seed)
        assert generate(seed, 9) == generate(seed, 9)


def test_generate_is_deterministic_across_processes() -> None:
    """No hash randomisation or set ordering may leak into the manifests."""
    code = (
        "import hashlib; from gpulab.requestcases import generate; "
        "print(hashlib.sha256(repr(generate(123, 8)).encode()).hexdigest())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": str(GRADERS)},
        ).stdout
        for hash_seed in (1, 2)
    }
    assert len(outs) == 1


def test_generate_differs_across_seeds() -> None:
    manifests = {tuple(c.manifest for c in generate(seed)) for seed in range(50)}
    assert len(manifests) == 50


def test_generate_refuses_too_few_cases() -> None:
    with pytest.raises(ValueError):
        generate(0, MIN_COUNT - 1)


def _containers(docs: list) -> list[tuple[int, int, dict]]:
    """``(doc index, container index, container)`` for every Pod container in ``docs``."""
    return [
        (d, i, c)
        for d, doc in enumerate(docs)
        if isinstance(doc, dict) and doc.get("kind") == "Pod"
        for i, c in enumerate(doc["spec"]["containers"])
    ]


def _gpu(c: dict, side: str) -> int | None:
    value = ((c.get("resources") or {}).get(side) or {}).get(GPU)
    return None if value is None else int(value)


def features(case: Case, docs: list) -> set[str]:
    """What a case exercises, read from its manifest only (not from the generator's intent)."""
    found: set[str] = set()
    conts = _containers(docs)
    counts = {(d, i): max(_gpu(c, "limits") or 0, _gpu(c, "requests") or 0) for d, i, c in conts}
    if len(docs) >= 2 and any(not isinstance(x, dict) or x.get("kind") != "Pod" for x in docs):
        found.add("multi_doc_with_non_pod_or_empty")
    if len(docs) >= 2 and any(counts[key] > 1 for key in counts if key[0] > 0):
        found.add("multi_doc_over_not_first")
    for d in {d for d, _, _ in conts}:
        pod_counts = [counts[key] for key in sorted(counts) if key[0] == d]
        if (
            len(pod_counts) >= 2
            and any(n > 1 for n in pod_counts[1:])
            and any(n <= 1 for n in pod_counts)
        ):
            found.add("multi_container_mix")
    for _, _, c in conts:
        lim, req = _gpu(c, "limits"), _gpu(c, "requests")
        if req is not None and req > 1 and lim is None:
            found.add("requests_only_over")
        if lim is not None and lim > 1 and req is None:
            found.add("limits_only_over")
    if re.search(r"nvidia\.com/gpu: ([\"'])[2-8]\1", case.manifest):
        found.add("quoted_over")
    if case.expect_rc == 0 and any(n == 1 for n in counts.values()):
        found.add("exactly_one_passes")
    for _, _, c in conts:
        asks = (c.get("resources") or {}).get("requests") or {}
        if (
            case.expect_rc == 0
            and _gpu(c, "limits") is None
            and _gpu(c, "requests") is None
            and {"cpu", "memory"} <= set(asks)
        ):
            found.add("no_gpu_other_resources")
    return found


REQUIRED = {
    "multi_doc_with_non_pod_or_empty",
    "multi_doc_over_not_first",
    "multi_container_mix",
    "requests_only_over",
    "limits_only_over",
    "quoted_over",
    "exactly_one_passes",
    "no_gpu_other_resources",
}


def test_generated_cases_cover_every_feature_on_every_seed() -> None:
    """Every run has every feature; the expectations agree with an independent reading."""
    over_counts: set[int] = set()
    container_names: set[str] = set()
    filler_kinds: set[str] = set()
    for seed in range(200):
        cases = generate(seed, MIN_COUNT + seed % 3)
        assert len(cases) == MIN_COUNT + seed % 3
        assert len({c.name for c in cases}) == len(cases), seed
        seen: set[str] = set()
        for case in cases:
            docs = list(yaml.safe_load_all(case.manifest))  # must parse
            seen |= features(case, docs)
            conts = _containers(docs)
            # The test's own reading of the manifest gives the same answer as the oracle.
            mine = []
            for _, _, c in conts:
                lim, req = _gpu(c, "limits"), _gpu(c, "requests")
                assert lim is None or req is None or lim == req  # never two different values
                if max(lim or 0, req or 0) > 1:
                    mine.append((c["name"], max(lim or 0, req or 0)))
            assert case.expect_over == tuple(mine), (seed, case.name)
            assert case.expect_rc == (1 if mine else 0)
            assert case.name and DNS_LABEL.fullmatch(case.name), case.name
            # Described in every language: English plain ASCII, Chinese and Korean translated.
            english = messages.render_value(case.description, "en")
            assert english and english.isascii(), english
            for name, _count in case.expect_over:  # a missed line can be looked up
                assert name in english
            assert re.search(r"[\u4e00-\u9fff]", messages.render_value(case.description, "zh"))
            assert re.search(r"[\uac00-\ud7a3]", messages.render_value(case.description, "ko"))
            assert "initContainers" not in case.manifest
            names = [c["name"] for _, _, c in conts]
            names += [x["metadata"]["name"] for x in docs if isinstance(x, dict)]
            assert len(names) == len(set(names)), (seed, case.name)
            for name in names:
                assert DNS_LABEL.fullmatch(name) and len(name) <= 63, name
            container_names |= {c["name"] for _, _, c in conts}
            for _, count in case.expect_over:
                assert 2 <= count <= 8
                over_counts.add(count)
            if len(docs) > 1:
                filler_kinds |= {"empty" if x is None else x["kind"] for x in docs}
        assert seen >= REQUIRED, (seed, REQUIRED - seen)
    assert over_counts == set(range(2, 9))
    assert {"empty", "ConfigMap", "ServiceAccount"} <= filler_kinds
    assert len(container_names) > 1000  # random, not a fixed pool


# --------------------------------------------------------------------------------------------
# Judge
# --------------------------------------------------------------------------------------------

OVER_CASE = Case("o", "", 1, (("a", 2), ("b", 3)), "two over")
OK_CASE = Case("k", "", 0, (), "passes")


@pytest.mark.parametrize(
    ("case", "rc", "stdout", "expected"),
    [
        (OVER_CASE, 1, "OVER=a=2\nOVER=b=3\n", (True, "ok")),
        (OVER_CASE, 1, "OVER=b=3\r\n  OVER=a=2  \r\n\n", (True, "ok")),  # order, CRLF, blanks
        (OVER_CASE, 1, "checking...\nOVER=a=2\ndebug: b\nOVER=b=3\n", (True, "ok")),
        (OVER_CASE, 0, "OVER=a=2\nOVER=b=3\n", (False, "wrong_exit_code")),
        (OVER_CASE, 1, "OVER=a=2\n", (False, "missing_over_line")),
        (OVER_CASE, 1, "OVER=a=2\nOVER=b=2\n", (False, "missing_over_line")),  # count differs
        (OVER_CASE, 1, "OVER=a=2\nOVER=b=3\nOVER=c=4\n", (False, "unexpected_over_line")),
        (OVER_CASE, 1, "OVER=a=2\nOVER=b=3\nOVER=b=3\n", (False, "unexpected_over_line")),
        (OVER_CASE, 1, "OVER=a=2\nOVER=b=3\nOK\n", (False, "ok_printed_when_over")),
        (OVER_CASE, 1, "", (False, "missing_over_line")),
        (OK_CASE, 0, "OK\n", (True, "ok")),
        (OK_CASE, 0, "reading file\r\n OK \r\n", (True, "ok")),
        (OK_CASE, 1, "OK\n", (False, "wrong_exit_code")),
        (OK_CASE, 0, "", (False, "missing_ok")),
        (OK_CASE, 0, "ok\n", (False, "missing_ok")),
        (OK_CASE, 0, "OK\nOVER=a=1\n", (False, "unexpected_over_line")),
    ],
)
def test_judge(case: Case, rc: int, stdout: str, expected: tuple[bool, str]) -> None:
    assert judge(case, rc, stdout) == expected
    assert expected[1] in REASONS


def test_parse_output() -> None:
    text = "\r\n  OVER=w-k3x9=3\r\nnoise OVER=x=2\nOVER=a=b=2\nOVER=y=two\n\tOK\t\n"
    assert parse_output(text) == ((("w-k3x9", 3),), True)
    assert parse_output("") == ((), False)


# --------------------------------------------------------------------------------------------
# Running scripts for real
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fast_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment whose ``python3`` is the interpreter running the tests (has PyYAML).

    Hundreds of runs are made; going straight to this interpreter skips version-manager shims
    (pyenv's cost ~0.2 s a call). ``test_reference_with_plain_environment`` separately checks
    the script with the untouched ``/usr/bin/env python3``.
    """
    bindir = tmp_path_factory.mktemp("pybin")
    wrapper = bindir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_script(script: Path, case: Case, workdir: Path, env: dict[str, str]) -> tuple[bool, str]:
    """Write the case's manifest to a file, run ``script <file>``, and judge the result."""
    workdir.mkdir(parents=True, exist_ok=True)
    manifest = workdir / f"{case.name}.yaml"
    manifest.write_text(case.manifest, encoding="utf-8")
    proc = subprocess.run(
        [str(script), str(manifest)], capture_output=True, text=True, env=env, timeout=60
    )
    return judge(case, proc.returncode, proc.stdout)


def parallel(fn: Callable[[int], object], items: Iterable[int]) -> list:
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(fn, items))


def test_reference_is_executable() -> None:
    assert REFERENCE.stat().st_mode & stat.S_IXUSR
    assert REFERENCE.read_text().startswith("#!/usr/bin/env bash\n")


@pytest.mark.skipif(
    subprocess.run(["python3", "-c", "import yaml"], capture_output=True).returncode != 0
    if shutil.which("python3")
    else True,
    reason="no python3 with PyYAML on PATH",
)
def test_reference_with_plain_environment(tmp_path: Path) -> None:
    for case in sample_cases(FIXTURES):
        assert run_script(REFERENCE, case, tmp_path, dict(os.environ)) == (True, "ok"), case.name


def test_reference_usage_errors(tmp_path: Path, fast_env: dict[str, str]) -> None:
    usage = subprocess.run([str(REFERENCE)], capture_output=True, text=True, env=fast_env)
    missing = subprocess.run(
        [str(REFERENCE), str(tmp_path / "nope.yaml")], capture_output=True, text=True, env=fast_env
    )
    (tmp_path / "bad.yaml").write_text("kind: Pod\nspec: [\n")
    bad = subprocess.run(
        [str(REFERENCE), str(tmp_path / "bad.yaml")], capture_output=True, text=True, env=fast_env
    )
    for proc in (usage, missing, bad):
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr


def test_reference_passes_samples_and_generated_cases(
    tmp_path: Path, fast_env: dict[str, str]
) -> None:
    def one_seed(seed: int) -> list[tuple[str, tuple[bool, str]]]:
        cases = sample_cases(FIXTURES) if seed < 0 else generate(seed)
        workdir = tmp_path / str(seed)
        return [(c.name, run_script(REFERENCE, c, workdir, fast_env)) for c in cases]

    results = [r for rs in parallel(one_seed, range(-1, 30)) for r in rs]
    assert len(results) == 3 + 30 * MIN_COUNT
    assert [r for r in results if r[1] != (True, "ok")] == []


# Each mutant is the reference with one plausible learner mistake: (old text, new text).
MUTANTS: dict[str, tuple[str, str]] = {
    "limits-only": ('for side in ("limits", "requests")', 'for side in ("limits",)'),
    "requests-only": ('for side in ("limits", "requests")', 'for side in ("requests",)'),
    "safe-load": ("docs = list(yaml.safe_load_all(fh))", "docs = [yaml.safe_load(fh)]"),
    "first-doc-only": (
        "docs = list(yaml.safe_load_all(fh))",
        "docs = [next(yaml.safe_load_all(fh))]",
    ),
    "over-exits-0": ("sys.exit(1 if over else 0)", "sys.exit(0)"),
    "one-is-over": ("if count > 1:", "if count >= 1:"),
    "first-container-only": ("for container in containers:", "for container in containers[:1]:"),
    "quoted-counts-0": ("return int(value.strip())", "return 0"),
    "always-ok": ('    if not over:\n        print("OK")', '    print("OK")'),
}

# Whether the three samples alone catch the mutant. Several do not: that is why fresh cases exist.
CAUGHT_BY_SAMPLES = {
    "limits-only": False,
    "requests-only": True,
    "safe-load": False,
    "first-doc-only": False,
    "over-exits-0": True,
    "one-is-over": True,
    "first-container-only": False,
    "quoted-counts-0": False,
    "always-ok": True,
}


def write_mutant(tmp_path: Path, name: str) -> Path:
    old, new = MUTANTS[name]
    text = REFERENCE.read_text()
    assert text.count(old) == 1, f"mutant {name}: the reference changed, update the mutant"
    script = tmp_path / f"mutant-{name}.sh"
    script.write_text(text.replace(old, new))
    script.chmod(0o755)
    return script


def test_mutant_table_is_complete() -> None:
    assert set(MUTANTS) == set(CAUGHT_BY_SAMPLES)
    assert not all(CAUGHT_BY_SAMPLES.values())


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_generated_cases_catch_every_mutant_on_every_seed(
    name: str, tmp_path: Path, fast_env: dict[str, str]
) -> None:
    script = write_mutant(tmp_path, name)

    def first_failure(seed: int) -> str | None:
        # Big manifests (several documents or containers) catch the most mutants, so trying
        # them first only saves runs; the assertion (some case fails) does not depend on order.
        for case in sorted(generate(seed), key=lambda c: -len(c.manifest)):
            passed, reason = run_script(script, case, tmp_path / str(seed), fast_env)
            if not passed:
                return reason
        return None

    reasons = parallel(first_failure, range(20))
    assert None not in reasons, (
        f"seeds not catching {name}: {[i for i, r in enumerate(reasons) if r is None]}"
    )
    assert set(reasons) <= set(REASONS) - {"ok"}

    samples = [
        run_script(script, c, tmp_path / "samples", fast_env) for c in sample_cases(FIXTURES)
    ]
    caught_by_samples = not all(passed for passed, _ in samples)
    assert caught_by_samples == CAUGHT_BY_SAMPLES[name], samples
