"""Background writer of a rank's steps and events (and, standalone, its heartbeat).

The training thread only appends: a step's values to the step buffer
(agent/_stepbuf.c), an event's tuple to a deque (O(1), never a lock held by
I/O); this thread turns them into Arrow batches and rewrites the current
segments every ``flush_s`` seconds (at least the store's ``min_interval_s``:
10 s on object storage), then runs its followers (the tensors' flush, the
profiling poll). pyarrow does the encoding in C++, outside the GIL. When the
store fails, the segment writers keep the rows (bounded, gaps recorded) and
back off; this thread alone ever waits for the store.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

import pyarrow as pa

from stepscope.agent._clock import Clock
from stepscope.agent._cuda import Timed, memory_of, resolve
from stepscope.agent._cuda_memory import COUNTERS, memory_columns
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._stepbuf import StepColumns, StepSink
from stepscope.jobfolder import AGENT_STEPS_SCHEMA, EVENTS_SCHEMA, Heartbeat, paths, write_heartbeat
from stepscope.store import SegmentWriter, Store, StoreUnavailable, column, record_batch

T = TypeVar("T")
EventRow = tuple[float, str, str]
STEP_DICT = ("rank", "local_rank", "node", "pid", "phase", "profiled")
# The steps columns a step buffer gives as plain values, with their Arrow types.
PlainColumn = Literal[
    "step", "start", "end", "duration", "data_wait", "forward", "backward", "optimizer", "other",
    "collective",
]  # fmt: skip
_STEP_COLS: dict[PlainColumn, pa.DataType] = {
    name: AGENT_STEPS_SCHEMA.field(name).type for name in get_args(PlainColumn)
}
_DEVICE = ("gpu_forward", "gpu_backward", "gpu_optimizer")
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

    def as_dict(self) -> dict[str, int | str]:
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "node": self.node,
            "pid": self.pid,
        }


def _drain(q: deque[T]) -> list[T]:
    return [q.popleft() for _ in range(len(q))]


class AgentWriter:
    """Owns the rank's segment writers and the thread that flushes them."""

    def __init__(
        self,
        store: Store,
        ident: Identity,
        clock: Clock,
        faults: FaultBoundary,
        steps: StepSink,
        flush_s: float = 2.0,
        heartbeat: bool = False,
    ) -> None:
        self.store, self.ident, self.clock, self.faults = store, ident, clock, faults
        self.flush_s, self.heartbeat = max(flush_s, store.min_interval_s), heartbeat
        self.steps = steps  # the recorder appends, this thread takes
        self.events: deque[EventRow] = deque()
        # A segment is encoded again at every flush, on the training process: steps
        # segments are cut shorter, and only the columns of few values are
        # dictionary-encoded (about 3x less encoding time, smaller files).
        self._steps_w = SegmentWriter(
            store,
            paths.steps_stream(ident.rank),
            segment_rows=STEP_SEGMENT_ROWS,
            dictionary=STEP_DICT,
        )
        self._events_w = SegmentWriter(store, paths.events_stream(ident.rank))
        self._constant: dict[str, pa.Array] = {}  # built at the first flush
        self._constant_rows = 0
        # Flushes of other writers of the process (the tensors), run by this thread
        # after its own: one thread waking every flush_s instead of one per writer, as
        # every wake-up costs the training thread a GIL handoff. Each guards itself.
        self.followers: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepscope-writer", daemon=True)

    def event(self, kind: str, wall_time: float | None = None, **detail: object) -> None:
        """Queue an event; ``wall_time`` is a ``time.time()`` reading (default: now).

        ``detail`` goes into the event as JSON (values JSON cannot hold as text)."""
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
        for follower in self.followers:
            follower()

    def _flush(self, force: bool = False) -> None:
        steps, events = self.steps.take(self.clock.wall0, self.clock.perf0), _drain(self.events)
        if steps is not None:
            self._steps_w.append(self._steps_batch(steps))
        if events:
            self._events_w.append(self._events_batch(events))
        self._steps_w.flush(force)
        self._events_w.flush(force)
        if self.heartbeat:
            beat = Heartbeat(time.time(), self.ident.pid, self.flush_s)
            write_heartbeat(self.store, self.ident.node, beat)

    def _constants(self, n: int) -> dict[str, pa.Array]:
        """The columns of one value (identity, and device times without CUDA) for
        ``n`` rows: slices of arrays built once. Building them at every flush cost
        the training thread ~5 GIL handoffs a flush (BENCHMARKS.md, "GIL handoffs")."""
        if self._constant_rows < n:
            import numpy as np

            size, i = max(n, 1024, 2 * self._constant_rows), self.ident
            values = {"rank": i.rank, "local_rank": i.local_rank, "pid": i.pid}
            cols = {k: np.full(size, v, np.int32) for k, v in values.items()}
            built = {**cols, "node": [i.node] * size}
            schema = AGENT_STEPS_SCHEMA
            self._constant = {k: column(v, schema.field(k).type, size) for k, v in built.items()}
            self._constant.update({k: pa.nulls(size, pa.float32()) for k in _DEVICE})
            self._constant.update({k: pa.nulls(size, pa.int64()) for k in COUNTERS})
            self._constant_rows = size
        return {k: a.slice(0, n) for k, a in self._constant.items()}

    def _identity_cols(self, n: int) -> dict[str, pa.Array]:
        constants = self._constants(n)
        return {k: constants[k] for k in ("rank", "local_rank", "node", "pid")}

    def _steps_batch(self, cols: StepColumns) -> pa.RecordBatch:
        """One Arrow batch of the steps the buffer gave (``StepSink.take``).

        The columns arrive as final buffers (agent/_stepbuf.c builds them in one
        call that keeps the GIL): wrapping them takes a few calls, none of which
        hands the GIL to the training thread and back (BENCHMARKS.md, "GIL
        handoffs"), and imports no pandas (store/_columns.py).
        """
        n = cols["n"]
        arrays: dict[str, pa.Array] = {
            k: pa.Array.from_buffers(t, n, [None, pa.py_buffer(cols[k])])
            for k, t in _STEP_COLS.items()
        }
        phase = [None, pa.py_buffer(cols["phase_offsets"]), pa.py_buffer(cols["phase_data"])]
        arrays["phase"] = pa.Array.from_buffers(pa.string(), n, phase)
        arrays["profiled"] = pa.Array.from_buffers(
            pa.bool_(), n, [None, pa.py_buffer(cols["profiled"])]
        )
        constants = {**self._identity_cols(n), **self._device_cols(cols["marks"], n)}
        return record_batch({**constants, **arrays}, AGENT_STEPS_SCHEMA)

    def _device_cols(
        self, marks: list[list[Timed] | None] | None, n: int
    ) -> dict[str, pa.Array | list[float | None] | list[int | None]]:
        if marks is None:  # no CUDA: no device timing, no allocator
            constants = self._constants(n)
            return {k: constants[k] for k in (*_DEVICE, *COUNTERS)}
        device = [resolve(m) for m in marks]
        memory = memory_columns([memory_of(m) for m in marks])
        return {**{k: [d[k[4:]] for d in device] for k in _DEVICE}, **memory}

    def _events_batch(self, rows: list[EventRow]) -> pa.RecordBatch:
        times, kinds, details = (list(c) for c in zip(*rows, strict=True))
        cols = {"time": times, **self._identity_cols(len(rows)), "kind": kinds, "detail": details}
        return record_batch(cols, EVENTS_SCHEMA)

    @property
    def dropped_rows(self) -> int:
        return self._steps_w.dropped_rows + self._events_w.dropped_rows
