"""Background writer of a rank's tensors: scalars, raw tensor blobs and their index.

The training thread hands over one :class:`StepBatch` per saving step (device
work already enqueued, nothing read yet); this thread waits for the copies,
turns them into Arrow rows and blobs, and writes them through the Store every
``flush_s`` seconds. One blob file per flush holds every raw tensor of it. In
the agent the steps writer's thread calls ``flush`` after its own flush
(agent/_writer.py: ``followers``); ``start`` gives it a thread of its own.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from stepscope.agent._faults import FaultBoundary
from stepscope.agent.tensors._reduce import HostVector
from stepscope.jobfolder import (
    INDEX_SCHEMA,
    SCALARS_SCHEMA,
    VALUE_KEY,
    blob_name,
    rank_prefix,
)
from stepscope.store import SegmentWriter, Store, record_batch

if TYPE_CHECKING:
    import pyarrow as pa
    import torch

MAX_QUEUED = 10_000  # batches kept while the store fails; older ones are dropped
# Rows of the scalars and index streams, in their schemas' column order
# (jobfolder/_tensors.py): time, rank, phase, step, name, then
ScalarRow = tuple[float, int, str, int, str, str, float]  # key, value
IndexRow = tuple[float, int, str, int, str, str, list[int], str, int, int]  # dtype, shape, blob...


@dataclass
class StepBatch:
    """What one flush of the capture produced (usually one step's tensors)."""

    time: float
    # (phase, step, name, key) per value of ``values``
    keys: list[tuple[str, int, str, str]] = field(default_factory=list)
    values: HostVector | None = None
    # torch tensors, or numpy arrays from a TensorFlow job
    raws: Sequence[tuple[str, int, str, torch.Tensor | np.ndarray]] = field(default_factory=list)
    floats: list[tuple[str, int, str, float]] = field(default_factory=list)
    members: dict[str, set[str]] = field(default_factory=dict)


def _raw_bytes(t: torch.Tensor | np.ndarray) -> tuple[str, bytes]:
    if isinstance(t, np.ndarray):  # a TensorFlow job's tensor (frameworks/_tf_capture.py)
        return str(t.dtype), np.ascontiguousarray(t).tobytes()
    import torch

    dtype = str(t.dtype).removeprefix("torch.")
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: keep its bits
        return dtype, t.contiguous().view(torch.int16).numpy().tobytes()
    return dtype, t.contiguous().numpy().tobytes()


class TensorWriter:
    """Owns the rank's tensor streams and the thread that flushes them."""

    def __init__(
        self,
        store: Store,
        rank: int,
        faults: FaultBoundary,
        flush_s: float = 2.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.store, self.rank, self.faults, self.flush_s = store, rank, faults, flush_s
        self.now = now  # a batch's time: the agent's clock (the job's timeline)
        self.prefix = rank_prefix(rank)
        self.queue: deque[StepBatch] = deque()
        self.dropped = 0
        self._scalars = SegmentWriter(store, f"{self.prefix}/scalars")
        self._index = SegmentWriter(store, f"{self.prefix}/index")
        self._members: dict[str, set[str]] = {}
        self._members_dirty = False
        self._seq = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepscope-tensors", daemon=True)

    def put(self, batch: StepBatch) -> None:
        """Queue a batch (training thread; O(1))."""
        self.queue.append(batch)
        while len(self.queue) > MAX_QUEUED:
            self.queue.popleft()
            self.dropped += 1

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and write what is left."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_s):
            self.flush()

    def flush(self) -> None:
        try:
            with self._lock:
                self._flush()
        except Exception as exc:
            self.faults.record("tensors-writer", exc)

    def _flush(self) -> None:
        batches = [self.queue.popleft() for _ in range(len(self.queue))]
        scalars: list[ScalarRow] = []
        index: list[IndexRow] = []
        chunks: list[bytes] = []
        blob = blob_name(time.time(), os.getpid(), self._seq)
        offset = 0
        for b in batches:
            scalars += self._scalar_rows(b)
            for phase, step, name, t in b.raws:
                dtype, data = _raw_bytes(t)
                index.append(
                    (
                        b.time,
                        self.rank,
                        phase,
                        step,
                        name,
                        dtype,
                        list(t.shape),
                        blob,
                        offset,
                        len(data),
                    )
                )
                chunks.append(data)
                offset += len(data)
            self._merge_members(b.members)
        if chunks:  # the blob first: an index row never points at a missing blob
            self.store.write_bytes(f"{self.prefix}/blobs/{blob}", b"".join(chunks))
            self._seq += 1
        self._append(self._scalars, SCALARS_SCHEMA, scalars)
        self._append(self._index, INDEX_SCHEMA, index)
        if self._members_dirty:
            body = {k: sorted(v) for k, v in sorted(self._members.items())}
            self.store.write_bytes(f"{self.prefix}/collections.json", json.dumps(body).encode())
            self._members_dirty = False

    def _scalar_rows(self, b: StepBatch) -> list[ScalarRow]:
        rows: list[ScalarRow] = [
            (b.time, self.rank, p, s, n, VALUE_KEY, float(v)) for p, s, n, v in b.floats
        ]
        if b.values is not None and b.keys:
            values = np.asarray(b.values.read(), dtype=np.float64)
            rows += [
                (b.time, self.rank, p, s, n, k, float(v))
                for (p, s, n, k), v in zip(b.keys, values, strict=True)
            ]
        elif b.values is not None:
            b.values.wait()  # raw copies of this batch are behind the same event
        return rows

    def _merge_members(self, members: dict[str, set[str]]) -> None:
        for coll, names in members.items():
            known = self._members.setdefault(coll, set())
            if not names <= known:
                known |= names
                self._members_dirty = True

    @staticmethod
    def _append(
        writer: SegmentWriter, schema: pa.Schema, rows: list[ScalarRow] | list[IndexRow]
    ) -> None:
        if rows:
            cols = list(zip(*rows, strict=True))
            arrays = {f.name: c for f, c in zip(schema, cols, strict=True)}
            writer.append(record_batch(arrays, schema))  # no pandas import (store/_columns.py)
        writer.flush()
