"""The gpushare command: lab lifecycle, grading and the reference solution.

Usage errors and known failures end with one clear line on stderr and exit status 2, never a
traceback. The modules of the lifecycle, ``solve``, capture and Gradescope are imported by their
commands only (each 15-27 ms, measured with ``python -X importtime``, which ``gpushare grade``
would pay before the learner's runs start; each import below says its share).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TypeAlias

import gpushare
from gpushare.classroom import cli as class_cli
from gpushare.data import JsonObject
from gpushare.grading import grade, runner
from gpushare.kube.errors import KubeconfigError, Unreachable
from gpushare.locations import cluster_name, default_workdir, graders_dir
from gpushare.precompile import precompile
from gpushare.reports import messages
from gpushare.sandbox import isolation, runtime

EXIT_OK, EXIT_ERROR = 0, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep its one-line style
        self.print_usage(sys.stderr)
        print(f"gpushare: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


class _Version(argparse.Action):
    """``--version``: :func:`gpushare.version`, the installed distribution's."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, *parsed: object) -> NoReturn:  # what argparse hands it: not needed
        print(f"gpushare {gpushare.version()}")
        raise SystemExit(EXIT_OK)


def _add_shared(p: argparse.ArgumentParser, *flags: str) -> None:
    """Options said as ``gpushare grade`` says them (:data:`grade.SHARED_OPTIONS`)."""
    shared = dict(grade.SHARED_OPTIONS)
    for flag in flags:
        p.add_argument(flag, **shared[flag])


_Sub: TypeAlias = "argparse._SubParsersAction[_Parser]"  # generic to the type checker only


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpushare", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_lifecycle(sub)
    _add_capture(sub)
    _add_grade(sub)
    _add_gradescope(sub)
    _add_class(sub)
    return parser


def _add_lifecycle(sub: _Sub) -> None:
    """The lab's own commands: ``setup``, ``up`` ... ``env``, and ``solve``."""
    sub.add_parser("setup", help="find or build the pinned control-plane binaries")

    for name, text in [
        ("up", "create, restart or reuse the lab cluster with its three nodes"),
        ("down", "delete the lab cluster and end every process of it"),
        ("stop", "stop the lab cluster, keeping its data"),
        ("reset", "put the lab back to its fresh state without restarting it"),
        ("status", "show what runs, where the kubeconfig is, the versions"),
        ("env", 'print export lines: eval "$(gpushare env)"'),
    ]:
        p = sub.add_parser(name, help=text)
        _add_shared(p, "--cluster")
        if name == "status":
            p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("lab", help="show the lab's handout: the steps, in your language, paged")
    p.add_argument("--lang", help="zh, ko or en (default: as gpushare grade chooses)")
    p.add_argument("--no-pager", action="store_true", help="write the text without a pager")
    p.add_argument(
        "--rules", action="store_true", help="how each step is graded (graders/RULES.md)"
    )

    p = sub.add_parser("solve", help="apply the reference solution to the lab and a workdir")
    _add_shared(p, "--cluster")
    p.add_argument(
        "--workdir", help="work directory to write (default: $GPUSHARE_WORKDIR or /root/gpushare)"
    )
    p.add_argument(
        "--kubeconfig", help="solve this cluster instead of the lab (default: $KUBECONFIG)"
    )
    p.add_argument(
        "--step",
        "--steps",
        dest="steps",
        action="append",
        metavar="N[,N...]",
        help="only these steps: --step 1,2 or --step 1 --step 2 (default: all)",
    )


