"""Find or build the pinned control-plane binaries, offline, into a per-user cache.

No release binary can be downloaded here, so every component is compiled by the local Go from
its Go module through the module proxy. ``k8s.io/kubernetes`` and etcd's server module carry
``replace`` directives that ``go install pkg@version`` refuses, so each is built inside a small
wrapper module of ours that pins the real versions. The cache is shared by all checkouts of a
user, keyed by ``name@version``, and a binary only ever appears there whole (built aside, then
renamed into place), so an interrupted build never leaves a half-written file that a later run
would trust.

Resolution order, per binary: ``GPUSHARE_BIN_<NAME>`` if set and of exactly the pinned version;
else the cache; else build with Go; else, where no Go exists, nothing (kwokctl downloads that
component itself, which needs a network this machine may not have).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gpushare import versions
from gpushare.locations import cache_dir

MIN_GO = (1, 26)
# A cold build of Kubernetes + etcd + kwok needs the module cache and the build cache:
# several GB. Refuse early with a clear message rather than die half-way on ENOSPC.
MIN_FREE_BYTES = 8 * 1024**3
PROGRESS_EVERY_S = 10.0


class BinaryError(RuntimeError):
    """A binary cannot be found or built; the message says what to do."""


def cached_path(name: str) -> Path:
    version, _ = versions.COMPONENTS[name]
    return cache_dir() / "bin" / f"{name}@{version}" / name


def _env_var(name: str) -> str:
    return "GPUSHARE_BIN_" + name.upper().replace("-", "_")


def binary_version_ok(name: str, path: Path) -> bool:
    """True when ``path --version`` names exactly the pinned version."""
    version, _ = versions.COMPONENTS[name]
    args = ["version", "--client"] if name == "kubectl" else ["--version"]
    try:
        out = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    bare = re.escape(version.lstrip("v"))
    return re.search(rf"(?<![\d.])v?{bare}(?![\d.])", out.stdout + out.stderr) is not None


def find(name: str) -> Path | None:
    """A usable binary for ``name`` without building: configured, then cached."""
    configured = os.environ.get(_env_var(name))
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BinaryError(f"{_env_var(name)}={configured} is not an executable file")
        if not binary_version_ok(name, path):
            version, _ = versions.COMPONENTS[name]
            raise BinaryError(
                f"{_env_var(name)}={configured} is not {name} {version}; "
                f"unset it to let gpushare build the pinned version"
            )
        return path
    path = cached_path(name)
    return path if path.is_file() and os.access(path, os.X_OK) else None


# --------------------------------------------------------------------------- building


@dataclass
class _Group:
    """One wrapper module and the binaries built from it."""

    key: str
    module: str
    version: str
    binaries: list[str]
    tags: str = ""
    ldflags: list[str] = field(default_factory=list)
    staging: bool = False  # the module's go.mod takes k8s.io modules from ./staging


def _groups() -> list[_Group]:
    kube_minor = versions.KUBERNETES.lstrip("v").split(".")[1]
    stamp = {"gitVersion": versions.KUBERNETES, "gitMajor": "1", "gitMinor": kube_minor}
    base = {**stamp, "gitTreeState": "clean"}
    kube_ld = [f"-X k8s.io/component-base/version.{k}={v}" for k, v in base.items()]
    kube_ld += [f"-X k8s.io/client-go/pkg/version.{k}={v}" for k, v in stamp.items()]
    return [
        _Group(
            "kwok",
            "sigs.k8s.io/kwok",
            versions.KWOK,
            ["kwokctl", "kwok"],
            ldflags=[
                f"-X sigs.k8s.io/kwok/pkg/consts.Version={versions.KWOK.lstrip('v')}",
                f"-X sigs.k8s.io/kwok/pkg/consts.KubeVersion={versions.KUBERNETES.lstrip('v')}",
            ],
        ),
        _Group("etcd", "go.etcd.io/etcd/server/v3", versions.ETCD, ["etcd"]),
        _Group(
            "kubernetes",
            "k8s.io/kubernetes",
            versions.KUBERNETES,
            ["kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler"],
            tags="selinux,notest",
            ldflags=kube_ld,
            staging=True,
        ),
    ]


def _log(msg: str) -> None:
    print(f"[gpushare] {msg}", file=sys.stderr, flush=True)


def _fmt_elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def go_env() -> dict[str, str]:
    """Go's environment for our builds: never switch toolchains, never ask VCS hosts."""
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"
    env["GOFLAGS"] = "-mod=mod -buildvcs=false"
    env["CGO_ENABLED"] = "0"
    env.setdefault("GONOSUMDB", "")
    return env


