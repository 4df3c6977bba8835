"""Background writer of a rank's steps and events (and, standalone, its heartbeat).

The training thread only appends tuples to deques (thread-safe, O(1), never a
lock held by I/O); this thread turns them into Arrow batches and rewrites the
current segments every ``flush_s`` seconds (at least the store's
``min_interval_s``: 10 s on object storage). pyarrow does the encoding in C++,
outside the GIL. When the store fails, the segment writers keep the rows (bounded,
gaps recorded) and back off; this thread alone ever waits for the store.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..store import EVENTS_SCHEMA, SegmentWriter, Store, StoreUnavailable
from ..store._columns import record_batch
from ..store._schemas import AGENT_STEPS_SCHEMA
from ._cuda import resolve
from ._faults import FaultBoundary
from ._recorder import StepRow

EventRow = tuple[float, str, str]
STEP_DICT = ("rank", "local_rank", "node", "pid", "phase", "profiled")
_PARTS = ("data_wait", "forward", "backward", "optimizer")
STEP_SEGMENT_ROWS = 20_000  # docs/format.md: a flush re-encodes its whole segment
# At exit, how long the process waits for the writer's last flush: a store that
# is down delays the exit by at most this, and never fails it.
STOP_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Identity:
    """Who writes: goes into every row (docs/format.md)."""

    rank: int
    local_rank: int
    node: str
    pid: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "node": self.node,
            "pid": self.pid,
        }


class Clock:
    """Wall-clock times derived from a monotonic clock: never jumps backwards.

    ``offset_s`` is the node's measured correction against the job's reference
    clock (docs/distributed.md): every time this clock gives is on the reference
    clock. ``skew_s`` exists for tests only: it makes this node's clock wrong by
    a known amount (the launcher measures the same skewed clock, so the offset
    cancels it).
    """

    def __init__(self, offset_s: float = 0.0, skew_s: float = 0.0) -> None:
        self.offset_s, self.skew_s = offset_s, skew_s
        self.perf0 = time.perf_counter()
        self.wall0 = time.time() + skew_s + offset_s

    def wall(self, perf: float) -> float:
        return self.wall0 + (perf - self.perf0)

    def now(self) -> float:
        """The current time on the reference clock."""
        return self.wall(time.perf_counter())

    def aligned(self, local_wall: float) -> float:
        """A time read from this node's system clock (``time.time()``), aligned."""
        return local_wall + self.skew_s + self.offset_s


def _drain(q: deque[Any]) -> list[Any]:
    return [q.popleft() for _ in range(len(q))]


