"""Background writer of a rank's steps and events (and, standalone, its heartbeat).

The training thread only appends tuples to deques (thread-safe, O(1)); this
thread turns them into Arrow batches and rewrites the current segments every
``flush_s`` seconds. pyarrow does the encoding in C++, outside the GIL.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..store import EVENTS_SCHEMA, STEPS_SCHEMA, SegmentWriter, Store
from ._cuda import resolve
from ._faults import FaultBoundary
from ._recorder import StepRow

EventRow = tuple[float, str, str]


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
    """Wall-clock times derived from a monotonic clock: never jumps backwards."""

    def __init__(self) -> None:
        self.wall0, self.perf0 = time.time(), time.perf_counter()

    def wall(self, perf: float) -> float:
        return self.wall0 + (perf - self.perf0)


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
        self.flush_s, self.heartbeat = flush_s, heartbeat
        self.steps: deque[StepRow] = deque()
        self.events: deque[EventRow] = deque()
        self._steps_w = SegmentWriter(store, f"steps/rank-{ident.rank}")
        self._events_w = SegmentWriter(store, f"events/rank-{ident.rank}")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepscope-writer", daemon=True)

    def event(self, kind: str, wall_time: float | None = None, **detail: Any) -> None:
        t = time.time() if wall_time is None else wall_time
        self.events.append((t, kind, json.dumps(detail, default=str)))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and write what is left (called at exit)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_s):
            self.flush()

    def flush(self) -> None:
        try:
            self._flush()
        except Exception as exc:
            self.faults.record("writer", exc)

    def _flush(self) -> None:
        steps, events = _drain(self.steps), _drain(self.events)
        if steps:
            self._steps_w.append(self._steps_batch(steps))
        if events:
            self._events_w.append(self._events_batch(events))
        self._steps_w.flush()
        self._events_w.flush()
        if self.heartbeat:
            hb = {"time": time.time(), "pid": self.ident.pid, "interval_s": self.flush_s}
            self.store.write_json(f"heartbeat/{self.ident.node}.json", hb)

    def _identity_cols(self, n: int) -> dict[str, list[Any]]:
        i = self.ident
        return {
            "rank": [i.rank] * n,
            "local_rank": [i.local_rank] * n,
            "node": [i.node] * n,
            "pid": [i.pid] * n,
        }

    def _steps_batch(self, rows: list[StepRow]) -> Any:
        import pyarrow as pa

        phase, step, t0, t1, data, fwd, bwd, opt, prof, marks = (
            list(c) for c in zip(*rows, strict=True)
        )
        device = [resolve(m) for m in marks]
        start = [self.clock.wall(t) for t in t0]
        end = [self.clock.wall(t) for t in t1]
        dur = [b - a for a, b in zip(t0, t1, strict=True)]
        other = [
            max(d - (a + b + c + e), 0.0)
            for d, a, b, c, e in zip(dur, data, fwd, bwd, opt, strict=True)
        ]
        cols = {
            **self._identity_cols(len(rows)),
            "phase": phase,
            "step": step,
            "start": start,
            "end": end,
            "duration": dur,
            "data_wait": data,
            "forward": fwd,
            "backward": bwd,
            "optimizer": opt,
            "other": other,
            "profiled": prof,
            "gpu_forward": [d["forward"] for d in device],
            "gpu_backward": [d["backward"] for d in device],
            "gpu_optimizer": [d["optimizer"] for d in device],
        }
        return pa.RecordBatch.from_pydict(cols, schema=STEPS_SCHEMA)

    def _events_batch(self, rows: list[EventRow]) -> Any:
        import pyarrow as pa

        times, kinds, details = (list(c) for c in zip(*rows, strict=True))
        cols = {"time": times, **self._identity_cols(len(rows)), "kind": kinds, "detail": details}
        return pa.RecordBatch.from_pydict(cols, schema=EVENTS_SCHEMA)

    @property
    def dropped_rows(self) -> int:
        return self._steps_w.dropped_rows + self._events_w.dropped_rows
