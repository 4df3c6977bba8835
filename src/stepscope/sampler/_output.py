"""What the system sampler stores besides its loop (:mod:`.sampler_main`).

Rows go to ``system/<node>/`` through a bounded buffer, :class:`RowBuffer`
(``MAX_BUFFER_ROWS``: one hour at 100 ms, five at the default 500 ms; about 1.3 kB a
row without GPUs, so about 47 MB when full): the sampling thread adds to it, the
flush thread (:mod:`._flusher`) stores from it, and unstored rows wait there for the
next flush that works. Past the bound the oldest are dropped, counted, and their
span becomes a sampling gap with its cause. The node's facts go to
``nodes/<node>.json`` and the faults the sampler's fault boundary caught to
``faults/sampler-<node>-<pid>.json`` (docs/format.md).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import psutil

from stepscope.jobfolder import FaultJson, GpuFacts, NodeInfo, folder_trouble, paths
from stepscope.sampler._nvml import Row, Value
from stepscope.sampler._probe import rows_to_batches
from stepscope.store import SegmentWriter, Store, StoreUnavailable

if TYPE_CHECKING:
    from stepscope.sampler.main import Sampler

MAX_BUFFER_ROWS = 36_000  # one hour of samples at 100 ms


class Faults:
    """What the fault boundary caught: first error on stderr, all in one JSON file."""

    def __init__(self, store: Store, node: str, now: Callable[[], float] = time.time) -> None:
        self._store, self._key = store, paths.fault_key("sampler", node, os.getpid())
        self._now = now  # the sampler's clock: the job's timeline
        self.doc: FaultJson = {"component": "sampler", "node": node, "pid": os.getpid()}
        self.doc |= {"count": 0, "dropped_rows": 0}
        self._changed = False
        self._lock = threading.Lock()  # both the sampling and the flush thread record

    def guard(self, action: Callable[[], None]) -> bool:
        """The fault boundary: run ``action``; what it raises is recorded, not raised.
        True if it went through."""
        try:
            action()
        except StoreUnavailable:
            return False  # the store failed recently and its retry is not due: rows wait
        except Exception as exc:
            self.record(exc)
            return False
        return True

    def record(self, exc: Exception) -> None:
        """Count ``exc``; it is written by the next flush (never here: the sampling
        thread must not wait on a store that may be what failed)."""
        now, error = self._now(), f"{type(exc).__name__}: {exc}"
        with self._lock:
            # a deleted or read-only job folder: the launcher says so, once
            if self.doc["count"] == 0 and folder_trouble(self._store, exc) is None:
                print(f"stepscope: sampler: {error}", file=sys.stderr, flush=True)
                self.doc["first_time"] = now
            self.doc |= {"time": now, "error": error, "count": self.doc["count"] + 1}
            self._changed = True

    def dropped(self, row_time: Value) -> None:
        """A row left the full buffer unstored: the gap is ``dropped_first_time`` onwards."""
        with self._lock:
            self.doc["dropped_rows"] += 1
            if isinstance(row_time, int | float):  # a sample's time: always a number
                self.doc.setdefault("dropped_first_time", float(row_time))
                self.doc["dropped_last_time"] = float(row_time)
            self._changed = True

    def save(self) -> None:
        """Best effort, and only when something changed: the store may be what fails."""
        with self._lock:
            if not self._changed:
                return
            doc, self._changed = dict(self.doc), False
        try:
            self._store.write_json(self._key, doc)
        except Exception:
            with self._lock:
                self._changed = True  # written at the next flush


class RowBuffer:
    """Sampled rows not yet handed to the store's writer: bounded, shared by the
    sampling thread (:meth:`add`) and the flush thread (:meth:`store`).

    A full buffer drops its oldest row: counted in ``faults`` and kept as a span,
    from the newest row stored before it to the oldest row kept after it (the hole
    in ``system/<node>/``), which :meth:`dropped_span` hands over once.
    """

    def __init__(self, max_rows: int, faults: Faults) -> None:
        self.max_rows, self.faults = max(max_rows, 1), faults
        self._rows: deque[Row] = deque()
        self._lock = threading.Lock()  # held for list operations only, never for I/O
        self._last_stored: float | None = None  # time of the newest row handed over
        self._span: list[float] | None = None  # [start, end] of the rows dropped
        self.dropped = 0  # rows dropped in the span not handed over yet
        # While rows are handed to the writer none is dropped (a row could be stored
        # and counted as lost): the bound can be passed by the rows of one hand-over.
        self._handing = False

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def last_stored(self) -> float | None:
        """The time of the newest row handed to the store (None: none yet)."""
        return self._last_stored

    def add(self, row: Row) -> None:
        """Add ``row``; when the buffer is full, its oldest row is dropped and counted."""
        with self._lock:
            if len(self._rows) >= self.max_rows and not self._handing:
                old = self._rows.popleft()
                self.faults.dropped(old["time"])
                self._note_drop(old, row)
            self._rows.append(row)

    def _note_drop(self, old: Row, new: Row) -> None:
        before = self._last_stored if self._span is None else self._span[0]
        start = before if before is not None else _time(old)
        after = self._rows[0] if self._rows else new  # the oldest row kept
        self._span = [start, _time(after)]
        self.dropped += 1

    def store(self, writer: SegmentWriter, final: bool = False) -> None:
        """Hand the buffered rows to ``writer`` and store them; the rows stay here
        until ``writer`` has them (its earlier rows, from a failed write, go first).

        ``final``: the last flush tries the store even while a retry is not due.
        """
        writer.flush(final)  # raises while the store fails: the rows wait here
        with self._lock:
            rows, self._handing = list(self._rows), True
        try:
            done = 0
            for batch in rows_to_batches(rows):
                writer.append(batch)
                done += batch.num_rows
                with self._lock:  # they are the oldest: nothing was dropped meanwhile
                    for _ in range(batch.num_rows):
                        self._rows.popleft()
                    self._last_stored = _time(rows[done - 1])
        finally:
            self._handing = False
        writer.flush(final)

    def dropped_span(self) -> tuple[float, float, int] | None:
        """The span of the rows dropped since the last call and their count (once)."""
        with self._lock:
            if self._span is None:
                return None
            (start, end), count = self._span, self.dropped
            self._span, self.dropped = None, 0
            return start, end, count


def _time(row: Row) -> float:
    value = row["time"]
    return float(value) if isinstance(value, int | float) else 0.0


def node_facts(sampler: Sampler) -> NodeInfo:
    """The content of ``nodes/<node>.json`` (docs/format.md)."""
    gpus = sampler.probe.gpus.info if sampler.probe.gpus is not None else []
    facts: NodeInfo = {"node": sampler.node, "hostname": socket.gethostname()}
    facts |= {"cpu_count": psutil.cpu_count(), "mem_total": float(psutil.virtual_memory().total)}
    listed = [GpuFacts(index=g.index, name=g.name, mem_total=g.mem_total) for g in gpus]
    facts |= {"gpus": listed, "interval_ms": sampler.interval_ms}
    facts |= {"clock_offset_s": sampler.clock_offset_s, "boot_time": psutil.boot_time()}
    facts["sched_autogroup"] = _autogroup()
    return facts


def _autogroup() -> bool | None:
    """Whether the kernel shares CPU between sessions before tasks (autogroup): more
    threads of one job then get it no larger share of a busy node (None: unknown)."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return None
