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
from gpushare.classroom.inputs import InputError, seed_for
from gpushare.data import JsonObject


def merge(
    shards: list[Path],
    out: Path,
    *,
    lang: str | None = None,
    fallback_lang: str,
    seed: int | None = None,
    previous: Path | None = None,
) -> batch.ClassRun:
    """Merge; InputError when a shard is missing or two shards graded the same submission."""
    started = time.monotonic()
    before = batch.previous_rows(previous)
    rows: list[gradebook.Row] = []
    seen: dict[str, Path] = {}
    for shard in shards:
        if not shard.is_dir():
            raise InputError(f"no such shard folder: {shard}")
        try:
            shard_rows = gradebook.load_rows(shard, strict=True)
        except ValueError as exc:
            raise InputError(f"{exc}: nothing merged") from None
        for row in shard_rows:
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
        lang = langs[0] if len(langs) == 1 else fallback_lang
    lang = batch.offered(lang)
    recorded = {shard: batch.read_class_file(shard) for shard in shards}
    seed = _class_seed(recorded, rows, seed)  # before anything is written
    deadline = _class_deadline(recorded)
    out.mkdir(parents=True, exist_ok=True)
    for folder, shard in sorted(seen.items()):
        src, dst = shard / folder, out / folder
        if src.resolve() != dst.resolve():
            shutil.copytree(src, dst, dirs_exist_ok=True)
    checks = gradebook.catalog()
    due = batch.parse_deadline(deadline)
    run = batch.finish(
        out,
        gradebook.ordered(rows),
        checks,
        lang,
        seed,
        before=before,
        started=started,
        deadline=due,
    )
    extra = {"deadline": deadline} if deadline else {}
    batch.write_class_file(out, seed=seed, lang=lang, merged=[str(s) for s in shards], **extra)
    return run


def _class_deadline(recorded: dict[Path, JsonObject]) -> str | None:
    """The ``--deadline`` the shards were graded with (their ``class.json``); shards that
    disagree are refused: their rows would be flagged by two rules."""
    found = {str(meta.get("deadline") or "") for meta in recorded.values()}
    if len(found) > 1:
        which = ", ".join(sorted(repr(d) if d else "none" for d in found))
        raise InputError(f"the shards were graded with different --deadline values ({which})")
    deadline = found.pop() if found else ""
    return deadline or None


def _class_seed(
    recorded: dict[Path, JsonObject], rows: list[gradebook.Row], given: int | None
) -> int:
    """The ``--seed`` the shards were graded with, as their ``class.json`` record it.

    Shards graded with different seeds judged different unseen cases: refused, as is a
    ``--seed`` that is not theirs, and a learner whose own seed does not derive from it.
    """
    by_shard = {str(s): m["seed"] for s, m in recorded.items() if isinstance(m.get("seed"), int)}
    seeds = sorted(set(by_shard.values()))
    if len(seeds) > 1:
        which = ", ".join(f"{name}: {seed}" for name, seed in sorted(by_shard.items()))
        raise InputError(
            f"the shards were graded with different --seed values ({which}): their unseen "
            "cases differ; grade them again with one --seed"
        )
    if given is not None and seeds and given != seeds[0]:
        raise InputError(f"--seed {given}, but the shards were graded with --seed {seeds[0]}")
    seed = given if given is not None else seeds[0] if seeds else 0
    for row in rows:
        if row.digest and row.seed is not None and row.seed != seed_for(seed, row.digest):
            raise InputError(
                f"{row.folder} was not graded with --seed {seed} (its unseen cases differ "
                "from the others'); grade it again with that seed"
            )
    return seed


def run_cli(args: argparse.Namespace) -> int:
    try:
        run = merge(
            [Path(p).expanduser() for p in args.shards],
            Path(args.out).expanduser(),
            lang=args.lang,
            fallback_lang=args.fallback_lang,
            seed=args.seed,
            previous=Path(args.previous).expanduser() if args.previous else None,
        )
    except InputError as exc:
        print(f"gpushare: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(batch.summary(run))
    return 0
