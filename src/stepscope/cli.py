"""The ``stepscope`` command: one small function per subcommand."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from .dashboard.cli_support import add_parser as add_ui_parser
from .launch_torchrun import add_options as add_torchrun_options
from .profiling_cli import add_parsers as add_profiling_parsers

DEFAULT_OUTPUT = "./stepscope-runs"


class UsageError(Exception):
    """Bad input from the user: printed as one clear line, exit code 2."""


def _job_name(command: list[str]) -> str:
    """``<script>-<timestamp>`` from ``python train.py`` or ``python -m pkg.train``."""
    script = "job"
    for i, arg in enumerate(command):
        if arg == "-m" and i + 1 < len(command):
            script = command[i + 1].rsplit(".", 1)[-1]
            break
        if arg.endswith(".py"):
            script = os.path.splitext(os.path.basename(arg))[0]
            break
    else:
        script = os.path.basename(command[0]) if command else "job"
    return f"{script}-{time.strftime('%Y%m%d-%H%M%S')}"


def _resolve(args: argparse.Namespace) -> Any:
    from .config import ConfigError, resolve_config

    given = {"output": args.output, "job": args.job, "interval_ms": args.interval_ms}
    try:
        return resolve_config(args.config, env=os.environ, args=given)
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc


def cmd_run(args: argparse.Namespace) -> int:
    from .launcher import RunSpec, run

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no command to run. Usage: stepscope run [OPTIONS] -- python train.py")
    named, (command, plan) = command, _torchrun_plan(args, command)
    if shutil.which(command[0]) is None:
        raise UsageError(f"command not found: {command[0]!r}. Check the name and your PATH.")
    cfg = _resolve(args)
    if cfg.profiler.disable_profiler:
        print("stepscope: disable_profiler is set: running the command unwatched", file=sys.stderr)
        import subprocess

        return subprocess.call(command)
    name = cfg.job.name or _job_name(named)
    output = cfg.job.output or DEFAULT_OUTPUT
    if plan is None or not plan.multi_node:  # the nodes of a torchrun job share the folder
        _refuse_existing(output, name)
    spec = RunSpec(
        command=command,
        output=output,
        job=name,
        config=cfg.to_dict(),
        interval_ms=cfg.profiler.system_monitor_interval_millis,
        rules=not args.no_rules,
    )
    return run(spec if plan is None else _torchrun_attach(spec, plan))


def _torchrun_plan(args: argparse.Namespace, command: list[str]) -> Any:
    from .launch_torchrun import TorchrunUsageError, prepare

    try:
        return prepare(args, command)
    except TorchrunUsageError as exc:
        raise UsageError(str(exc)) from exc


def _torchrun_attach(spec: Any, plan: Any) -> Any:
    from .launch_torchrun import TorchrunUsageError, attach

    try:
        return attach(spec, plan)
    except TorchrunUsageError as exc:
        raise UsageError(str(exc)) from exc


def _refuse_existing(output: str, name: str) -> None:
    from .store import open_store

    if open_store(output).exists(f"{name}/job.json"):
        raise UsageError(
            f"a job named {name!r} already exists in {output}. "
            "Choose another --job, or remove the old job folder."
        )


def cmd_ls(args: argparse.Namespace) -> int:
    from ._text import render_ls
    from .job import list_jobs

    rows = []
    for job in list_jobs(args.output):
        meta = job.meta
        end = meta.get("end_time") or time.time()
        n = job.sql("SELECT count(*) AS n FROM steps WHERE phase = 'train' AND rank = 0")
        rows.append(
            {
                "name": meta["name"],
                "path": job.path,
                "status": meta["status"],
                "start_time": meta.get("start_time"),
                "duration_seconds": end - meta.get("start_time", end),
                "steps": int(n["n"].iloc[0]),
            }
        )
    print(json.dumps(rows, indent=1) if args.json else render_ls(rows))
    return 0


def _open(path: str) -> Any:
    from .job import JobNotFoundError, open

    try:
        return open(path)
    except JobNotFoundError as exc:
        raise UsageError(str(exc)) from exc


def cmd_show(args: argparse.Namespace) -> int:
    from ._text import render_show
    from .analysis.summary import summarize

    summary = summarize(_open(args.job))
    print(json.dumps(summary, indent=1, default=str) if args.json else render_show(summary))
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    from .rules.cli_support import run_rules_command

    _open(args.job)
    text, code = run_rules_command(args.job, args.rule or [], args.param or [], args.json)
    print(text)
    return code


def cmd_report(args: argparse.Namespace) -> int:
    from .report.cli_support import report_command

    _open(args.job)
    text, code = report_command(args.job, args.output)
    print(text)
    return code


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.output)


def cmd_export(args: argparse.Namespace) -> int:
    from .export_tb import export_tensorboard

    done = export_tensorboard(_open(args.job), args.dir)
    print(f"wrote {done.scalars} scalars and {done.histograms} histograms in {done.runs} "
          f"run(s) to {args.dir}: tensorboard --logdir {args.dir}")
    return 0


def _add_export(sub: Any) -> None:
    p = sub.add_parser("export", help="export a job's data to another tool")
    kinds = p.add_subparsers(dest="kind", required=True)
    tb = kinds.add_parser("tensorboard", help="the job's tensors as TensorBoard event files")
    tb.add_argument("job")
    tb.add_argument("dir", help="folder for the event files (tensorboard --logdir DIR)")
    tb.set_defaults(fn=cmd_export)


def _add_run(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a training command as a watched job",
        usage="stepscope run [OPTIONS] -- COMMAND...",
    )
    p.add_argument("-o", "--output", help=f"output folder or URL (default {DEFAULT_OUTPUT})")
    p.add_argument("--job", help="job name (default: <script>-<timestamp>)")
    p.add_argument(
        "--interval-ms",
        type=int,
        help="system sampling interval: 100, 200, 500, 1000, 5000 or 60000 ms (default 500)",
    )
    p.add_argument("--config", help="TOML configuration file (see docs/config.md)")
    p.add_argument("--no-rules", action="store_true", help="do not run rules live")
    add_torchrun_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    p.set_defaults(fn=cmd_run)


def _add_readers(sub: Any) -> None:
    p = sub.add_parser("ls", help="list the jobs of an output folder")
    p.add_argument("output", nargs="?", default=DEFAULT_OUTPUT)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ls)
    p = sub.add_parser("show", help="one-screen summary of a job")
    p.add_argument("job")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_show)
    p = sub.add_parser("rules", help="rule statuses and findings of a job")
    p.add_argument("job")
    p.add_argument("--json", action="store_true")
    p.add_argument("--rule", action="append", help="only this rule (repeatable)")
    p.add_argument("--param", action="append", help="NAME.key=value (repeatable)")
    p.set_defaults(fn=cmd_rules)
    p = sub.add_parser("report", help="write the HTML profiling report of a job")
    p.add_argument("job")
    p.add_argument("-o", "--output", help="file to write (default JOB/report.html)")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("demo", help="run a small demo training job under stepscope")
    p.add_argument("-o", "--output", default=DEFAULT_OUTPUT)
    p.set_defaults(fn=cmd_demo)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stepscope", description="Training debugger and profiler for PyTorch."
    )
    p.add_argument("--version", action="version", version=f"stepscope {_version()}")
    sub = p.add_subparsers(dest="subcommand", required=True)
    _add_run(sub)
    _add_readers(sub)
    _add_export(sub)
    add_profiling_parsers(sub)
    add_ui_parser(sub)
    return p


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    fn: Callable[[argparse.Namespace], int] = args.fn
    try:
        return fn(args)
    except UsageError as exc:
        print(f"stepscope: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        return _missing_extra(exc)
    except OSError as exc:  # StoreError: e.g. an object store that cannot be reached
        from .store import StoreError

        if not isinstance(exc, StoreError):
            raise
        print(f"stepscope: error: {exc}", file=sys.stderr)
        return 2


def _missing_extra(exc: ModuleNotFoundError) -> int:
    extras = {"torch": "torch", "starlette": "dashboard", "uvicorn": "dashboard", "s3fs": "s3",
              "tensorboardX": "tensorboard"}
    extra = extras.get((exc.name or "").split(".")[0])
    if extra is None:
        raise exc
    pin = " torch==2.13.0" if extra == "torch" else ""
    print(
        f"stepscope: error: this needs the [{extra}] extra: pip install 'stepscope[{extra}]'{pin}",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
