"""What the sampler records about its own gaps, and the job it outlives.

A sampling gap is a span without samples, with its cause, in
``faults/sampling-gap-<node>-<pid>.json`` (``gaps``: ``start``, ``end``, ``cause``):
a tick that came more than ``GAP_INTERVALS`` intervals (and ``GAP_MIN_S``) after
the previous sample (the sampler was blocked, e.g. by a store write during an
outage), or, for a sampler the launcher restarted, the span from the newest
sample its predecessor stored to its own first sample.

When the launcher dies before the training, the sampler goes on (monitoring
does not stop while training runs), writes the node's heartbeat in its place,
and when the training ends records the job's end from the ranks' own records
(:func:`stepscope.jobfolder.end_without_launcher`).
"""

from __future__ import annotations

import contextlib
import io
import os
import time

from stepscope.jobfolder import (
    FaultLog,
    Heartbeat,
    end_without_launcher,
    paths,
    write_heartbeat,
)
from stepscope.store import Store

GAP_COMPONENT = "sampling-gap"
GAP_INTERVALS = 3.0
GAP_MIN_S = 1.0
HEARTBEAT_S = 2.0
ERROR_CHARS = 160  # of the store's error, in a gap's cause


def stored_until(store: Store, node: str, fallback: float) -> float:
    """The newest sample time in ``system/<node>/`` (its newest segment), else ``fallback``."""
    try:
        import pyarrow.parquet as pq

        keys = store.list(paths.system_stream(node), suffix=".parquet")
        if not keys:
            return fallback
        table = pq.read_table(io.BytesIO(store.read_bytes(keys[-1])), columns=["time"])
        newest = table.column("time").to_pylist()
        return max([float(t) for t in newest if t is not None], default=fallback)
    except Exception:  # unreadable: the launcher's last sight of the dead sampler
        return fallback


class GapWatch:
    """Notes spans without samples; ``log`` holds their record."""

    def __init__(self, log: FaultLog) -> None:
        self.log = log
        self.last_wall: float | None = None
        self.last_interval_s = 0.0
        self.blocked_by = ""  # what the sampler waited on last (a slow flush), if anything
        self.pending: tuple[float, str] | None = None  # a restart's gap: start, cause

    def restarted(self, start: float, cause: str) -> None:
        self.pending = (start, cause)

    def sampled(self, wall: float, interval_s: float) -> None:
        """A sample at ``wall``: record the gap before it, if there is one."""
        if self.pending is not None:
            start, cause = self.pending
            self.pending = None
            self.log.gap(GAP_COMPONENT, start, wall, f"{cause}; restarted by the launcher")
        elif self.last_wall is not None:
            allowed = GAP_INTERVALS * max(interval_s, self.last_interval_s)
            if wall - self.last_wall > max(allowed, GAP_MIN_S):
                cause = self.blocked_by or "the sampler was not scheduled (a busy or frozen node?)"
                self.log.gap(GAP_COMPONENT, self.last_wall, wall, cause)
        self.last_wall, self.last_interval_s, self.blocked_by = wall, interval_s, ""

    def waited(self, what: str, took_s: float, interval_s: float, error: str | None) -> None:
        """``what`` (a flush, a look for requests) took ``took_s``: when longer than an
        interval, it is the cause of the gap that follows."""
        if took_s > interval_s:
            why = f" (last store error: {error[:ERROR_CHARS]})" if error else ""
            self.blocked_by = f"{what} blocked the sampler for {took_s:.1f} s{why}"


class Orphan:
    """The sampler's duties once the launcher is gone and the training still runs."""

    def __init__(self, store: Store, node: str, log: FaultLog) -> None:
        self.store, self.node, self.log = store, node, log
        self.active = False
        self._beat = 0.0

    def begin(self) -> None:
        self.active = True
        self.log.record(
            "launcher",
            f"the launcher of node {self.node} ended before the training; the sampler "
            f"(pid {os.getpid()}) keeps sampling and records the job's end",
        )
        self.beat()

    def beat(self) -> None:
        if self.active and time.monotonic() - self._beat >= HEARTBEAT_S:
            self._beat = time.monotonic()
            with contextlib.suppress(Exception):
                write_heartbeat(self.store, self.node, Heartbeat.now(HEARTBEAT_S))

    def end(self, when: float) -> None:
        """The training ended at ``when``: record the job's end (unless someone did)."""
        if self.active:
            with contextlib.suppress(Exception):
                end_without_launcher(self.store, when)
