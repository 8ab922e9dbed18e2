"""The Gradescope autograder: ``gpushare gradescope bundle`` builds it, ``... run`` is its body.

The bundle is a zip in Gradescope's layout (gradescope-autograders.readthedocs.io, "Autograder
Specifications"): ``setup.sh`` and ``run_autograder`` at its root, beside the package, the lab,
the pinned requirements, the settings and the policy. Gradescope unpacks it into
``/autograder/source``, runs ``setup.sh`` once when it builds the image, and ``run_autograder``
once per submission with the upload in ``/autograder/submission``. Both scripts take their root
from ``AUTOGRADER_ROOT``, so the tests run the real scripts in a temporary folder.

Grading needs no kwok, no Go and no cluster: the learner uploads the snapshot ``make submit``
wrote in the lab pod. What the learner reads:

- a snapshot: the grade under the policy, with a deadline below Gradescope's 10 minutes (whose
  own limit would leave a 0 and no output at all), under the memory cap of
  :mod:`gpushare.grading.guard`, and with the seed ``class grade`` gives the same file, so a
  regrade of one upload is the same grade;
- no upload, or not a snapshot: what to upload and how (``make submit``), score 0;
- a grade that could not be taken (an answer missing from the snapshot, the sandbox refused,
  a bug of ours): no results.json, exit 2, the reason on stdout, which only instructors see.
  Gradescope then shows "The autograder failed to execute correctly" and records no score, where
  a results.json without a score is outside its specification and a 0 would be the learner's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
import zipfile
from pathlib import Path

import gpushare
from gpushare import __version__
from gpushare.classroom.gradebook import write_text
from gpushare.classroom.inputs import seed_for
from gpushare.data import JsonObject
from gpushare.feedback import T
from gpushare.grading import guard
from gpushare.grading.errors import GradeError
from gpushare.grading.grade import OptionError, Options, grade, lab_points
from gpushare.locations import default_fixtures, graders_dir, lock_file
from gpushare.reports import clean, messages, terminal
from gpushare.reports.policy import PolicyError, total_warning
from gpushare.reports.policy import load as load_policy
from gpushare.reports.results import Report
from gpushare.sandbox import levels
from gpushare.sandbox.isolation import IsolationUnavailable
from gpushare.submissions.snapshot import SUFFIX, SnapshotError, peek_digest

DEFAULT_ROOT = "/autograder"
DEFAULT_TIMEOUT = 480.0  # Gradescope stops everything at 600 s; results must be out before
SETTINGS = "gpushare-autograder.json"
POLICY = "policy.toml"
# The bundle's policy.toml when no --policy is given: the defaults, written out.
DEFAULT_POLICY = """\
# The visibility policy of this autograder: gpushare's defaults, as no --policy was given.
# Every check is visible, and a failed check's feedback shows expected and found.
[default]
visibility = "visible"
show_expected = true
"""
TEMPLATES = Path(__file__).with_name("templates")
# What grading a snapshot imports beyond the standard library: their entries of the lock that
# the grading image installs too (requirements/grade.lock: versions and hashes), copied as they
# are, so both install the same files.
REQUIREMENTS = ("PyYAML", "psutil")
EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same inputs give the same zip


class BundleError(Exception):
    """The bundle cannot be built; one line (exit 2)."""


def requirements() -> str:
    """The lock's entries for :data:`REQUIREMENTS` (``name==version`` and its hashes)."""
    lock = lock_file()
    try:
        text = lock.read_text(encoding="utf-8")
    except OSError:
        raise BundleError(f"no dependency lock at {lock}: build from a checkout") from None
    entries: dict[str, str] = {}
    for entry in re.split(r"\n(?=\S)", text):
        match = re.match(r"([A-Za-z0-9_.-]+)==", entry)
        if match:
            entries[_normal(match[1])] = entry.rstrip() + "\n"
    missing = [n for n in REQUIREMENTS if _normal(n) not in entries]
    if missing:
        raise BundleError(f"{lock} pins no {', '.join(missing)}: run make lock")
    return "".join(entries[_normal(n)] for n in REQUIREMENTS)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _tree(folder: Path, name: str) -> list[tuple[str, bytes, int]]:
    """The zip's members for every file under ``folder``, as ``name/...``, bytecode left out."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix != ".pyc":
            out.append((f"{name}/{rel.as_posix()}", path.read_bytes(), 0o644))
    return out


def bundle(
    out: Path,
    *,
    policy: Path | None = None,
    timeout: float | None = None,
    lang: str | None = None,
    sandbox: str = "auto",
) -> Path:
    """Write the autograder zip; BundleError (one line) when it cannot be built. The policy and
    language are checked here, so a typo fails on the instructor's machine, not on every
    learner's submission."""
    settings = _bundle_settings(timeout, lang, sandbox)
    members: list[tuple[str, bytes, int]] = [
        ("setup.sh", (TEMPLATES / "setup.sh").read_bytes(), 0o755),
        ("run_autograder", (TEMPLATES / "run_autograder").read_bytes(), 0o755),
        ("requirements.txt", requirements().encode(), 0o644),
        (SETTINGS, (json.dumps(settings, indent=2) + "\n").encode(), 0o644),
        (POLICY, _policy_bytes(policy), 0o644),
    ]
    # the package, and the lab: its graders folder whole (support modules, texts, lab.toml)
    fixtures, graders = default_fixtures(), graders_dir()
    if not fixtures.is_dir():
        raise BundleError(f"the lab's fixtures are not at {fixtures}")
    if not list(graders.glob("test_step*.py")):
        raise BundleError(f"no graders at {graders}")
    members += _tree(Path(gpushare.__file__).parent, "src/gpushare")
    members += _tree(graders, "graders") + _tree(fixtures, "fixtures")
    return _write_zip(Path(out), members)


