"""Record the lab's states for its offline gates: ``python tests/record.py [--cluster NAME]``.

Plays the fresh lab, the reference solution and every mutant of ``mutants.py`` on a lab of
its own (taken down afterwards) and writes ``tests/recorded/`` with its ``index.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpushare.labkit import Kit

sys.path.insert(0, str(Path(__file__).parent))
from mutants import MUTANTS

LAB = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default=f"gpushare-rbac-record-{os.getpid()}")
    args = parser.parse_args()
    kit = Kit(LAB)
    try:
        kit.record(args.cluster, LAB / "tests" / "recorded", MUTANTS)
    finally:
        kit.down(args.cluster)


if __name__ == "__main__":
    main()
