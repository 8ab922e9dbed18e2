"""Finding and building the pinned binaries: versions checked, errors clear, cache never torn.

The cold build itself (20+ minutes) is what `make setup` does; these tests drive the same code
with a fake ``go`` so that failures and their messages are exercised in seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpushare import versions
from gpushare.lab import binaries


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSHARE_CACHE", str(tmp_path / "cache"))
    for name in versions.COMPONENTS:
        monkeypatch.delenv("GPUSHARE_BIN_" + name.upper().replace("-", "_"), raising=False)
    return tmp_path / "cache"


@pytest.fixture
def built() -> None:
    """The binaries `make setup` builds into the cache, which the fast tier does not need: a
    fresh clone runs `make test-fast` before any build, so there a test of them is skipped.
    Every other tier (`make test` runs `make setup` first) fails when one is missing."""
    missing = [name for name in versions.COMPONENTS if not binaries.cached_path(name).is_file()]
    if missing and os.environ.get("GPUSHARE_TEST_TIER") == "fast":
        pytest.skip(f"not built yet (make setup): {', '.join(missing)}")


def test_configured_binary_must_have_the_pinned_version(built, monkeypatch, tmp_path):
    kubectl = binaries.find("kubectl")
    assert kubectl is not None, "run make setup first"
    monkeypatch.setenv("GPUSHARE_BIN_KUBECTL", str(kubectl))
    assert binaries.find("kubectl") == kubectl
    monkeypatch.setenv("GPUSHARE_BIN_KUBECTL", "/bin/true")
    with pytest.raises(binaries.BinaryError, match=r"is not kubectl v1\.36\.3"):
        binaries.find("kubectl")
    monkeypatch.setenv("GPUSHARE_BIN_KUBECTL", str(tmp_path / "nope"))
    with pytest.raises(binaries.BinaryError, match="not an executable file"):
        binaries.find("kubectl")


def test_cached_binaries_report_their_pinned_versions(built):
    for name in versions.COMPONENTS:
        path = binaries.cached_path(name)
        assert path.is_file(), f"{name} not built"
        assert binaries.binary_version_ok(name, path), name


def test_no_go_gives_a_clear_error(empty_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(binaries.BinaryError, match="Go is not installed"):
        binaries.ensure(["kwokctl"])


def _fake_go(tmp_path: Path, build_script: str) -> Path:
    """A `go` that answers the version query and runs ``build_script`` for `go build`."""
    bindir = tmp_path / "fake-bin"
    bindir.mkdir()
    go = bindir / "go"
    go.write_text(
        "#!/bin/bash\n"
        'if [ "$1 $2" = "env GOVERSION" ]; then echo go1.26.8; exit 0; fi\n'
        'if [ "$1 $2" = "mod tidy" ]; then echo "go: downloading example.com/x v1.0.0"; '
        "exit 0; fi\n"
        'if [ "$1" = "build" ]; then\n'
        '  while [ "$1" != "-o" ]; do shift; done; out=$2\n'
        f"{build_script}\n"
        "fi\n"
        "exit 3\n"
    )
    go.chmod(0o755)
    return bindir


def test_failed_build_leaves_no_half_written_binary(empty_cache, monkeypatch, tmp_path):
    bindir = _fake_go(
        tmp_path,
        '  echo "partial" > "$out"; echo "compile: something broke" >&2; exit 1',
    )
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    with pytest.raises(binaries.BinaryError) as err:
        binaries.ensure(["kwokctl"])
    assert "building kwokctl v0.8.0 failed (exit 1)" in str(err.value)
    assert "something broke" in str(err.value)
    entry = binaries.cached_path("kwokctl").parent
    assert not binaries.cached_path("kwokctl").exists()
    assert list(entry.iterdir()) == []  # no temporary file left behind either


def test_build_of_wrong_version_is_refused(empty_cache, monkeypatch, tmp_path):
    bindir = _fake_go(
        tmp_path,
        '  printf "#!/bin/sh\\necho kwokctl version v0.0.1\\n" > "$out"; chmod +x "$out"; exit 0',
    )
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    with pytest.raises(binaries.BinaryError, match=r"does not report version v0\.8\.0"):
        binaries.ensure(["kwokctl"])
    assert not binaries.cached_path("kwokctl").exists()


def test_full_disk_is_refused_before_building(empty_cache, monkeypatch, tmp_path):
    bindir = _fake_go(tmp_path, "  exit 1")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setattr(binaries, "MIN_FREE_BYTES", 10**18)
    with pytest.raises(binaries.BinaryError, match="GiB free under"):
        binaries.ensure(["kwokctl"])


def test_progress_is_shown_while_building(empty_cache, monkeypatch, tmp_path, capsys):
    bindir = _fake_go(
        tmp_path,
        '  sleep 0.5; printf "#!/bin/sh\\necho kwokctl version v0.8.0\\n" > "$out"; '
        'chmod +x "$out"; exit 0',
    )
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setattr(binaries, "PROGRESS_EVERY_S", 0.1)
    paths = binaries.ensure(["kwokctl"])
    assert paths["kwokctl"] == binaries.cached_path("kwokctl")
    err = capsys.readouterr().err
    assert "building kwokctl v0.8.0:" in err and "packages compiled" in err
    assert "done in" in err
