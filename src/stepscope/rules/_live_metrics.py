"""The live rule runner's ``/metrics`` endpoint (``stepscope run --metrics-port``).

The runner already reads every new row of the job and judges it: it feeds both to
a :class:`stepscope.metrics.JobMetrics` and serves it from a thread of its own
process, so the training process does nothing for it. A port in use (or any
failure of the server) is a fault record, ``faults/metrics-server-<node>-<pid>.json``;
the rules and the training go on.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from stepscope.jobfolder import FaultLog
from stepscope.metrics import JobMetrics, MetricsServer, render
from stepscope.store import Store

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._live import StreamReader
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


def feed(
    metrics: JobMetrics,
    faults: FaultLog,
    kind: str,
    data: pd.DataFrame | list[RuleResult] | StreamReader | None,
) -> None:
    """Rows (a frame, or a live reader's new rows) or verdicts to the endpoint; its
    failure is its own fault: the rules go on without the metrics."""
    from stepscope.rules._live import StreamReader

    try:
        if isinstance(data, StreamReader):
            metrics.add_rows(kind, data.read_new())
        elif isinstance(data, list):
            feed_verdicts(metrics, data)
        else:
            metrics.add_rows(kind, data)
    except Exception as exc:
        line = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        faults.record(COMPONENT, line, traceback=traceback.format_exc())
