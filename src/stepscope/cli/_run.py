"""``stepscope run``: run a training command as a watched job (one process, or torchrun).

stepscope run -- python train.py --lr 0.1
stepscope run -o runs --job bert-42 --interval-ms 100 -- python -m mypkg.train
stepscope run --nproc-per-node 4 -- train.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from stepscope.cli._preflight import check_command, check_output, check_rules
from stepscope.config import DEFAULT_OUTPUT, StepscopeConfig
from stepscope.errors import ConfigError, UsageError, quote
from stepscope.launch import add_options as add_torchrun_options

METRICS_HOST = "127.0.0.1"  # as stepscope.metrics.DEFAULT_HOST (not imported: run starts fast)


def job_name(command: list[str]) -> str:
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


# The options of `run` that resolve_config takes as arguments, by their key there.
_FLAGS = {"output": "-o/--output", "job": "--job", "interval_ms": "--interval-ms"}


def _resolve(args: argparse.Namespace) -> StepscopeConfig:
    from stepscope.config import resolve_config

    given = {"output": args.output, "job": args.job, "interval_ms": args.interval_ms}
    try:
        return resolve_config(args.config, env=os.environ, args=given)
    except ConfigError as exc:
        for key, flag in _FLAGS.items():  # name the flag the user typed, not the key
            if exc.where == f"argument {key}={quote(given[key])}":
                raise UsageError(f"{flag} {quote(given[key])}: {exc.message}") from None
        raise


# tracker -> (its run's environment variable, the package its extra installs)
TRACKERS = {"mlflow": ("MLFLOW_RUN_ID", "mlflow"), "wandb": ("WANDB_RUN_ID", "wandb")}


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module set to None in sys.modules: blocked, as if missing
        return False


def trackers(args: argparse.Namespace, env: dict[str, str]) -> tuple[str, ...]:
    """The trackers the live rule runner logs to: asked for (``--mlflow``), or a run
    of theirs given in the environment; an asked one must be installed."""
    chosen = []
    for name, (run_env, module) in TRACKERS.items():
        asked = bool(getattr(args, name))
        if asked and args.no_rules:
            raise UsageError(f"--{name} logs from the live rule runner: drop --no-rules")
        if asked and not _installed(module):
            raise UsageError(
                f"--{name}: {module} is not installed: pip install 'stepscope[{name}]'"
            )
        if (asked or env.get(run_env)) and not args.no_rules:
            chosen.append(name)
    return tuple(chosen)


def cmd_run(args: argparse.Namespace) -> int:
    from stepscope.launch import RunSpec, attach, prepare, run

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no command to run. Usage: stepscope run [OPTIONS] -- python train.py")
    named, (command, plan) = command, prepare(args, command)
    check_command(command[0])
    cfg = _resolve(args)
    if cfg.rules and not args.no_rules:
        check_rules(list(cfg.rules))
    metrics = _metrics_address(args)
    if cfg.profiler.disable_profiler:
        print("stepscope: disable_profiler is set: running the command unwatched", file=sys.stderr)
        import subprocess

        return subprocess.call(command)
    name = cfg.job.name or job_name(named)
    output = cfg.job.output or DEFAULT_OUTPUT
    check_output(output, name)
    if plan is None or not plan.multi_node:  # the nodes of a torchrun job share the folder
        _refuse_existing(output, name)
    spec = RunSpec(
        command=command,
        output=output,
        job=name,
        config=cfg.to_dict(),
        interval_ms=cfg.profiler.system_monitor_interval_millis,
        rules=not args.no_rules,
        metrics=metrics,
        trackers=trackers(args, dict(os.environ)),
    )
    return run(spec if plan is None else attach(spec, plan))


def _metrics_address(args: argparse.Namespace) -> tuple[str, int] | None:
    """``(host, port)`` of the Prometheus endpoint, checked; None without --metrics-port."""
    if args.metrics_port is None:
        if args.metrics_host is not None:
            raise UsageError("--metrics-host needs --metrics-port PORT (the port to serve on)")
        return None
    if not 0 <= args.metrics_port <= 65535:
        raise UsageError(
            f"--metrics-port {args.metrics_port}: a port is 0 to 65535 (0: any free one)"
        )
    if args.no_rules:  # the live rule runner serves /metrics
        raise UsageError("--metrics-port needs the live rules: leave out --no-rules")
    return args.metrics_host or METRICS_HOST, args.metrics_port


def _refuse_existing(output: str, name: str) -> None:
    from stepscope.jobfolder import is_job
    from stepscope.store import open_store

    if is_job(open_store(output), name):
        raise UsageError(
            f"a job named {quote(name)} already exists in {quote(output)}. "
            "Choose another --job, or remove the old job folder."
        )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``run`` subcommand."""
    p = sub.add_parser(
        "run",
        help="run a training command as a watched job",
        usage="stepscope run [OPTIONS] -- COMMAND...",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FOLDER",
        help=f"output folder or URL of the jobs (default $STEPSCOPE_OUTPUT, else {DEFAULT_OUTPUT})",
    )
    p.add_argument(
        "--job",
        metavar="NAME",
        help="job name, its folder's name (default $STEPSCOPE_JOB, else <script>-<timestamp>)",
    )
    p.add_argument(
        "--interval-ms",
        type=int,
        metavar="MS",
        help="system sampling interval: 100, 200, 500, 1000, 5000 or 60000 ms "
        "(default $STEPSCOPE_INTERVAL_MS, else 500)",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML configuration file, docs/config.md (default: none; options override it)",
    )
    p.add_argument(
        "--no-rules", action="store_true", help="do not run the rules live (default: they run)"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus /metrics on PORT while the job runs, 0: any free port "
        "(default: not served; docs/integrations.md)",
    )
    p.add_argument(
        "--metrics-host",
        metavar="HOST",
        help=f"address /metrics binds (default {METRICS_HOST}; beyond it, anyone who "
        "reaches the port reads the metrics)",
    )
    p.add_argument(
        "--mlflow",
        action="store_true",
        help="log the job's metrics and verdicts to MLflow while it trains: into the run "
        "$MLFLOW_RUN_ID (also without this flag; never ended), else a new one (default: off)",
    )
    p.add_argument(
        "--wandb",
        action="store_true",
        help="the same to Weights & Biases, into a run of stepscope's own grouped with "
        "$WANDB_RUN_ID's (also without this flag; that run is never resumed) (default: off)",
    )
    add_torchrun_options(p)
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="the training command and its arguments, after -- (required)",
    )
    p.set_defaults(fn=cmd_run)
