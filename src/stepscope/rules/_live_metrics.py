"""The live rule runner's ``/metrics`` endpoint (``stepscope run --metrics-port``).

The runner already reads every new row of the job and judges it: its observer
:class:`MetricsFeed` feeds both to a :class:`stepscope.metrics.JobMetrics`, served
from a thread of the runner's process, so the training process does nothing for it.
A port in use (or any failure of the server) is a fault record,
``faults/metrics-server-<node>-<pid>.json``; the rules and the training go on.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from stepscope.jobfolder import FaultLog
from stepscope.metrics import JobMetrics, MetricsServer, render
from stepscope.store import Store

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._types import RuleResult

COMPONENT = "metrics-server"


def job_label(store: Store) -> str:
    """The job's name as its folder names it (the ``job`` label)."""
    return store.url.rstrip("/").rsplit("/", 1)[-1]


def start_metrics(store: Store, port: int, host: str) -> tuple[JobMetrics, MetricsServer | None]:
    """The job's metrics, and their server bound and started (None if it could not be)."""
    metrics = JobMetrics(job_label(store))
    faults = FaultLog(store, socket.gethostname(), os.getpid(), {"rank": None})

    def failed(exc: Exception) -> None:  # a scrape's render: counted in one record
        faults.record(COMPONENT, f"rendering /metrics: {type(exc).__name__}: {exc}"[:500])

    try:
        server = MetricsServer(lambda: render([metrics]), port, host, on_error=failed).start()
    except (OSError, ValueError) as exc:  # a port in use, an address not of this machine
        error = f"cannot serve /metrics on {host}:{port}: {type(exc).__name__}: {exc}"
        faults.record(COMPONENT, error)
        print(f"stepscope: {error} (the job runs on without it)", file=sys.stderr, flush=True)
        return metrics, None
    print(f"stepscope: Prometheus metrics at {server.url}", file=sys.stderr, flush=True)
    return metrics, server


def feed_verdicts(metrics: JobMetrics, results: Sequence[RuleResult]) -> None:
    """Each rule's verdict now (its running one while the job runs) and findings."""
    for res in results:
        status = str(res.verdict or res.status)
        metrics.set_rule(res.rule, status, (repr(f.key()) for f in res.findings))


class MetricsFeed:
    """The runner's observer (:class:`~stepscope.rules._live_parts.Observer`) that
    feeds ``/metrics``: each scan's rows and verdicts, the last rows, the final
    verdicts. Its failure is its own fault: the rules go on without the metrics."""

    reads_rows = True

    def __init__(self, metrics: JobMetrics, faults: FaultLog) -> None:
        self.metrics, self.faults = metrics, faults

    def seen(self, frames: dict[str, pd.DataFrame]) -> None:
        for kind, frame in frames.items():  # a kind that fails leaves the others fed
            self._guard(partial(self.metrics.add_rows, kind, frame))

    def judged(self, results: list[RuleResult]) -> None:
        self._guard(partial(feed_verdicts, self.metrics, results))

    def ended(self, results: list[RuleResult]) -> None:
        self.judged(results)

    def close(self, wait_s: float) -> None:
        pass  # the server stops with the runner's process (rules.runner.main)

    def _guard(self, call: Callable[[], None]) -> None:
        try:
            call()
        except Exception as exc:
            line = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            self.faults.record(COMPONENT, line, traceback=traceback.format_exc())