class AgentWriter:
    """Owns the rank's segment writers and the thread that flushes them."""

    def __init__(
        self,
        store: Store,
        ident: Identity,
        clock: Clock,
        faults: FaultBoundary,
        flush_s: float = 2.0,
        heartbeat: bool = False,
    ) -> None:
        self.store, self.ident, self.clock, self.faults = store, ident, clock, faults
        self.flush_s, self.heartbeat = max(flush_s, store.min_interval_s), heartbeat
        self.steps: deque[StepRow] = deque()
        self.events: deque[EventRow] = deque()
        # A segment is encoded again at every flush, on the training process: steps
        # segments are cut shorter, and only the columns of few values are
        # dictionary-encoded (about 3x less encoding time, smaller files).
        self._steps_w = SegmentWriter(
            store,
            f"steps/rank-{ident.rank}",
            segment_rows=STEP_SEGMENT_ROWS,
            dictionary=STEP_DICT,
        )
        self._events_w = SegmentWriter(store, f"events/rank-{ident.rank}")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepscope-writer", daemon=True)

    def event(self, kind: str, wall_time: float | None = None, **detail: Any) -> None:
        """Queue an event; ``wall_time`` is a ``time.time()`` reading (default: now)."""
        t = self.clock.now() if wall_time is None else self.clock.aligned(wall_time)
        self.events.append((t, kind, json.dumps(detail, default=str)))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, which writes what is left (called at exit; bounded wait)."""
        self.ready_for_exit()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=STOP_TIMEOUT_S)
        elif self._thread.ident is None:
            self.flush(force=True)  # never started: nobody else touches the writers

    def ready_for_exit(self) -> None:
        """Make the store's client usable from ``atexit`` (see Store.ready_for_exit)."""
        try:
            self.store.ready_for_exit()
        except Exception as exc:
            self.faults.record("writer", exc)

    def _run(self) -> None:
        while not self._stop.wait(self.flush_s):
            self.flush()
        self.flush(force=True)  # the last one tries even while backing off

    def flush(self, force: bool = False) -> None:
        try:
            self._flush(force)
        except StoreUnavailable:
            pass  # a failure already recorded; its retry is not due yet
        except Exception as exc:
            self.faults.record("writer", exc)

    def _flush(self, force: bool = False) -> None:
        steps, events = _drain(self.steps), _drain(self.events)
        if steps:
            self._steps_w.append(self._steps_batch(steps))
        if events:
            self._events_w.append(self._events_batch(events))
        self._steps_w.flush(force)
        self._events_w.flush(force)
        if self.heartbeat:
            hb = {"time": time.time(), "pid": self.ident.pid, "interval_s": self.flush_s}
            self.store.write_json(f"heartbeat/{self.ident.node}.json", hb)

    def _identity_cols(self, n: int) -> dict[str, Any]:
        import numpy as np

        i = self.ident
        return {
            "rank": np.full(n, i.rank, np.int32),
            "local_rank": np.full(n, i.local_rank, np.int32),
            "node": [i.node] * n,
            "pid": np.full(n, i.pid, np.int32),
        }

    def _steps_batch(self, rows: list[StepRow]) -> Any:
        """One Arrow batch of steps, by columns.

        This thread holds the GIL here, and the training thread waits for it:
        columns are built with ``np.fromiter`` (about half the time of
        ``np.array`` on tuples) and from buffers, which imports no pandas
        (store/_columns.py; BENCHMARKS.md, "GIL handoffs").
        """
        import numpy as np

        n = len(rows)
        phase, step, t0, t1, data, fwd, bwd, opt, coll, outside, prof, marks = zip(
            *rows, strict=True
        )

        def floats(col: tuple[float, ...]) -> Any:
            return np.fromiter(col, np.float64, count=n)

        begin, finish = floats(t0), floats(t1)
        parts = {k: floats(v) for k, v in zip(_PARTS, (data, fwd, bwd, opt), strict=True)}
        wall0, perf0 = self.clock.wall0, self.clock.perf0  # Clock.wall, on whole columns
        dur = finish - begin
        # Collectives outside the four parts are not "other" either.
        busy = parts["data_wait"] + parts["forward"] + parts["backward"] + parts["optimizer"]
        other = np.maximum(dur - (busy + floats(outside)), 0.0)
        cols: dict[str, Any] = {
            **self._identity_cols(n),
            "phase": phase,
            "step": np.fromiter(step, np.int64, count=n),
            "start": wall0 + (begin - perf0),
            "end": wall0 + (finish - perf0),
            "duration": dur.astype(np.float32),
            **{k: v.astype(np.float32) for k, v in parts.items()},
            "other": other.astype(np.float32),
            "profiled": prof,
            **self._device_cols(marks),
            "collective": floats(coll).astype(np.float32),
        }
        return record_batch(cols, AGENT_STEPS_SCHEMA)

    @staticmethod
    def _device_cols(marks: tuple[Any, ...]) -> dict[str, Any]:
        import pyarrow as pa

        names = [f"gpu_{p}" for p in ("forward", "backward", "optimizer")]
        if not any(marks):  # no CUDA: no device timing
            return {k: pa.nulls(len(marks), pa.float32()) for k in names}
        device = [resolve(m) for m in marks]
        return {k: [d[k[4:]] for d in device] for k in names}

    def _events_batch(self, rows: list[EventRow]) -> Any:
        times, kinds, details = (list(c) for c in zip(*rows, strict=True))
        cols = {"time": times, **self._identity_cols(len(rows)), "kind": kinds, "detail": details}
        return record_batch(cols, EVENTS_SCHEMA)

    @property
    def dropped_rows(self) -> int:
        return self._steps_w.dropped_rows + self._events_w.dropped_rows