def _add_capture(sub: _Sub) -> None:
    """``snapshot`` and ``submit``: the same capture, for the instructor or handed in."""
    p = sub.add_parser(
        "snapshot", help="capture the cluster and work dir into one hashed file, for grading"
    )
    _add_capture_target(p)
    p.add_argument("--learner", help="learner id (default: $GPUSHARE_LEARNER, else the user name)")
    p.add_argument("--out", help="file or folder to write (default: the current folder)")

    p = sub.add_parser(
        "submit",
        help="hand in: a snapshot of the lab and the work dir, written into the work dir",
        description="Capture the lab and the work dir into one file in the work dir, named after "
        "the learner id, and say what to do with it (upload it to the LMS assignment). The id: "
        "--learner, else $GPUSHARE_LEARNER, else the one given last time, else asked once.",
    )
    _add_capture_target(p)
    p.add_argument("--learner", help="learner id (default: $GPUSHARE_LEARNER, else asked once)")
    p.add_argument("--out", help="file or folder to write (default: the work directory)")
    p.add_argument("--lang", help="language of what is said (default: as grade's)")


def _add_capture_target(p: argparse.ArgumentParser) -> None:
    """What a capture reads: the lab (or a kubeconfig's cluster) and the work directory."""
    _add_shared(p, "--cluster")
    p.add_argument(
        "--workdir", help="the work directory (default: $GPUSHARE_WORKDIR or /root/gpushare)"
    )
    p.add_argument("--kubeconfig", help="capture this cluster (default: $KUBECONFIG, else the lab)")
    p.add_argument("--context", help="kubeconfig context (default: current-context)")


def _add_grade(sub: _Sub) -> None:
    """``grade`` and ``watch``: one learner's lab, once or live."""
    p = sub.add_parser("grade", help="grade a learner's cluster and work directory")
    grade.add_options(p.add_argument)  # the options pytest shares
    p.add_argument("--junitxml", metavar="FILE", help="write JUnit XML (xunit2)")
    p.add_argument(
        "--step",
        "--steps",
        dest="step",
        action="append",
        metavar="N[,N...]",
        help="grade only these steps: --step 1,2 or --step 1 --step 2 (default: all)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="a hard deadline for the whole grade: finished checks keep their results, the "
        "others become errors, the outputs are written, exit 2 (default with --snapshot: 60)",
    )
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="the instructor's visibility policy (TOML): which checks learners see, when, and "
        "whether their feedback shows expected and found",
    )
    p.add_argument(
        "--color",
        choices=["auto", "yes", "no"],
        default="auto",
        help="colour the summary: auto (on a terminal, unless NO_COLOR is set), yes, no",
    )

    p = sub.add_parser(
        "watch",
        help="grade the lab live: every step's state, updated within seconds of each change",
        description="Grade the lab as you work: every step with its state and points, and the "
        "failing checks of the step you are on, graded again within seconds of a change in the "
        "cluster (the apiserver's watch) or in the work directory. Never writes to the "
        "cluster. Ctrl-C to quit.",
    )
    _add_shared(p, "--workdir", "--kubeconfig", "--context", "--cluster", "--lang")


def _add_gradescope(sub: _Sub) -> None:
    """``gradescope bundle|run``: the Gradescope autograder (gpushare.lms.gradescope)."""
    p = sub.add_parser("gradescope", help="the Gradescope autograder: build its bundle, run it")
    gs = p.add_subparsers(dest="gradescope_command", required=True, parser_class=_Parser)
    b = gs.add_parser("bundle", help="write autograder.zip in Gradescope's layout")
    b.add_argument("--out", default="autograder.zip", help="the zip to write")
    b.add_argument("--policy", metavar="FILE", help="visibility policy (TOML) to grade with")
    b.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="the grade's hard deadline in run_autograder (default: 480, below Gradescope's "
        "10-minute limit)",
    )
    b.add_argument(
        "--lang", help="feedback language (default: $GPUSHARE_LANG, else the lab's default_lang)"
    )
    b.add_argument(
        "--sandbox",
        choices=["auto", "require"],
        default="auto",
        help="auto: the bubblewrap sandbox where the container allows it, else without (a note "
        "on the instructors' stdout); require: refuse to grade without it",
    )
    r = gs.add_parser("run", help="what run_autograder runs: grade submission/, write results/")
    r.add_argument("--root", help="the autograder root (default: $AUTOGRADER_ROOT, /autograder)")


