"""The system sampler process of a node, started by the launcher::

    python -m stepscope.sampler.main --job-url URL --node NODE \\
        --interval-ms 500 --watch-pid PID [--parent-pid PID] [--flush-seconds 2] \\
        [--clock-offset-s S] [--timeline-offset-s S]

It samples on a fixed schedule (tick ``k`` at ``start + k * interval``; missed
ticks are skipped, never caught up in a burst), stores rows in ``system/<node>/``
and ``nodes/<node>.json`` (docs/format.md), and ends with a last sample and flush
on SIGTERM or SIGINT, or when the watched process has exited. When the parent
(the launcher) has gone first, it goes on while the training runs, keeps the
node's heartbeat, and records the job's end (:mod:`._gaps`); with no watched
process, it ends then. Spans without samples are recorded as gaps (:mod:`._gaps`).
It never imports torch, pandas or duckdb: start-up is pyarrow's import, made by :func:`main`
after its arguments, with the garbage collector off (:func:`imports_without_gc`).

Fault boundary: every exception of sampling or storing goes to :meth:`Sampler._guard`,
which logs the first one to stderr, records all in ``faults/sampler-<node>-<pid>.json``
and carries on. Store calls run in a flush thread (:mod:`._flusher`), so a store
that blocks never stops the sampling; unstored rows wait in a bounded buffer
(:mod:`._output`).

Sample times are on the job's reference clock: ``--clock-offset-s`` is the node's
measured offset (the one its ranks' agents add, docs/distributed.md), added to
every time and recorded in ``nodes/<node>.json`` (``none``: not measured). They
are on the job's timeline: ``--timeline-offset-s`` is the launcher's job clock
(monotonic plus that offset, job.json's ``monotonic_offset_s``), so a step of the
wall clock, even before the sampler starts, moves no sample (docs/format.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING

from stepscope.jobfolder import use_clock
from stepscope.process import (
    ProgressWriter,
    add_nice_option,
    dump_stack_on_signal,
    exit_at_once,
    imports_without_gc,
    lower_priority,
)
from stepscope.store import StoreError, open_store

if TYPE_CHECKING:
    from stepscope.sampler._sampler import FLUSH_S, Sampler, next_tick

__all__ = ["FLUSH_S", "Sampler", "main", "next_tick"]
_LOOP_NAMES = ("FLUSH_S", "Sampler", "next_tick")


def __getattr__(name: str) -> object:
    # The sampling loop (pyarrow, psutil) is imported by main(), after its arguments.
    if name not in _LOOP_NAMES:
        raise AttributeError(f"module 'stepscope.sampler.main' has no attribute {name!r}")
    from stepscope.sampler import _sampler

    return getattr(_sampler, name)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m stepscope.sampler.main")
    p.add_argument("--job-url", required=True, help="the job folder (path or URL)")
    p.add_argument("--node", required=True, help="node id: writes system/<node>/")
    p.add_argument("--interval-ms", type=int, default=500, help="100, 200, 500, 1000, 5000, 60000")
    p.add_argument("--watch-pid", type=int, help="training process: end when it has exited")
    p.add_argument("--parent-pid", type=int, help="end when it has gone (default: our parent)")
    p.add_argument("--flush-seconds", type=float, help="store rows this often (default 2: FLUSH_S)")
    p.add_argument(
        "--clock-offset-s",
        type=_offset,
        default=0.0,
        help="add to sample times: the node's offset to the job's reference clock "
        "('none': not measured)",
    )
    p.add_argument("--clock-skew-s", type=float, default=0.0, help=argparse.SUPPRESS)  # tests
    p.add_argument(
        "--timeline-offset-s",
        type=float,
        help="the job clock: monotonic time plus this is the job's timeline "
        "(default: the wall clock read at the start)",
    )
    # a restarted sampler: when its predecessor was last seen alive, and why it died
    p.add_argument("--gap-start", type=float, help=argparse.SUPPRESS)
    p.add_argument("--gap-cause", default="the sampler died", help=argparse.SUPPRESS)
    # the launcher's progress file (process._progress): is this sampler hung?
    p.add_argument("--progress-fd", type=int, help=argparse.SUPPRESS)
    add_nice_option(p)
    return p


def _offset(value: str) -> float | None:
    return None if value == "none" else float(value)


def main(argv: list[str] | None = None) -> int:
    dump_stack_on_signal()  # the launcher asks a hung sampler for its stack
    args = _parser().parse_args(argv)
    lower_priority(args.nice)  # before pyarrow starts its threads: they inherit it
    with imports_without_gc():  # pyarrow, numpy, psutil: a seventh less CPU
        from stepscope.sampler._probe import validate_interval_ms
        from stepscope.sampler._sampler import FLUSH_S, Sampler
    try:
        validate_interval_ms(args.interval_ms)
        store = open_store(args.job_url).keep_root()
    except (ValueError, StoreError) as exc:
        print(f"stepscope: sampler: {exc}", file=sys.stderr)
        return 2
    sampler = Sampler(
        store,
        args.node,
        interval_ms=args.interval_ms,
        watch_pid=args.watch_pid,
        parent_pid=args.parent_pid if args.parent_pid is not None else os.getppid(),
        flush_s=FLUSH_S if args.flush_seconds is None else args.flush_seconds,
        clock_offset_s=args.clock_offset_s,
        clock_skew_s=args.clock_skew_s,
        timeline_s=args.timeline_offset_s,
        gap=(args.gap_start, args.gap_cause) if args.gap_start is not None else None,
        progress=ProgressWriter(args.progress_fd),
    )
    use_clock(sampler.now)  # this process's fault records (control refusals): its clock
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: sampler.stop())
    sampler.run()
    return 0


if __name__ == "__main__":
    exit_at_once(main())  # its last write is done: no teardown for the launcher to wait
