"""What a writer does while its store fails: back off, keep rows, record the gap.

Every stream writer (:class:`~stepscope.store.SegmentWriter`) owns a
:class:`Backoff` and a :class:`StreamHealth`. On an object store a failed write
schedules the next attempt after a doubling delay (5 s, 10 s, ... 60 s); a flush
asked for before then raises :class:`StoreUnavailable` at once, without a
request. Local folders retry at every flush (a failed local write is cheap). The health
record counts failed writes and the rows the bounded buffer had to drop, and is
written to ``faults/store-<stream>-<pid>.json`` by the first write that works
again (docs/storage.md), so an outage and any hole it left are in the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa

from stepscope.errors import StoreUnavailable
from stepscope.jobfolder import FaultJson, paths

FIRST_BACKOFF_S = 5.0
MAX_BACKOFF_S = 60.0
TIME_COLUMNS = ("time", "start")  # the column that dates a row, first found wins


class Backoff:
    """Doubling delays between attempts after failures; reset by a success."""

    def __init__(
        self,
        first_s: float = FIRST_BACKOFF_S,
        max_s: float = MAX_BACKOFF_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.first_s, self.max_s, self._clock = first_s, max_s, clock
        self.consecutive = 0
        self._retry_at = 0.0

    def check(self) -> None:
        """Raise :class:`StoreUnavailable` while the next attempt is not due."""
        left = self._retry_at - self._clock()
        if left > 0:
            raise StoreUnavailable(
                f"the store failed {self.consecutive} time(s) in a row; next try in {left:.1f} s"
            )

    def failed(self) -> None:
        self.consecutive += 1
        delay = min(self.first_s * 2 ** (self.consecutive - 1), self.max_s)
        self._retry_at = self._clock() + delay

    def succeeded(self) -> None:
        self.consecutive, self._retry_at = 0, 0.0


def _row_times(batch: pa.RecordBatch) -> tuple[float | None, float | None]:
    for name in TIME_COLUMNS:
        if name in batch.schema.names:
            import pyarrow.compute as pc  # only when rows are dropped: keep start-up light

            bounds = pc.min_max(batch.column(name))
            return bounds["min"].as_py(), bounds["max"].as_py()
    return None, None


class StreamHealth:
    """Failed writes and dropped rows of one stream: the body of its record."""

    def __init__(self, stream: str, pid: int, wall: Callable[[], float] = time.time) -> None:
        self.stream, self.pid, self._wall = stream, pid, wall
        self.doc: FaultJson = {"component": f"store:{stream}", "stream": stream, "pid": pid}
        self.doc |= {"count": 0, "dropped_rows": 0, "error": None}
        self.dirty = False

    @property
    def key(self) -> str:
        return paths.fault_key("store", self.stream.replace("/", "."), self.pid)

    def failed(self, exc: BaseException) -> None:
        """A write failed: count it, keep the first time and the newest error."""
        now = self._wall()
        self.doc.setdefault("first_time", now)
        self.doc |= {"time": now, "count": self.doc["count"] + 1}
        self.doc["last_error"] = f"{type(exc).__name__}: {exc}"
        self._describe()

    def dropped(self, batch: pa.RecordBatch) -> None:
        """The buffer was full and ``batch`` left it unstored: widen the gap."""
        first, last = _row_times(batch)
        self.doc["dropped_rows"] += batch.num_rows
        if first is not None and last is not None:
            self.doc["dropped_first_time"] = min(self.doc.get("dropped_first_time", first), first)
            self.doc["dropped_last_time"] = max(self.doc.get("dropped_last_time", last), last)
        self._describe()

    def recovered(self) -> None:
        """A write worked after failures: the outage (as this stream saw it) is over."""
        if self.doc["count"] and self.doc.get("recovered_time", -1.0) < self.doc["time"]:
            self.doc["recovered_time"] = self._wall()
            self._describe()

    def _describe(self) -> None:
        d = self.doc
        text = f"{d['count']} failed write(s) of {self.stream}, last: {d.get('last_error')}"
        if d["dropped_rows"]:
            text += (
                f"; buffer full, {d['dropped_rows']} row(s) dropped (a gap from "
                f"{d.get('dropped_first_time')} to {d.get('dropped_last_time')})"
            )
        d["error"] = text
        self.dirty = True