def _add_class(sub: _Sub) -> None:
    """``gpushare class grade|merge|export``: a whole class of snapshots (classroom, lms); the
    Kubernetes procedure that runs it is the operator's (``python -m deploy.job``)."""
    p = sub.add_parser("class", help="grade a whole class of snapshots, shard, merge, export it")
    cls = p.add_subparsers(dest="class_command", required=True, parser_class=_Parser)
    q = cls.add_parser("grade", help="grade snapshots in parallel into one class folder")
    q.add_argument("paths", nargs="+", metavar="PATH", help="a snapshot or a folder of them")
    q.add_argument("--out", required=True, metavar="DIR", help="the class folder to write")
    q.add_argument("--previous", metavar="DIR", help="an earlier class folder: show what changed")
    q.add_argument("--shard", metavar="I/N", help="grade only part I of N (0-based)")
    q.add_argument(
        "--expect",
        type=int,
        metavar="N",
        help="refuse (exit 2) unless the paths hold exactly N snapshot files",
    )
    q.add_argument(
        "--policy", metavar="FILE", help="visibility policy (TOML): what learners see of checks"
    )
    q.add_argument(
        "--roster",
        metavar="FILE",
        help="CSV file,learner: whose each snapshot is (docs/instructor.md)",
    )
    q.add_argument(
        "--deadline",
        metavar="TIME",
        help="flag snapshots captured after this ISO 8601 time (UTC unless it says)",
    )
    class_cli.add_grade_options(q)

    q = cls.add_parser("merge", help="merge shard folders into one CSV and one report")
    q.add_argument("shards", nargs="+", metavar="SHARD_DIR")
    q.add_argument("--out", required=True, metavar="DIR", help="the class folder to write")
    q.add_argument("--lang", help="language of the report (default: the shards')")
    q.add_argument(
        "--seed", type=int, help="the --seed the shards ran with (default: what they recorded)"
    )
    q.add_argument("--previous", metavar="DIR", help="an earlier class folder: show what changed")
    _add_export(cls)


def _add_export(cls: _Sub) -> None:
    """``gpushare class export``: a class folder in an LMS's gradebook import (gpushare.lms)."""
    q = cls.add_parser(
        "export",
        help="write a class folder's grades as a Canvas or Moodle gradebook import",
        description="Write CLASS_DIR's grades (a finished class grade or merge) as the gradebook "
        "import file of Canvas, Moodle or both, and beside each a list of who it does not carry.",
    )
    q.add_argument("class_dir", metavar="CLASS_DIR", help="the folder class grade --out wrote")
    q.add_argument("--canvas", action="store_true", help="write canvas-import.csv")
    q.add_argument("--moodle", action="store_true", help="write moodle-import.csv")
    q.add_argument(
        "--roster",
        metavar="FILE",
        help="CSV with a learner column (grades.csv's) and the LMS identities: canvas_id, "
        "sis_user_id, sis_login_id, name, section, email, username, idnumber (docs/instructor.md)",
    )
    q.add_argument("--assignment", required=True, metavar="NAME", help="the assignment's name")
    q.add_argument("--assignment-id", metavar="ID", help="Canvas: the assignment's ID (digits)")
    q.add_argument(
        "--points",
        metavar="N",
        help="the assignment's points possible (default: the lab's maximum score)",
    )
    q.add_argument(
        "--moodle-id",
        choices=["email", "username", "idnumber"],
        default="email",
        help="Moodle: what identifies users, as mapped under Identify user by (default email)",
    )
    q.add_argument(
        "--feedback", action="store_true", help="Moodle: add a column saying the points lost"
    )
    q.add_argument(
        "--missing",
        choices=["blank", "zero"],
        default="blank",
        help="what a roster learner with no submission gets (default blank: no grade)",
    )
    q.add_argument("--lang", help="language of the feedback (default: each learner's)")
    q.add_argument("--to", metavar="DIR", help="where to write (default: CLASS_DIR)")


