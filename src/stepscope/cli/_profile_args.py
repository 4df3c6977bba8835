"""The arguments of ``stepscope profile`` and ``stepscope config`` (:mod:`._profile` does
the work): each says its default, and both say up front that the job must be running."""

from __future__ import annotations

import argparse

from stepscope.cli._jobs import add_job_argument
from stepscope.cli._profile import WAIT_S, cmd_config, cmd_profile


def _add_wait(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-wait", action="store_true", help="return once the request is written (default: wait)"
    )
    p.add_argument(
        "--wait",
        type=float,
        default=WAIT_S,
        metavar="SECONDS",
        help=f"how long to wait for the job's answer (default {WAIT_S:g})",
    )


RUNNING = (
    "The job must be running: the request goes into its folder (control/), the job applies "
    "it at its next step boundary and answers; this waits for the answer."
)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``profile`` and ``config`` on the ``stepscope`` parser."""
    p = sub.add_parser(
        "profile",
        help="open (or switch off) profiling windows of a running job",
        description=f"Open (or switch off) profiling windows of a job. {RUNNING}",
    )
    add_job_argument(p)
    w = p.add_argument_group("what to profile (one or more; default: none, give one or --off)")
    w.add_argument(
        "--detailed",
        action="store_true",
        help="PyTorch profiler trace of the window's steps (default: off)",
    )
    w.add_argument(
        "--record-shapes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --detailed: record the operators' input shapes, for their efficiency "
        "against the card's peak (default: on; --no-record-shapes: off)",
    )
    w.add_argument(
        "--profile-memory",
        action="store_true",
        help="with --detailed: record tensor memory allocations (default: off)",
    )
    w.add_argument(
        "--with-stack",
        action="store_true",
        help="with --detailed: record the Python stack of each operator (default: off; costly)",
    )
    w.add_argument(
        "--python",
        choices=["cprofile", "pyinstrument"],
        help="profile the Python code with this profiler (default: none)",
    )
    w.add_argument(
        "--timer",
        default="total_time",
        choices=["total_time", "cpu_time", "off_cpu_time"],
        help="with --python cprofile: the timer (default total_time)",
    )
    w.add_argument(
        "--dataloader", action="store_true", help="per-batch data loader timings (default: off)"
    )
    w.add_argument(
        "--metrics-regex",
        default=".*",
        metavar="REGEX",
        help="with --dataloader: the data loader metrics to keep (default .*: all)",
    )
    w.add_argument(
        "--memory",
        action="store_true",
        help="CUDA memory history for PyTorch's memory viewer (default: off)",
    )
    w.add_argument(
        "--max-entries",
        type=int,
        default=100_000,
        metavar="N",
        help="with --memory: the allocator events kept (default 100000)",
    )
    r = p.add_argument_group("when (one of the two; default: the next step)")
    r.add_argument(
        "--steps",
        metavar="START:N",
        help="N steps from step START (blank START: the next step; blank N: one step); "
        "+K:N: from K steps after the job's current step (default :1)",
    )
    r.add_argument(
        "--start-time",
        metavar="TIME",
        help="a time window from 'now' or unix seconds (default now, with --duration)",
    )
    r.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="the time window's length in seconds (default: one step)",
    )
    p.add_argument(
        "--off",
        action="append",
        choices=["detailed", "python", "dataloader", "memory", "deep"],
        metavar="KIND",
        help="switch open and planned windows of KIND off: detailed, python, dataloader, "
        "memory or deep (repeatable; default: none)",
    )
    _add_wait(p)
    p.set_defaults(fn=cmd_profile)
    p = sub.add_parser(
        "config",
        help="change a running job's settings (sampling interval)",
        description=f"Change a job's settings while it runs. {RUNNING}",
    )
    add_job_argument(p)
    p.add_argument(
        "--interval-ms",
        type=int,
        required=True,
        metavar="MS",
        help="system sampling interval: 100, 200, 500, 1000, 5000 or 60000 ms (required)",
    )
    _add_wait(p)
    p.set_defaults(fn=cmd_config)