def check_go() -> str:
    """Path of a Go >= 1.26, or a BinaryError saying how to get one."""
    go = shutil.which("go")
    if go is None:
        raise BinaryError(
            "Go is not installed, and the control plane must be built from source here "
            f"(no release downloads). Install Go >= {MIN_GO[0]}.{MIN_GO[1]} and run "
            "`make setup` again, or point GPUSHARE_BIN_<NAME> at prebuilt binaries."
        )
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True)
    m = re.match(r"go(\d+)\.(\d+)", out.stdout.strip())
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_GO:
        raise BinaryError(
            f"{go} is {out.stdout.strip() or 'unknown'}; the pinned components need Go >= "
            f"{MIN_GO[0]}.{MIN_GO[1]}"
        )
    return go


def _check_disk() -> None:
    target = cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    gocache = Path(os.environ.get("GOCACHE") or Path.home() / ".cache" / "go-build")
    for path in {target, gocache if gocache.exists() else target}:
        free = shutil.disk_usage(path).free
        if free < MIN_FREE_BYTES:
            raise BinaryError(
                f"only {free / 1024**3:.1f} GiB free under {path}; a cold build of the "
                f"control plane needs about {MIN_FREE_BYTES // 1024**3} GiB (Go's module and "
                "build caches). Free some space, then run `make setup` again."
            )


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One build at a time per user: two checkouts must not race on the same cache entry."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / "build.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log("another gpushare build holds the cache lock; waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _run_with_progress(
    cmd: list[str], cwd: Path, env: dict[str, str], what: str, unit: str = "packages compiled"
) -> None:
    """Run a Go command, printing which step it is on and elapsed time, never silent for long.

    ``go build -v`` prints each package it compiles; we count them for the progress line and
    keep the tail of the output for the error message.
    """
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    tail: list[str] = []
    count = 0
    done = threading.Event()

    def ticker() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            _log(f"{what}: {count} {unit}, {_fmt_elapsed(time.monotonic() - start)}")

    t = threading.Thread(target=ticker, daemon=True)
    t.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            count += 1
            tail.append(line.rstrip())
            del tail[:-40]
        rc = proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
        raise
    finally:
        done.set()
    if rc != 0:
        text = "\n".join(tail[-25:])
        hint = "is the Go module proxy reachable (GOPROXY), and is there disk space?"
        if "no space left" in text:
            hint = "the disk is full: free some space and run `make setup` again"
        raise BinaryError(f"{what} failed (exit {rc}); {hint}\n{text}")
    _log(f"{what}: done in {_fmt_elapsed(time.monotonic() - start)}")


