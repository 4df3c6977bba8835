"""What the sampler records about its own gaps, and the job it outlives.

A sampling gap is a span without samples, with its cause, in
``faults/sampling-gap-<node>-<pid>.json`` (``gaps``: ``start``, ``end``, ``cause``):
a tick that came more than ``GAP_INTERVALS`` intervals (and ``GAP_MIN_S``) after
the previous sample (the sampler was not scheduled: store calls run in the flush
thread and never hold the sampling back), rows the full buffer dropped while the
store failed, or, for a sampler the launcher restarted, the span from the newest
sample its predecessor stored to its own first sample.
"""

from __future__ import annotations

from collections import deque

from stepscope.jobfolder import FaultLog, paths
from stepscope.store import Store

GAP_COMPONENT = "sampling-gap"
GAP_INTERVALS = 3.0
GAP_MIN_S = 1.0
ERROR_CHARS = 160  # of the store's error, in a gap's cause


def stored_until(store: Store, node: str, fallback: float) -> float:
    """The newest sample time in ``system/<node>/`` (its newest segment), else ``fallback``."""
    try:
        from stepscope.store import read_segment

        keys = store.list(paths.system_stream(node), suffix=".parquet")
        if not keys:
            return fallback
        table = read_segment(store.read_bytes(keys[-1]), columns=["time"])
        newest = table.column("time").to_pylist()
        return max([float(t) for t in newest if t is not None], default=fallback)
    except Exception:  # unreadable: the launcher's last sight of the dead sampler
        return fallback


class GapWatch:
    """Notes spans without samples; ``log`` holds their record.

    The sampling thread notes them (:meth:`sampled`), the flush thread writes them
    (:meth:`save`): the sampling thread never waits on the store.
    """

    def __init__(self, log: FaultLog) -> None:
        self.log = log
        self.last_wall: float | None = None
        self.last_interval_s = 0.0
        self.pending: tuple[float, str] | None = None  # a restart's gap: start, cause
        self.found: deque[tuple[float, float, str]] = deque()  # noted, not yet in ``log``

    def restarted(self, start: float, cause: str) -> None:
        self.pending = (start, cause)

    def sampled(self, wall: float, interval_s: float) -> None:
        """A sample at ``wall``: note the gap before it, if there is one."""
        if self.pending is not None:
            start, cause = self.pending
            self.pending = None
            self.found.append((start, wall, f"{cause}; restarted by the launcher"))
        elif self.last_wall is not None:
            allowed = GAP_INTERVALS * max(interval_s, self.last_interval_s)
            if wall - self.last_wall > max(allowed, GAP_MIN_S):
                cause = "the sampler was not scheduled (a busy or frozen node?)"
                self.found.append((self.last_wall, wall, cause))
        self.last_wall, self.last_interval_s = wall, interval_s

    def dropped(self, span: tuple[float, float, int], bound: int, error: str | None) -> None:
        """``span``: rows the full buffer (``bound`` rows) dropped, and their count."""
        start, end, count = span
        why = f" (last store error: {error[:ERROR_CHARS]})" if error else ""
        cause = (
            f"{count} sample(s) dropped: the store failed longer than the sampler's "
            f"buffer of {bound:,} rows lasts{why}"
        )
        self.found.append((start, end, cause))

    def save(self) -> None:
        """Record the gaps noted since the last call (FaultLog keeps unsaved ones)."""
        while self.found:
            self.log.gap(GAP_COMPONENT, *self.found.popleft())