def _fail(msg: str) -> int:
    print(f"gpushare: {msg}", file=sys.stderr)
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        return _fail("interrupted")


def run() -> None:
    """The ``gpushare`` command: :func:`main`, then exit without the interpreter's teardown
    (some 150 modules: 10-20 ms, a few percent of a grade). Every file we write is closed by
    then, no thread of ours is left running, and the output streams are flushed here."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # e.g. `gpushare grade | head`: the reader is gone
        code = code or EXIT_ERROR
    os._exit(code)


def choose_lang(args: argparse.Namespace) -> None:
    """The command's language, chosen here once (:func:`messages.resolve_lang`) and passed down
    as ``args.lang``; ValueError when ``--lang`` names one not offered. A learner's commands fall
    back to the lab's language, an instructor's (class) to English; a Gradescope bundle's is
    never the builder's locale (learners read it elsewhere). Merging shards and exporting keep
    the shards' or each learner's own language unless ``--lang`` says otherwise;
    ``args.fallback_lang`` is theirs when those disagree or are unknown."""
    command = args.command
    sub = getattr(args, "class_command", None) or getattr(args, "gradescope_command", None)
    if command in ("grade", "submit", "watch", "lab"):
        args.lang = messages.resolve_lang(args.lang)
    elif command == "class" and sub == "grade":
        args.lang = messages.resolve_lang(args.lang, instructor=True)
    elif command == "gradescope" and sub == "bundle":
        args.lang = messages.resolve_lang(args.lang, locale=False)
    elif command == "class" and sub in ("merge", "export"):
        args.lang = messages.offered(args.lang) if args.lang else None
        args.fallback_lang = messages.resolve_lang(None, instructor=True)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        choose_lang(args)
    except ValueError as exc:
        return _fail(str(exc))
    if args.command == "lab":
        return _lab(args)
    if args.command == "grade":
        if not args.unsafe_no_sandbox:
            isolation.probe_soon()  # its few ms of waiting overlap the grade's start
        try:
            return grade.run_cli(args)
        finally:
            isolation.settle()  # not left running when the grade never needed its answer
    if args.command == "watch":
        from gpushare.watch import loop  # lazy: only a watch needs its threads and screen

        return loop.run_cli(args)
    if args.command == "snapshot":
        from gpushare.grading import capture  # lazy: 17 ms (snapshots, YAML)

        return capture.run_cli(args)
    if args.command == "submit":
        from gpushare.grading import submit  # lazy: as snapshot's

        return submit.run_cli(args)
    if args.command == "class" and args.class_command == "export":
        from gpushare.lms import export  # lazy: the LMS's import files, only when asked

        return export.run_cli(args)
    if args.command == "class":
        return class_cli.run(args)
    if args.command == "gradescope":
        # lazy: 20-27 ms (its class inputs, identity and snapshot modules) a live grade never needs
        from gpushare.lms import gradescope

        return gradescope.run_cli(args)

    return _lab_command(args)


def _lab_command(args: argparse.Namespace) -> int:
    """The lab's lifecycle and ``solve``: its known failures end as one line, exit 2."""
    from gpushare.lab import binaries, cluster, nodes  # lazy: 15 ms (the client, TLS)

    try:
        if args.command == "setup":
            return _setup()
        if args.command == "up":
            lab = cluster.up(args.cluster)
            print(f'lab {lab.name} is up; run: eval "$(gpushare env)"')
            return EXIT_OK
        if args.command == "down":
            ended = cluster.down(args.cluster)
            extra = f" (ended {len(ended)} leftover processes by pid)" if ended else ""
            print(f"lab {cluster_name(args.cluster)} deleted{extra}")
            return EXIT_OK
        if args.command == "stop":
            cluster.stop(args.cluster)
            return EXIT_OK
        if args.command == "reset":
            cluster.reset(args.cluster)
            print(f"lab {cluster_name(args.cluster)} reset to its fresh state")
            return EXIT_OK
        if args.command == "env":
            name = cluster_name(args.cluster)
            if not cluster.Lab(name).exists():  # the lines would point at nothing: say so
                from gpushare.lab import existing

                print(f"gpushare: warning: {existing.not_up(name, None)}", file=sys.stderr)
            print("\n".join(cluster.env_lines(args.cluster)))
            return EXIT_OK
        if args.command == "status":
            info = cluster.status(args.cluster)
            if args.json:
                print(json.dumps(info, indent=2))
            else:
                _print_status(info)
            return EXIT_OK
        if args.command == "solve":
            return _solve(args)
    except (
        binaries.BinaryError,
        cluster.ClusterError,
        nodes.LabDefinitionError,
        KubeconfigError,
        Unreachable,
    ) as exc:
        return _fail(str(exc))
    return _fail(f"unknown command {args.command}")


