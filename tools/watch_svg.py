"""docs/watch.svg: ``make watch`` on a real lab, drawn from its screen.

``make docs-pictures`` starts a lab of its own (:data:`NAME`), plays the reference solution's
steps 1 and 2 into a fresh work dir, runs ``gpushare watch`` in an 80x24 tmux window, waits for
its first grades, and draws the screen as tmux holds it, colours and all, with
:func:`terminal_svg.svg`. Nothing in the picture is typed by hand; the temporary work dir's path
is shown as the lab pod's ``/root/gpushare``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import terminal_svg

from gpushare.lab import cluster, solve

ROOT = terminal_svg.ROOT
OUT = ROOT / "docs" / "watch.svg"
NAME = "gpushare-pictures"
MARK_COMMAND = ["make", "watch"]


def screen(work: Path, sock: Path) -> str:
    """The watch's screen once its first grades are done (``tmux capture-pane -e``)."""
    tmux = ["tmux", "-S", str(sock)]
    command = [
        sys.executable,
        "-m",
        "gpushare",
        "watch",
        "--cluster",
        NAME,
        "--workdir",
        str(work),
        "--lang",
        "en",
    ]
    shell = f"TERM=xterm-256color LANG=C.UTF-8 {' '.join(command)}; sleep 600"
    subprocess.run(
        [*tmux, "-u", "new-session", "-d", "-x", "80", "-y", "24", "sh", "-c", shell], check=True
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            plain = subprocess.run(
                [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=True
            ).stdout
            if "updated" in plain.splitlines()[0] and "3. MIG" in plain:
                time.sleep(1.0)  # the last draw
                return subprocess.run(
                    [*tmux, "capture-pane", "-p", "-e"], capture_output=True, text=True, check=True
                ).stdout
            time.sleep(0.2)
        raise SystemExit(f"gpushare watch showed no grade within 60 s:\n{plain}")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)


def main() -> None:
    if shutil.which("tmux") is None:
        raise SystemExit("docs/watch.svg needs tmux (make test-tools installs it)")
    cluster.up(NAME)
    try:
        cluster.reset(NAME)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / "work"
            solve.solve(work, cluster_name=NAME, steps=[1, 2])
            shown = screen(work, Path(tmp) / "tmux.sock").replace(str(work), "/root/gpushare")
        label = "A learner's terminal: gpushare watch, steps 1 and 2 done, step 3 to fix"
        OUT.write_text(terminal_svg.svg(shown, MARK_COMMAND, label), encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
    finally:
        cluster.down(NAME)


if __name__ == "__main__":
    main()