def _bundle_settings(timeout: float | None, lang: str | None, sandbox: str) -> JsonObject:
    """``gpushare-autograder.json``: the grade's deadline, language and sandbox, checked."""
    timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
    if not 0 < timeout < 600:
        raise BundleError(f"--timeout {timeout:g}: give seconds below Gradescope's 600")
    if sandbox not in ("auto", "require"):
        raise BundleError(f"--sandbox {sandbox}: auto or require")
    # chosen by the command (gpushare.cli.choose_lang: never the builder's locale), never null
    try:
        lang = messages.offered(lang or messages.lab_default())
    except ValueError as exc:
        raise BundleError(str(exc)) from None
    return {
        "gpushare_version": __version__,
        "timeout": timeout,
        "lang": lang,
        "sandbox": sandbox,
        "policy": POLICY,
    }


def _policy_bytes(policy: Path | None) -> bytes:
    """The policy file, checked (the default one when none is given: every bundle has the same
    layout); a warning when its points are not the lab's."""
    policy_bytes, loaded = DEFAULT_POLICY.encode(), None
    if policy is not None:
        try:
            loaded = load_policy(policy)
        except PolicyError as exc:
            raise BundleError(str(exc)) from None
        policy_bytes = policy.read_bytes()
    warning = total_warning(loaded, lab_points())  # the Gradescope assignment's points
    if warning:
        print(warning, file=sys.stderr)
    return policy_bytes


def _write_zip(out: Path, members: list[tuple[str, bytes, int]]) -> Path:
    """The zip, written whole or not at all (a temporary name, then renamed), byte-stable."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data, mode in members:
                info = zipfile.ZipInfo(name, _ZIP_TIME)
                info.external_attr = (0o100000 | mode) << 16  # a regular file, its mode
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def find_upload(submission: Path) -> tuple[Path | None, str, dict[str, str]]:
    """(the file to grade, or None with a problem key and its parameters): the one
    ``*.gpushare.tgz`` uploaded, else a single file of another name (a learner may have renamed
    it: its content decides). Several snapshots are refused rather than one picked."""
    files: list[Path] = []
    if submission.is_dir():
        for path in sorted(submission.rglob("*")):
            rel = path.relative_to(submission)
            if any(p.startswith(".") or p == "__MACOSX" for p in rel.parts):
                continue  # .DS_Store and the like, which zip tools add
            if path.is_file() and not path.is_symlink():
                files.append(path)
    if not files:
        return None, "upload_missing", {}
    snapshots = [f for f in files if f.name.endswith(SUFFIX)]
    if len(snapshots) == 1:
        return snapshots[0], "", {}
    if len(snapshots) > 1:
        return None, "upload_several", {"names": _names(snapshots, submission)}
    if len(files) == 1:
        return files[0], "", {}
    reason = f"none of them is a {SUFFIX} file"
    return None, "upload_wrong", {"name": _names(files, submission), "reason": reason}


def _names(files: list[Path], root: Path) -> str:
    """The learner's file names as they may appear in feedback: printable, short, three."""
    names = []
    for path in files[:3]:
        name = path.relative_to(root).as_posix()
        name = "".join(ch if ch.isprintable() else "?" for ch in name)
        names.append(name if len(name) <= 80 else name[:77] + "...")
    more = len(files) - 3
    return ", ".join(names) + (f" (+{more})" if more > 0 else "")


def _learner_problem(
    results: Path, problem: str, params: dict[str, str], lang: str, started: float
) -> int:
    """results.json for an upload that is not a snapshot: score 0, and what to upload."""
    text = messages.render_value(T(problem, **params), lang)
    data: JsonObject = {
        "score": 0,
        "execution_time": round(time.monotonic() - started, 3),
        "output": text,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "tool": "gpushare",
            "tool_version": __version__,
            "upload_problem": problem,
            "lang": lang,
        },
    }
    write_json(results, data)
    print(clean.text(f"gpushare: {problem}: {text}"))
    return EXIT_FAILED