def _lab(args: argparse.Namespace) -> int:
    """``gpushare lab``: the handout in the learner's language (paged on a terminal)."""
    from gpushare.reports import handout  # lazy: only this command reads it

    try:
        if args.rules:  # args.lang: chosen where the command starts (choose_lang)
            body, warning = handout.rules(args.lang)
        else:
            lang, warning = handout.choose(args.lang)
            body = handout.text(lang)
    except handout.HandoutError as exc:
        return _fail(str(exc))
    if warning:
        print(f"gpushare: {warning}", file=sys.stderr)
    if args.no_pager:
        sys.stdout.write(body)
    else:
        handout.show(body)
    return EXIT_OK


def _setup() -> int:
    """``gpushare setup``: the graders compiled, stale sandbox runtimes pruned, the binaries."""
    from gpushare.lab import binaries

    precompile(graders_dir())
    pruned = runtime.prune()
    if pruned:
        print(
            f"[gpushare] removed {len(pruned)} copies of the sandbox's python3 that no "
            f"grade uses any more ({os.path.dirname(pruned[0])})",
            file=sys.stderr,
        )
    for name, path in binaries.ensure().items():
        print(f"{name:<24} {path}")
    return EXIT_OK


def _print_status(info: JsonObject) -> None:
    print(f"cluster     {info['cluster']} ({'exists' if info['exists'] else 'not created'})")
    print(f"directory   {info['directory']}")
    print(f"kubeconfig  {info['kubeconfig']}")
    print(f"apiserver   {info['apiserver'] or '-'}")
    comps = info["components"]
    print(
        "components  " + (", ".join(f"{k} (pid {v})" for k, v in comps.items()) or "none running")
    )
    print("nodes       " + (", ".join(f"{k} {v}" for k, v in info["nodes"].items()) or "-"))
    v = info["versions"]
    print(f"versions    kwok {v['kwok']}, Kubernetes {v['kubernetes']}, etcd {v['etcd']}")
    missing = [k for k, p in info["binaries"].items() if p is None]
    print("binaries    " + ("all cached" if not missing else "missing: " + ", ".join(missing)))


def _solve(args: argparse.Namespace) -> int:
    """``gpushare solve``: the reference solution, on the cluster a grade would judge."""
    from gpushare.kube import config as kube_config  # lazy: 16 ms (YAML, TLS)
    from gpushare.lab import solve  # lazy: 4-6 ms

    workdir = Path(args.workdir).expanduser() if args.workdir else default_workdir()
    try:
        steps = sorted(grade.parse_steps(args.steps)) or None
    except ValueError:
        steps = [0]
    known = sorted({c.meta["step"] for c in runner.load_checks(graders_dir())})
    if steps and not set(steps) <= set(known):
        return _fail(f"--step takes step numbers of {known}, as 1,2 or repeated")
    # --kubeconfig, else $KUBECONFIG (kubectl merges the list itself), else the lab
    target = kube_config.resolve(args.kubeconfig, None, args.cluster)
    kubeconfig = None if target.is_lab else target.kubeconfig
    solve.solve(workdir, kubeconfig=kubeconfig, cluster_name=args.cluster, steps=steps)
    print(f"reference solution applied; work directory: {workdir}")
    return EXIT_OK
