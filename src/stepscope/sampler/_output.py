"""What the system sampler stores besides its loop (:mod:`.sampler_main`).

Rows go to ``system/<node>/`` through a bounded buffer (one hour at 100 ms): unstored
rows wait there and go out with the next flush that works; past the bound the oldest
are dropped and counted. The node's facts go to ``nodes/<node>.json`` and the faults
the sampler's fault boundary caught to ``faults/sampler-<node>-<pid>.json``
(docs/format.md).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import psutil

from stepscope.jobfolder import FaultJson, GpuFacts, NodeInfo, paths
from stepscope.sampler._nvml import Row, Value
from stepscope.sampler._probe import rows_to_batches
from stepscope.store import SegmentWriter, Store, StoreUnavailable

if TYPE_CHECKING:
    from stepscope.sampler.main import Sampler

MAX_BUFFER_ROWS = 36_000  # one hour of samples at 100 ms


class Faults:
    """What the fault boundary caught: first error on stderr, all in one JSON file."""

    def __init__(self, store: Store, node: str) -> None:
        self._store, self._key = store, paths.fault_key("sampler", node, os.getpid())
        self.doc: FaultJson = {"component": "sampler", "node": node, "pid": os.getpid()}
        self.doc |= {"count": 0, "dropped_rows": 0}
        self._changed = False

    def guard(self, action: Callable[[], None]) -> None:
        """The fault boundary: run ``action``; what it raises is recorded, not raised."""
        try:
            action()
        except StoreUnavailable:
            pass  # the store failed recently and its retry is not due: rows wait
        except Exception as exc:
            self.record(exc)

    def record(self, exc: Exception) -> None:
        now, error = time.time(), f"{type(exc).__name__}: {exc}"
        if self.doc["count"] == 0:
            print(f"stepscope: sampler: {error}", file=sys.stderr, flush=True)
            self.doc["first_time"] = now
        self.doc |= {"time": now, "error": error, "count": self.doc["count"] + 1}
        self._changed = True
        if self.doc["count"] == 1:
            self.save()

    def dropped(self, row_time: Value) -> None:
        """A row left the full buffer unstored: the gap is ``dropped_first_time`` onwards."""
        self.doc["dropped_rows"] += 1
        if isinstance(row_time, int | float):  # a sample's time: always a number
            self.doc.setdefault("dropped_first_time", float(row_time))
            self.doc["dropped_last_time"] = float(row_time)
        self._changed = True

    def save(self) -> None:
        """Best effort, and only when something changed: the store may be what fails."""
        if self._changed:
            with contextlib.suppress(Exception):
                self._store.write_json(self._key, self.doc)
                self._changed = False


def buffer_row(pending: deque[Row], row: Row, faults: Faults) -> None:
    """Add ``row`` to the buffer; when it is full, its oldest row is dropped and counted."""
    if len(pending) == pending.maxlen:
        faults.dropped(pending[0]["time"])
    pending.append(row)


def store_rows(writer: SegmentWriter, pending: deque[Row], final: bool = False) -> None:
    """Store the buffered rows; those handed to ``writer`` leave ``pending``.

    ``final``: the last flush tries the store even while a retry is not due.
    """
    writer.flush(final)  # rows handed over before a failed write go first
    for batch in rows_to_batches(list(pending)):
        writer.append(batch)
        for _ in range(batch.num_rows):
            pending.popleft()
    writer.flush(final)


def node_facts(sampler: Sampler) -> NodeInfo:
    """The content of ``nodes/<node>.json`` (docs/format.md)."""
    gpus = sampler.probe.gpus.info if sampler.probe.gpus is not None else []
    facts: NodeInfo = {"node": sampler.node, "hostname": socket.gethostname()}
    facts |= {"cpu_count": psutil.cpu_count(), "mem_total": float(psutil.virtual_memory().total)}
    listed = [GpuFacts(index=g.index, name=g.name, mem_total=g.mem_total) for g in gpus]
    facts |= {"gpus": listed, "interval_ms": sampler.interval_ms}
    facts |= {"clock_offset_s": sampler.clock_offset_s, "boot_time": psutil.boot_time()}
    return facts
