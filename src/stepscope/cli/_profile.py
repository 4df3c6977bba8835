"""``stepscope profile`` and ``stepscope config``: change a running job.

Both write one control request into the job folder (``stepscope.jobfolder.control``)
and wait, bounded, for its acknowledgement (``--no-wait`` returns at once)::

    stepscope profile JOB --python cprofile --timer cpu_time --steps 120:3
    stepscope profile JOB --detailed --steps +10:3        # 10 steps from the job's current one
    stepscope profile JOB --detailed --start-time now --duration 5
    stepscope profile JOB --off python
    stepscope config JOB --interval-ms 100
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from stepscope.cli._jobs import job_arg
from stepscope.errors import UsageError

if TYPE_CHECKING:
    from stepscope.jobfolder import JsonObject
    from stepscope.read import Job
    from stepscope.store import Store

WAIT_S = 10.0
BY = "cli"


STEPS_HELP = (
    "give START:N, e.g. 120:3; :3 for the next 3 steps; +K:N for N steps starting K "
    "steps after the job's current one"
)


def parse_steps(text: str) -> JsonObject:
    """``START:N``, ``START`` or ``+K:N`` (blank START: the next step; blank N: one step),
    as the step fields of a window."""
    start, _, count = text.strip().partition(":")
    relative = start.startswith("+")
    try:
        first = int(start[1:] if relative else start) if start.strip("+ ") else None
        num = int(count) if count.strip() else None
    except ValueError:
        raise UsageError(f"--steps {text!r}: {STEPS_HELP}") from None
    if relative:  # counted from the step the job is at when it reads the request
        return {"start_step": None, "step_offset": first or 0, "num_steps": num}
    return {"start_step": first, "num_steps": num}


def _range(args: argparse.Namespace) -> JsonObject:
    if args.steps is not None and (args.start_time is not None or args.duration is not None):
        raise UsageError("--steps and --start-time/--duration conflict: give one of the two")
    if args.start_time is not None or args.duration is not None:
        start = args.start_time
        if start is None or start == "now":  # blank: the job starts it when it reads it
            return {"start_unix_time": None, "duration": args.duration}
        try:
            return {"start_unix_time": float(start), "duration": args.duration}
        except ValueError:
            raise UsageError(f"--start-time {start!r}: give 'now' or unix seconds") from None
    return parse_steps(args.steps) if args.steps else {"start_step": None, "num_steps": None}


def profile_windows(args: argparse.Namespace) -> list[JsonObject]:
    """The windows the options ask for, as ``control.request_profile`` bodies."""
    from stepscope.jobfolder import control

    span = _range(args)
    windows: list[JsonObject] = []
    if not (args.detailed or args.python or args.dataloader or args.memory):
        return windows  # --off alone
    if args.detailed:
        windows.append(
            {
                "kind": "detailed",
                **span,
                "record_shapes": args.record_shapes,
                "profile_memory": args.profile_memory,
                "with_stack": args.with_stack,
            }
        )
    if args.python:
        timer = args.timer if args.python == "cprofile" else None
        windows.append(
            {"kind": "python", **span, "python_profiler": args.python, "cprofile_timer": timer}
        )
    if args.dataloader:
        windows.append({"kind": "dataloader", **span, "metrics_regex": args.metrics_regex})
    if args.memory:
        windows.append({"kind": "memory", **span, "max_entries": args.max_entries})
    control.check_windows(windows)  # the agent checks again; this catches mistakes early
    return windows


def current_step(job: Job) -> int | None:
    """The last training step the job has written (None: none yet, or unreadable)."""
    try:
        found = job.sql("SELECT max(step) AS step FROM steps WHERE phase = 'train'")
        value = found["step"].iloc[0]
    except Exception:  # a hint for the user, never a reason to fail the request
        return None
    return None if value != value or value is None else int(value)


def _running_job(path: str) -> Job:
    from stepscope.read import open

    job = open(path)
    meta = job.meta
    if meta["status"] != "Running":
        raise UsageError(
            f"job {meta.get('name')!r} is {meta['status']}: only a running job takes requests"
        )
    return job


def _wait(store: Store, name: str, args: argparse.Namespace) -> int:
    from stepscope.jobfolder import control

    print(f"requested: {name}")
    if args.no_wait:
        return 0
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        try:
            ack = control.acknowledgement(store, name)
        except ValueError as exc:  # a damaged answer: say so, never a traceback
            print(f"the answer cannot be read: {exc}")
            return 3
        if ack is not None:
            print(f"{'accepted' if ack['accepted'] else 'rejected'}: {ack.get('detail', '')}")
            return 0 if ack["accepted"] else 1
        time.sleep(0.2)
    print(
        f"no answer after {args.wait:g} s: the request stays pending and applies at the "
        "job's next step boundary; its answer will be in control/ack/"
    )
    return 3


def cmd_profile(args: argparse.Namespace) -> int:
    from stepscope.jobfolder import control

    if not (args.detailed or args.python or args.dataloader or args.memory or args.off):
        raise UsageError(
            "nothing to do: give --detailed, --python cprofile|pyinstrument, --dataloader "
            "or --memory "
            "(with --steps START:N or --start-time/--duration), or --off KIND"
        )
    windows = profile_windows(args)
    job = _running_job(job_arg(args))
    step = current_step(job)
    print(
        f"the job is at step {step} (its last step written)"
        if step is not None
        else "the job has written no step yet"
    )
    name = control.request_profile(job.store, windows, BY, off=args.off)
    return _wait(job.store, name, args)


def cmd_config(args: argparse.Namespace) -> int:
    from stepscope.config import SYSTEM_MONITOR_INTERVALS
    from stepscope.jobfolder import control

    if args.interval_ms not in SYSTEM_MONITOR_INTERVALS:
        accepted = ", ".join(map(str, SYSTEM_MONITOR_INTERVALS))
        raise UsageError(
            f"Invalid value {args.interval_ms} for --interval-ms. Accepted values are {accepted}."
        )
    job = _running_job(job_arg(args))
    return _wait(job.store, control.request_interval(job.store, args.interval_ms, BY), args)