def gradescope_json(report: Report) -> JsonObject:
    """The report's results.json, held to Gradescope's specification: plain text everywhere,
    as learners' file names and script output would be read as HTML under the default
    ``simple_format`` (``<your id>`` vanishing as a tag); the top ``max_score``, which the
    specification does not have, moves into ``extra_data``."""
    data = report.as_json()
    data["extra_data"]["max_score"] = data.pop("max_score")
    data.update(output_format="text", test_output_format="text", test_name_format="text")
    return data


def write_json(path: Path, data: JsonObject) -> None:
    """Atomically (Gradescope reads the file once, after run_autograder ends), left 0600."""
    write_text(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n", private=True)


def _settings(source: Path) -> JsonObject:
    try:
        data = json.loads((source / SETTINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    return {"timeout": DEFAULT_TIMEOUT, "lang": None, "sandbox": "auto", "policy": None, **data}


def run(root: Path) -> int:
    """Grade ``root/submission`` into ``root/results/results.json``; the exit status."""
    started = time.monotonic()
    source = root / "source"
    results = root / "results" / "results.json"
    results.unlink(missing_ok=True)  # a runner that reuses its root: no stale grade is read
    settings = _settings(source)
    # the bundle's graders and fixtures, whatever the package's own location says
    os.environ["GPUSHARE_GRADERS"] = str(source / "graders")
    os.environ["GPUSHARE_FIXTURES"] = str(source / "fixtures")
    try:  # the bundle's own, chosen when it was built
        lang = messages.offered(str(settings["lang"] or messages.lab_default()))
    except ValueError:
        lang = messages.lab_default()
    # the uid level: none of ours readable by the runs
    levels.protect_at_uid([root / "source", root / "results", root / "submission", root])
    upload, problem, params = find_upload(root / "submission")
    if upload is None:
        return _learner_problem(results, problem, params, lang, started)
    print(f"gpushare: grading {_names([upload], root)}")
    try:
        # the seed of the unseen cases from the content hash, as ``class grade`` derives it with
        # its default ``--seed 0``: every run on one upload judges the same cases as the class
        seed = seed_for(0, peek_digest(upload))
        timeout = float(settings["timeout"])
        policy = load_policy(source / settings["policy"]) if settings.get("policy") else None
        # never unsandboxed: a snapshot is strangers' work, graded at bubblewrap where the
        # container allows it, else at uid (Gradescope runs us as root); ``require`` refuses
        # anything but bubblewrap (no score, as for any grade that could not be taken)
        if settings.get("sandbox") == "require":
            levels.choose(strangers=True, minimum=levels.BUBBLEWRAP)
        options = Options(snapshot=upload, lang=lang, seed=seed, timeout=timeout, policy=policy)
        with guard.capped_memory():
            outcome = grade(options, started)
    except IsolationUnavailable as exc:
        return _not_graded(str(exc))
    except (MemoryError, RuntimeError) as exc:
        if not guard.out_of_memory(exc):
            raise
        return _not_graded(guard.memory_message())
    except SnapshotError as exc:
        name = _names([upload], root / "submission")
        params = {"name": name, "reason": str(exc)}
        return _learner_problem(results, "upload_wrong", params, lang, started)
    except (OptionError, GradeError, PolicyError) as exc:
        return _not_graded(str(exc))
    report = outcome.report
    if not report.complete and not report.timed_out:
        print(clean.text(json.dumps(report.as_json(), ensure_ascii=False, indent=2)))
        return _not_graded(f"could not grade: {report.could_not_grade}")
    write_json(results, gradescope_json(report))
    print(terminal.render(report, color=False), end="")
    print(f"results.json: {results}")
    if report.timed_out:
        print(clean.line(f"gpushare: could not finish: {report.could_not_grade}"))
    return outcome.exit_status


def _not_graded(reason: str) -> int:
    """No results.json: Gradescope's "failed to execute" state, no score recorded."""
    print(clean.line(reason if reason.startswith("gpushare:") else f"gpushare: {reason}"))
    print("gpushare: no results.json written: this submission is not graded (not a zero)")
    return EXIT_ERROR


def run_cli(args: argparse.Namespace) -> int:
    if args.gradescope_command == "bundle":
        try:
            path = bundle(
                Path(args.out).expanduser(),
                policy=Path(args.policy).expanduser() if args.policy else None,
                timeout=args.timeout,
                lang=args.lang,
                sandbox=args.sandbox,
            )
        except (BundleError, OSError) as exc:
            print(f"gpushare: {exc}", file=sys.stderr)
            return EXIT_ERROR
        with zipfile.ZipFile(path) as zf:
            count = len(zf.namelist())
        print(f"{path} ({path.stat().st_size // 1024} KiB, {count} files)")
        return EXIT_OK
    root = Path(args.root or os.environ.get("AUTOGRADER_ROOT") or DEFAULT_ROOT)
    try:
        return run(root)
    except Exception:  # a bug of ours: not the learner's zero; the trace for instructors
        traceback.print_exc(file=sys.stdout)
        return _not_graded("the autograder failed (the trace is above)")
