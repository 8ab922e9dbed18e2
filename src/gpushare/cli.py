"""The ``gpushare`` command: lab lifecycle, grading and the reference solution.

Heavy modules are imported inside each command, so ``gpushare env`` or a warm ``gpushare up``
pays only for what it uses. Usage errors and known failures end with one clear line on stderr
and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its one-line style
        self.print_usage(sys.stderr)
        print(f"gpushare: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def _add_cluster(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster",
        help="lab cluster name (default: $GPUSHARE_CLUSTER or 'gpushare')",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpushare", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("setup", help="find or build the pinned control-plane binaries")
    p.add_argument("--print", action="store_true", help="print the binaries' paths as JSON")

    for name, text in [
        ("up", "create, restart or reuse the lab cluster with its three nodes"),
        ("down", "delete the lab cluster and end every process of it"),
        ("stop", "stop the lab cluster, keeping its data"),
        ("reset", "put the lab back to its fresh state without restarting it"),
        ("status", "show what runs, where the kubeconfig is, the versions"),
        ("env", 'print export lines: eval "$(gpushare env)"'),
    ]:
        p = sub.add_parser(name, help=text)
        _add_cluster(p)
        if name == "status":
            p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("solve", help="apply the reference solution to the lab and a workdir")
    _add_cluster(p)
    p.add_argument(
        "--workdir", help="work directory to write (default: $GPUSHARE_WORKDIR or /root/gpushare)"
    )
    p.add_argument("--kubeconfig", help="solve this cluster instead of the lab")
    p.add_argument("--steps", help="comma-separated step numbers (default: all)")

    p = sub.add_parser("grade", help="grade a learner's cluster and work directory")
    _add_cluster(p)
    p.add_argument(
        "--workdir",
        help="the learner's work directory (default: $GPUSHARE_WORKDIR or /root/gpushare)",
    )
    p.add_argument("--kubeconfig", help="grade this cluster as given; never start anything")
    p.add_argument("--lang", help="feedback language: zh (default), ko, en")
    p.add_argument("--json", metavar="FILE", help="write Gradescope-style results.json")
    p.add_argument("--junitxml", metavar="FILE", help="write JUnit XML (xunit2)")
    p.add_argument("--seed", type=int, help="seed of the generated check-request cases")
    p.add_argument("--step", action="append", help="grade only these steps (repeatable)")
    p.add_argument("--color", choices=["auto", "yes", "no"], default="auto")
    return parser


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
    """The ``gpushare`` command: :func:`main`, then exit without the interpreter's teardown.

    Tearing down some 150 modules costs 10-20 ms, a few percent of a grade. Every file we write
    is closed by then, no thread of ours is left running, and the output streams are flushed
    here; :func:`main` stays a plain function for callers in the same process.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # e.g. `gpushare grade | head`: the reader is gone
        code = code or EXIT_ERROR
    os._exit(code)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "grade":
        from gpushare import grade

        return grade.run_cli(args)

    from gpushare import binaries, cluster
    from gpushare.kubeapi import KubeconfigError, Unreachable

    try:
        if args.command == "setup":
            from gpushare.locations import graders_dir
            from gpushare.precompile import precompile

            precompile(graders_dir())
            paths = binaries.ensure()
            if args.print:
                print(json.dumps({k: str(v) for k, v in paths.items()}, indent=2))
            else:
                for name, path in paths.items():
                    print(f"{name:<24} {path}")
            return EXIT_OK
        if args.command == "up":
            lab = cluster.up(args.cluster)
            print(f'lab {lab.name} is up; run: eval "$(gpushare env)"')
            return EXIT_OK
        if args.command == "down":
            ended = cluster.down(args.cluster)
            extra = f" (ended {len(ended)} leftover processes by pid)" if ended else ""
            print(f"lab {cluster.cluster_name(args.cluster)} deleted{extra}")
            return EXIT_OK
        if args.command == "stop":
            cluster.stop(args.cluster)
            return EXIT_OK
        if args.command == "reset":
            cluster.reset(args.cluster)
            print(f"lab {cluster.cluster_name(args.cluster)} reset to its fresh state")
            return EXIT_OK
        if args.command == "env":
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
            from gpushare import solve

            return solve.run_cli(args)
    except (binaries.BinaryError, cluster.ClusterError, KubeconfigError, Unreachable) as exc:
        return _fail(str(exc))
    return _fail(f"unknown command {args.command}")


def _print_status(info: dict) -> None:
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
