"""``gpushare class merge SHARD_DIR... --out DIR``: the shards of a class grade as one class.

Each shard folder (one pod of the Indexed Job) holds the learner folders it graded; the merge
copies them into ``DIR`` and writes ``grades.csv`` and ``report.html`` of all of them, from
their ``results.json`` files alone, as an unsharded run does: the CSV is byte for byte the one
that run would write.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from gpushare.classroom import batch, gradebook
from gpushare.classroom.inputs import InputError


def merge(
    shards: list[Path],
    out: Path,
    *,
    lang: str | None = None,
    seed: int | None = None,
    previous: Path | None = None,
) -> batch.ClassRun:
    """Merge; InputError when a shard is missing or two shards graded the same submission."""
    started = time.monotonic()
    before = batch._previous(previous)
    rows: list[gradebook.Row] = []
    seen: dict[str, Path] = {}
    for shard in shards:
        if not shard.is_dir():
            raise InputError(f"no such shard folder: {shard}")
        for row in gradebook.load_rows(shard):
            if row.folder in seen and seen[row.folder] != shard:
                raise InputError(
                    f"{row.folder} was graded by two shards ({seen[row.folder]} and {shard})"
                )
            seen[row.folder] = shard
            rows.append(row)
    if not rows:
        raise InputError(f"no <learner>/results.json in {', '.join(map(str, shards))}")
    if lang is None:  # the language the shards' feedback was written in
        langs = sorted({r.lang for r in rows if r.lang})
        lang = langs[0] if len(langs) == 1 else None
    lang = batch.resolve_lang(lang)
    out.mkdir(parents=True, exist_ok=True)
    for folder, shard in sorted(seen.items()):
        src, dst = shard / folder, out / folder
        if src.resolve() != dst.resolve():
            shutil.copytree(src, dst, dirs_exist_ok=True)
    if seed is None:  # the seed --seed gave: every shard recorded the same
        seed = 0
    checks = gradebook.catalog()
    return batch.finish(
        out, gradebook.ordered(rows), checks, lang, seed, previous, before, started, []
    )


def run_cli(args: argparse.Namespace) -> int:
    try:
        run = merge(
            [Path(p).expanduser() for p in args.shards],
            Path(args.out).expanduser(),
            lang=args.lang,
            seed=args.seed,
            previous=Path(args.previous).expanduser() if args.previous else None,
        )
    except InputError as exc:
        print(f"gpushare: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(batch.summary(run))
    return 0
