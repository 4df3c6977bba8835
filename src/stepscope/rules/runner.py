"""The live rule runner: ``python -m stepscope.rules.runner --job-url URL``.

Started by ``stepscope run`` in its own process beside the job. It scans the
job folder, writes each rule's running verdict to ``rules/<Rule>.json`` (status
``InProgress``), takes the rules' actions (``stop``), and when the job ends
(job.json no longer ``Running``, or the parent process gone) runs a final,
complete evaluation and writes the final statuses. Under ``stepscope run`` the
end is the launcher's word (``--stop-fd``, :mod:`stepscope.process._word`), not
job.json: a job folder deleted or made read-only cannot say the job ended, and the
runner would wait for it until killed. Its own errors are written
to ``faults/rules-runner-<node>-<pid>.json``; it never touches the training.
Under ``stepscope run`` it imports the rules (pandas) only once the job folder
holds a segment or the job has ended (:func:`wait_for_data`), DuckDB only for its
first live scan (the final evaluation reads with pyarrow), and exits without the
interpreter's teardown once its verdicts are written.

No error of one scan ends it (a segment being rewritten, a store that does not
answer): the scan's error is recorded as ``faults/rules-scan-<node>-<pid>.json``
and the next scan reads again what this one could not. If the launcher dies, the
runner goes on while the job is alive (its heartbeats: the sampler keeps them,
docs/design.md "Fault matrix"); the launcher restarts a runner that dies.

Cadence (``_schedule``): a scan every ``period`` seconds, the shortest
``scan_interval_us`` of the rules (2 s by default, at least the store's
``min_interval_s``): a finding shows a period or less after the flush that
completes its evidence. The first scan waits until the runner's start-up
(imports, 0.3-0.5 s of CPU) is paid back at ``CPU_SHARE`` (30-50 s), unless a
rule has an action or a ``scan_interval_us`` below the default
(``Runner.live_from_start``). The next scan waits longer only when a scan costs
more CPU than ``_schedule.CPU_SHARE`` of one core allows (1%, on any
node); a scan that read no new row judges only the rules that read the clock.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from stepscope.jobfolder import FaultLog, folder_trouble, job_timeline, use_clock
from stepscope.process import (
    ProgressWriter,
    Word,
    add_nice_option,
    dump_stack_on_signal,
    exit_at_once,
    imports_without_gc,
    lower_priority,
)
from stepscope.store import Store, open_store

if TYPE_CHECKING:
    from stepscope.read import Job
    from stepscope.rules._live_parts import SCAN_COMPONENT, Observer, chunk_seconds, write_results
    from stepscope.rules._live_runner import POLL_S, Runner
    from stepscope.rules._live_scans import DEFAULT_S, MIN_PERIOD_S

# The loop's names (Runner and friends) live in _live_runner, _live_scans and _live_parts;
# they stay importable here.
__all__ = [
    "COMPONENT",
    "DEFAULT_S",
    "MIN_PERIOD_S",
    "POLL_S",
    "SCAN_COMPONENT",
    "Observer",
    "Runner",
    "chunk_seconds",
    "main",
    "wait_for",
    "write_fault",
    "write_results",
]

COMPONENT = "rules-runner"
_LOOP_NAMES = {
    "DEFAULT_S", "MIN_PERIOD_S", "POLL_S", "SCAN_COMPONENT", "Runner", "chunk_seconds", "Observer"
}  # fmt: skip
WAIT_S = 0.5  # how often a runner with nothing to judge yet looks again
STREAMS = ("steps", "system", "events", "others")  # a segment in any: something to judge


def __getattr__(name: str) -> object:
    # The loop (pandas, DuckDB) only once there is something to judge: see main().
    if name not in _LOOP_NAMES | {"write_results"}:
        raise AttributeError(f"module 'stepscope.rules.runner' has no attribute {name!r}")
    from stepscope.rules import _live_parts, _live_runner, _live_scans

    home = next((m for m in (_live_parts, _live_scans) if hasattr(m, name)), _live_runner)
    return getattr(home, name)


def write_fault(store: Store, exc: BaseException) -> None:
    """Record the runner's own failure in ``faults/`` (docs/format.md); a job folder
    deleted or read-only takes no record, and the launcher says so: nothing to add."""
    if folder_trouble(store, exc) is not None:
        return
    error = f"{type(exc).__name__}: {exc}"
    log = FaultLog(store, socket.gethostname(), os.getpid(), {"rank": None})
    log.record(COMPONENT, error, traceback=traceback.format_exc())
    print(f"stepscope rules runner: {error}", file=sys.stderr, flush=True)


def main(
    argv: Sequence[str] | None = None, observe: Callable[[Job], Observer] | None = None
) -> int:
    """The runner's process; ``observe(job)`` makes one more of its observers (the live
    trackers: ``python -m stepscope.export.live``, which wraps this)."""
    dump_stack_on_signal()  # the launcher asks a hung runner for its stack
    p = argparse.ArgumentParser(prog="python -m stepscope.rules.runner")
    p.add_argument("--job-url", required=True, help="the job folder (path or URL)")
    p.add_argument("--parent-pid", type=int, help="exit (after a final scan) when it is gone")
    p.add_argument("--once", action="store_true", help="one complete evaluation, then exit")
    # the launcher's progress file (process._progress): is this runner hung?
    p.add_argument("--progress-fd", type=int, help=argparse.SUPPRESS)
    p.add_argument("--stop-fd", type=int, help="the launcher's word that the job ended (a pipe)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port")
    p.add_argument("--metrics-host", default="127.0.0.1", help="the address /metrics binds")
    add_nice_option(p)
    args = p.parse_args(argv)
    lower_priority(args.nice)  # before DuckDB starts its threads: they inherit it
    store = open_store(args.job_url).keep_root()
    word = Word(args.stop_fd) if args.stop_fd is not None else None
    progress = ProgressWriter(args.progress_fd)
    metrics, server = None, None
    if args.metrics_port is not None:  # served from the start: the rules come later
        from stepscope.rules._live_metrics import start_metrics

        metrics, server = start_metrics(store, args.metrics_port, args.metrics_host)
    try:
        waited = time.process_time()
        if word is not None:  # under `stepscope run`: nothing to import before data comes
            wait_for_data(store, word, progress)
        waited = time.process_time() - waited  # its listings: not the start-up paid back
        with imports_without_gc():  # pandas, pyarrow: a seventh less CPU
            from stepscope.read import Job
            from stepscope.rules._evaluate import job_rules
            from stepscope.rules._live_runner import Runner

        job = Job(store)
        # Beside the launcher (same node), the job's timeline: the agent's times
        # never step with the wall clock, so the rules' "now" must not either.
        now = job_timeline(job.meta) if args.parent_pid is not None else time.time
        use_clock(now)  # its fault records too
        runner = Runner(job, job_rules(job), clock=now)
        runner.progress = progress
        runner.word = word
        if metrics is not None:
            from stepscope.rules._live_metrics import MetricsFeed

            runner.observe(MetricsFeed(metrics, runner.faults))
        if observe is not None and not args.once:
            runner.observe(observe(job))
        # imports and the job's opening: paid back before the first scan (at most 1 s)
        runner.startup_cpu = min(time.process_time() - waited, 1.0)
        if args.once:
            runner.final()
            runner.close()
        else:
            runner.run(args.parent_pid)
    except Exception as exc:  # recorded in the job; the training is never affected
        if word is not None and folder_trouble(store, exc) is not None:
            wait_for(word)  # a folder deleted before we read it: no restarts, no noise
            return 0
        write_fault(store, exc)
        return 1
    finally:
        if server is not None:
            server.stop()
    return 0


def wait_for(word: Word) -> None:
    """Sleep until the launcher's word comes, or the launcher is gone."""
    while word.heard(WAIT_S) is False:
        pass


def wait_for_data(store: Store, word: Word, progress: ProgressWriter) -> None:
    """Sleep until the job folder holds a segment (the writers' first flush, about 2 s
    into the job), the launcher's word comes, or the launcher is gone. The rules'
    imports (pandas, DuckDB: 0.6 s of CPU) then wait out the training's own start-up,
    which they would slow on a small machine; a job that ends first is judged at once."""
    every = max(WAIT_S, store.min_interval_s)  # object stores bill each listing
    progress.beat()
    while not _has_segment(store) and word.heard(every) is False:
        progress.beat()


def _has_segment(store: Store) -> bool:
    """A ``.parquet`` segment in one of the job's streams (one listing per stream)."""
    try:
        for kind in STREAMS:
            for name in store.listdir(kind):
                if any(n.endswith(".parquet") for n in store.listdir(f"{kind}/{name}")):
                    return True
    except Exception:  # a store that does not answer: the runner's loop records it
        return True
    return False


if __name__ == "__main__":
    exit_at_once(main())  # its last write is done: no teardown for the launcher to wait