def _staging_replaces(go: str, env: dict[str, str], module: str, version: str) -> list[str]:
    """The ``k8s.io/<name>`` modules that ``module@version`` takes from ./staging.

    The list changes between minor versions, so it is read from that version's own go.mod.
    """
    cmd = [go, "mod", "download", "-json", f"{module}@{version}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise BinaryError(f"cannot fetch {module}@{version} from the module proxy: {out.stderr}")
    gomod = Path(json.loads(out.stdout)["GoMod"]).read_text()
    return sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", gomod, re.M)))


def _write_wrapper(go: str, env: dict[str, str], group: _Group, wdir: Path) -> None:
    wdir.mkdir(parents=True, exist_ok=True)
    lines = [
        f"module gpushare.build/{group.key}",
        "",
        "go 1.26.0",
        "",
        f"require {group.module} {group.version}",
    ]
    if group.staging:
        staging = _staging_replaces(go, env, group.module, group.version)
        if not staging:
            raise BinaryError(f"no staging modules found in {group.module}@{group.version}")
        lines += ["", "replace ("]
        lines += [f"\t{m} => {m} {versions.KUBERNETES_STAGING}" for m in staging]
        lines += [")"]
    gomod = "\n".join(lines) + "\n"
    pkgs = sorted({versions.COMPONENTS[b][1] for b in group.binaries})
    tools = "//go:build tools\n\npackage tools\n\nimport (\n"
    tools += "".join(f'\t_ "{p}"\n' for p in pkgs) + ")\n"
    gomod_path = wdir / "go.mod"
    if gomod_path.exists() and (wdir / "go.sum").exists() and gomod_path.read_text() == gomod:
        return
    gomod_path.write_text(gomod)
    (wdir / "tools.go").write_text(tools)
    (wdir / "go.sum").unlink(missing_ok=True)
    what = f"resolving modules for {group.key} {group.version}"
    _run_with_progress([go, "mod", "tidy", "-e"], wdir, env, what, unit="modules fetched")


def _build_group(go: str, group: _Group, missing: list[str]) -> None:
    env = go_env()
    wdir = cache_dir() / "build" / f"{group.key}@{group.version}"
    _write_wrapper(go, env, group, wdir)
    for name in missing:
        final = cached_path(name)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".{name}.tmp-{os.getpid()}"
        # every binary stripped (-s -w: no symbol table, no DWARF)
        cmd = [go, "build", "-v", "-trimpath", "-o", str(tmp)]
        if group.tags:
            cmd += ["-tags", group.tags]
        cmd += ["-ldflags", " ".join(["-s", "-w", *group.ldflags])]
        cmd.append(versions.COMPONENTS[name][1])
        try:
            _run_with_progress(cmd, wdir, env, f"building {name} {group.version}")
            if not binary_version_ok(name, tmp):
                raise BinaryError(f"built {name} does not report version {group.version}")
            os.chmod(tmp, 0o755)
            os.replace(tmp, final)  # atomic: the cache only ever holds whole binaries
        finally:
            tmp.unlink(missing_ok=True)


def ensure(names: list[str] | None = None, *, build: bool = True) -> dict[str, Path]:
    """Every requested component's path, building what is missing.

    Where Go is absent, components that cannot be found are left out of the result so that
    kwokctl downloads them itself; kwokctl itself is then required to be configured.
    """
    wanted = list(names or versions.COMPONENTS)
    found = {name: path for name in wanted if (path := find(name)) is not None}
    missing = [name for name in wanted if name not in found]
    if not missing or not build:
        return found
    if shutil.which("go") is None and "kwokctl" not in missing:
        _log(f"no Go found: leaving {', '.join(missing)} to kwokctl to download")
        return found
    go = check_go()
    _check_disk()
    with _build_lock():
        # Another process may have built some while we waited for the lock.
        still = [n for n in missing if find(n) is None]
        if still:
            total_start = time.monotonic()
            _log(
                f"building {', '.join(still)} from Go modules (a cold build takes many minutes; "
                "later runs use the cache at " + str(cache_dir()) + ")"
            )
            for group in _groups():
                todo = [n for n in group.binaries if n in still]
                if todo:
                    _build_group(go, group, todo)
            _log(f"all binaries ready in {_fmt_elapsed(time.monotonic() - total_start)}")
    for name in missing:
        path = find(name)
        if path is None:
            raise BinaryError(f"{name} is still missing after the build")
        found[name] = path
    return found
