"""One writer of fault records (``faults/<component>-<where>-<pid>.json``).

A process that supervises something (the launcher its helpers, the rule runner
its scans, the sampler its sampling) notes each fault here: one record per
component and process, counted, with the first and the newest time, the newest
error, and what the caller adds (an exit code, the last lines of stderr, a
sampling gap). Every write is best effort (the store may be the very thing that
failed): a record that could not be written stays in :attr:`FaultLog.unsaved`,
is tried again by the next :meth:`FaultLog.record` or :meth:`FaultLog.flush`,
and the launcher copies what is still unsaved into ``job.json`` at the end
(its space there is reserved: docs/format.md, "faults/").
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping

from stepscope.jobfolder import _paths as paths
from stepscope.jobfolder._json import FaultJson, JsonObject
from stepscope.jobfolder._records import FolderIO

MAX_GAPS = 100  # gaps kept per record: the newest are dropped past it, and counted
# This process's job clock (use_clock): the times of records without a clock of their own
_clock: list[Callable[[], float]] = [time.time]


def use_clock(now: Callable[[], float]) -> None:
    """Make ``now`` (the job's timeline: ``JobClock.now``, the agent's or the sampler's
    clock) the clock of this process's fault records that were given none (the control
    channel's refusals), so that a step of the wall clock moves none of them."""
    _clock[0] = now


def _process_now() -> float:
    return _clock[0]()


class FaultLog:
    """The fault records of one process; ``identity`` (node, pid, rank...) goes in each."""

    def __init__(
        self,
        io: FolderIO | None,
        where: str,
        pid: int,
        identity: Mapping[str, object] | None = None,
        wall: Callable[[], float] = _process_now,
    ) -> None:
        self.io, self.where, self.pid, self._wall = io, where, pid, wall
        self.identity: JsonObject = {"node": where, "pid": pid, **(identity or {})}
        self.records: dict[str, FaultJson] = {}
        self.unsaved: set[str] = set()
        self._lock = threading.Lock()

    def record(self, component: str, error: str, **extra: object) -> FaultJson:
        """Note one fault of ``component`` (``error``: one line saying what and why)."""
        now = self._wall()
        with self._lock:
            doc = self.records.setdefault(component, self._new(component, now))
            doc["count"] = doc.get("count", 0) + 1
            doc.update({"time": now, "error": error, **extra})  # type: ignore[typeddict-item]
            self.unsaved.add(component)
        self.flush()
        return doc

    def gap(self, component: str, start: float, end: float, cause: str) -> FaultJson:
        """A span without data (``start``-``end``, unix s) and why: a sampling gap."""
        with self._lock:
            doc = self.records.setdefault(component, self._new(component, self._wall()))
            gaps = doc.setdefault("gaps", [])
            if len(gaps) < MAX_GAPS:
                gaps.append({"start": start, "end": end, "cause": cause})
        total = sum(_span(g) for g in doc.get("gaps", []))
        error = f"{len(doc['gaps'])} gap(s) without samples, {total:.1f} s in all; last: {cause}"
        return self.record(component, error, gap_seconds=round(total, 3))

    def flush(self) -> None:
        """Write the records not yet written (never raises)."""
        if self.io is None:
            return
        for component in sorted(self.unsaved):
            with contextlib.suppress(Exception):
                self.io.write_json(self.key(component), self.records[component])
                self.unsaved.discard(component)

    def key(self, component: str) -> str:
        return paths.fault_key(component, self.where, self.pid)

    def pending(self) -> list[FaultJson]:
        """The records that could not be written (yet)."""
        return [self.records[c] for c in sorted(self.unsaved)]

    def _new(self, component: str, now: float) -> FaultJson:
        doc: FaultJson = {"component": component, "first_time": now, "count": 0}
        doc.update(self.identity)  # type: ignore[typeddict-item]
        return doc


def _span(gap: JsonObject) -> float:
    start, end = gap.get("start"), gap.get("end")
    if isinstance(start, int | float) and isinstance(end, int | float):
        return float(end) - float(start)
    return 0.0
