"""bwrap's failures mapped to their cause and fix (gpushare.sandbox.diagnose), from bwrap's own
words: lines recorded from real podman runs (``make images``, step sandbox), and failures
provoked here on the host for real (a masked /proc, seccomp filters, user namespaces off, uid 0
without CAP_SETFCAP), through the sandbox's probe as a grader would meet them."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpushare.sandbox import diagnose
from gpushare.sandbox.diagnose import Facts

ROOT = Path(__file__).resolve().parents[1]

# bwrap 0.8.0's stderr in the grading image under podman 4.3.1 (runc), uid 1000, --cap-drop=all,
# no-new-privileges, with one setting of the printed pod left out (make images, step sandbox)
RECORDED = [
    # --security-opt seccomp=unconfined, no unmask
    ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted", Facts(), "proc-masked"),
    # podman's default seccomp profile (sethostname needs CAP_SYS_ADMIN there)
    (
        "bwrap: Can't set hostname to sandbox: Operation not permitted",
        Facts(seccomp_filtered=True),
        "seccomp",
    ),
    # a profile refusing unshare/clone(CLONE_NEWUSER) with EPERM, as Docker's default does
    (
        "bwrap: No permissions to create new namespace, likely because the kernel does not allow "
        "non-privileged user namespaces. See <https://deb.li/bubblewrap> or "
        "<file:///usr/share/doc/bubblewrap/README.Debian.gz>.",
        Facts(seccomp_filtered=True),
        "seccomp",
    ),
    # uid 0 in the container with --cap-drop=all
    (
        "bwrap: setting up uid map: Operation not permitted",
        Facts(seccomp_filtered=True, root_without_setfcap=True),
        "root-no-setfcap",
    ),
]


@pytest.mark.parametrize(("line", "seen", "key"), RECORDED, ids=[r[2] for r in RECORDED])
def test_a_recorded_failure_names_its_cause_and_the_setting_that_fixes_it(line, seen, key):
    found = diagnose.diagnose(line, seen)
    assert found is not None and found.key == key
    said = diagnose.explain(line, seen)
    assert said.startswith(line) and found.fix in said


def test_the_same_eperm_is_told_apart_by_what_the_process_sees():
    line = "bwrap: No permissions to create new namespace, likely because the kernel ..."
    by = {
        "seccomp": Facts(seccomp_filtered=True),
        "userns-off": Facts(sysctls={"kernel.unprivileged_userns_clone": "0"}),
        "apparmor": Facts(sysctls={"kernel.apparmor_restrict_unprivileged_userns": "1"}),
    }
    for key, seen in by.items():
        found = diagnose.diagnose(line, seen)
        assert found is not None and found.key == key, (key, found)
    limit = Facts(sysctls={"user.max_user_namespaces": "0"}, seccomp_filtered=True)
    assert diagnose.diagnose(line, limit).key == "userns-off"


def test_an_unknown_failure_is_said_as_it_is():
    line = "bwrap: execvp true: No such file or directory"
    assert diagnose.diagnose(line, Facts()) is None
    assert diagnose.explain(line, Facts()) == line
    # a uid map refused for another reason than uid 0 without CAP_SETFCAP: no guess
    assert diagnose.diagnose("bwrap: setting up uid map: Permission denied", Facts()) is None


def test_facts_are_read_from_this_process():
    seen = diagnose.facts()
    assert isinstance(seen.seccomp_filtered, bool)
    assert "user.max_user_namespaces" in seen.sysctls  # every Linux since 4.9 has it
    assert seen.root_without_setfcap is False or os.geteuid() == 0


# --- provoked on the host, for real --------------------------------------------------------

PROBE = "from gpushare.sandbox import isolation as i; print(i.probe().reason or 'OK')"
# bwrap itself, as the sandbox starts it (new namespaces, its own /proc, a hostname), its last
# line of stderr explained there: for the failures that come before any policy of the sandbox
# (which uid runs bwrap is the sandbox's business, and may change)
BWRAP = """
import subprocess
from gpushare.sandbox import diagnose
argv = ["bwrap", "--unshare-all", "--unshare-user", "--cap-drop", "ALL", "--hostname", "s",
        "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
done = subprocess.run(argv, capture_output=True, text=True)
lines = done.stderr.strip().splitlines()
print(diagnose.explain(lines[-1]) if done.returncode else "OK")
"""
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("unshare") is None,
    reason="provoking these failures needs root, bwrap and util-linux's unshare",
)


def _probe(*wrapper: str, code: str = PROBE) -> str:
    """The probe's reason (or what ``code`` prints) in a fresh process started through
    ``wrapper``."""
    done = subprocess.run(
        [*wrapper, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@needs_root
def test_the_probe_works_here_to_begin_with():
    assert _probe() == "OK"
    assert _probe(code=BWRAP) == "OK"


@needs_root
def test_a_masked_proc_is_named_with_procmount_unmasked():
    """A path of /proc covered by a mount, as runtimes mask /proc/keys: bwrap's new user and
    mount namespaces lock that mount, and the kernel refuses a fresh proc."""
    reason = _probe(
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        'mount --bind /dev/null /proc/keys && exec "$0" "$@"',
    )
    assert "Can't mount proc on /newroot/proc: Operation not permitted" in reason
    assert diagnose.PROC_MASKED.fix in reason


@needs_root
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the filters are x86_64 BPF")
@pytest.mark.parametrize(
    ("kind", "line"),
    [
        ("sethostname", "Can't set hostname to sandbox: Operation not permitted"),
        ("userns", "No permissions to create new namespace"),
    ],
)
def test_a_seccomp_filter_is_named_with_the_profile_to_use(kind, line):
    """A real seccomp filter on the grader (as a runtime's profile is): podman's refuses
    sethostname, Docker's the new namespace itself."""
    reason = _probe(sys.executable, "-m", "tests.seccomp_filter", kind, "--")
    assert line in reason
    assert diagnose.SECCOMP.fix in reason
    assert diagnose.USERNS_SYSCTL.fix not in reason


@needs_root
def test_user_namespaces_turned_off_are_named_with_the_sysctl():
    """user.max_user_namespaces=0, set in a user namespace of the test's own (it counts for
    that namespace and those below it)."""
    reason = _probe(
        "unshare",
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"',
        code=BWRAP,
    )
    assert "max_*_namespaces exceeded (ENOSPC)" in reason or "No space left" in reason
    assert diagnose.USERNS_LIMIT.fix in reason


@needs_root
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv")
def test_uid_0_without_setfcap_is_named_with_a_non_root_uid():
    reason = _probe("setpriv", "--bounding-set", "-setfcap", code=BWRAP)
    assert "setting up uid map: Operation not permitted" in reason
    assert diagnose.ROOT_NO_SETFCAP.fix in reason
