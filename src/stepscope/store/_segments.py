"""Segmented Parquet streams: the way every writer in a job folder stores rows.

A writer keeps the rows of its current segment as Arrow record batches and
rewrites the whole segment file on each flush (see docs/format.md). Only the new
rows are converted on a flush; the Parquet encoding runs in Arrow's C++ code.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ._store import Store

SEGMENT_ROWS = 50_000
SEGMENT_SECONDS = 300.0
MAX_BUFFERED_ROWS = 1_000_000


def segment_name(start: float, seq: int, pid: int | None = None) -> str:
    """``part-<start_ms>-<pid>-<seq>.parquet``; names sort by start time."""
    return f"part-{int(start * 1000):013d}-{pid or os.getpid()}-{seq:05d}.parquet"


def encode_parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", row_group_size=max(table.num_rows, 1))
    return buf.getvalue()


class SegmentWriter:
    """Appends record batches to one stream (``prefix``) of a store."""

    def __init__(
        self,
        store: Store,
        prefix: str,
        *,
        segment_rows: int = SEGMENT_ROWS,
        segment_seconds: float = SEGMENT_SECONDS,
        clock: Callable[[], float] = time.time,
        max_buffered_rows: int = MAX_BUFFERED_ROWS,
    ) -> None:
        self.store, self.prefix = store, prefix.rstrip("/")
        self.segment_rows, self.segment_seconds = segment_rows, segment_seconds
        self._clock = clock
        self._batches: list[pa.RecordBatch] = []
        self._rows = 0
        self._seq = 0
        self._started = 0.0
        self._dirty = False
        self.max_buffered_rows = max_buffered_rows
        self.bytes_written = 0
        self.files_written = 0
        self.dropped_rows = 0

    def append(self, batch: pa.RecordBatch) -> None:
        """Add rows; starts a new segment when the schema changes or one is full."""
        if batch.num_rows == 0:
            return
        if self._batches and not batch.schema.equals(self._batches[0].schema):
            self.flush()
            self._roll()
        if not self._batches:
            self._started = self._clock()
        self._batches.append(batch)
        self._rows += batch.num_rows
        self._dirty = True
        # While the store is failing, rows pile up here: keep the newest, count the gap.
        while self._rows > self.max_buffered_rows and len(self._batches) > 1:
            dropped = self._batches.pop(0)
            self._rows -= dropped.num_rows
            self.dropped_rows += dropped.num_rows

    def flush(self) -> None:
        """Rewrite the current segment with all its rows; roll over when it is full."""
        if not self._dirty:
            return
        table = pa.Table.from_batches(self._batches)
        data = encode_parquet(table)
        key = f"{self.prefix}/{segment_name(self._started, self._seq)}"
        self.store.write_bytes(key, data)
        self._dirty = False
        self.bytes_written += len(data)
        self.files_written += 1
        full = self._rows >= self.segment_rows
        if full or self._clock() - self._started >= self.segment_seconds:
            self._roll()

    def _roll(self) -> None:
        self._batches, self._rows, self._dirty = [], 0, False
        self._seq += 1
