"""Segmented Parquet streams: the way every writer in a job folder stores rows.

A writer keeps the rows of its current segment as Arrow record batches and
rewrites the whole segment file on each flush (see docs/format.md). Only the new
rows are converted on a flush; the Parquet encoding runs in Arrow's C++ code.

While the store fails, rows wait in memory (segments closed meanwhile wait in
order), attempts back off, and past ``max_buffered_rows`` the oldest unstored
rows are dropped and the gap recorded (store/_buffered.py, docs/storage.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from stepscope.store._buffered import Backoff, StreamHealth
from stepscope.store._store import Store

SEGMENT_ROWS = 50_000
SEGMENT_SECONDS = 300.0
MAX_BUFFERED_ROWS = 1_000_000


def segment_name(start: float, seq: int, pid: int | None = None) -> str:
    """``part-<start_ms>-<pid>-<seq>.parquet``; names sort by start time."""
    return f"part-{int(start * 1000):013d}-{pid or os.getpid()}-{seq:05d}.parquet"


def _steady_wall() -> Callable[[], float]:
    """Unix seconds from the wall clock read once, then from the monotonic clock."""
    offset = time.time() - time.monotonic()
    return lambda: time.monotonic() + offset


def encode_parquet(table: pa.Table, dictionary: Sequence[str] | None = None) -> bytes:
    """One Parquet file, zstd; dictionary encoding on ``dictionary`` (None: every column).

    Dictionary encoding pays for columns of few distinct values (identities, phases,
    rounded metrics) and costs for unique ones: a per-row float or a step number
    is dictionary-encoded, found too diverse and written again plainly, which is
    most of the encoding time of a steps segment (docs/format.md).
    """
    # An Arrow buffer, not io.BytesIO: every write to a Python file takes the GIL
    # from the training thread (the same bytes, ~10% less CPU, fewer GIL waits).
    buf = pa.BufferOutputStream()
    use: bool | list[str] = True if dictionary is None else list(dictionary)
    pq.write_table(
        table, buf, compression="zstd", row_group_size=max(table.num_rows, 1), use_dictionary=use
    )
    data: bytes = buf.getvalue().to_pybytes()
    return data


@dataclass
class _Segment:
    """The rows of one segment file; ``stored`` of its batches are in the store."""

    started: float
    seq: int
    batches: list[pa.RecordBatch] = field(default_factory=list)
    rows: int = 0
    stored: int = 0

    @property
    def dirty(self) -> bool:
        return self.stored < len(self.batches)

    def add(self, batch: pa.RecordBatch) -> None:
        self.batches.append(batch)
        self.rows += batch.num_rows


def read_tables(store: Store, keys: list[str]) -> list[pa.Table]:
    """The segments ``keys`` as tables: one whole-file read each, concurrent on object stores."""
    return [read_segment(data) for data in store.read_many(keys)]


def read_segment(source: str | bytes, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file as a table. ``ParquetFile``, not ``pq.read_table``: that makes a
    dataset of the one file, and imports pyarrow.dataset (10 ms of each helper's CPU)."""
    with pq.ParquetFile(arrow_reader(source) if isinstance(source, bytes) else source) as f:
        return f.read(columns=columns)


def arrow_reader(data: bytes) -> pa.BufferReader:
    """``data`` to be read by Arrow, copied into Arrow's own memory first.

    A reader over the Python ``bytes`` keeps them referenced from Arrow's decoding
    threads, which drop their last reference a moment after the read has returned.
    When that moment falls in the interpreter's exit, the thread cannot take the GIL
    to free them and the process aborts ("terminate called without an active
    exception": 8 of 600 ``stepscope ls`` of a job on S3). Arrow's memory is freed
    without the GIL; the copy costs one memcpy of a segment.
    """
    out = pa.BufferOutputStream()
    out.write(data)
    return pa.BufferReader(out.getvalue())


class SegmentWriter:
    """Appends record batches to one stream (``prefix``) of a store."""

    def __init__(
        self,
        store: Store,
        prefix: str,
        *,
        segment_rows: int = SEGMENT_ROWS,
        segment_seconds: float = SEGMENT_SECONDS,
        clock: Callable[[], float] | None = None,
        max_buffered_rows: int = MAX_BUFFERED_ROWS,
        backoff: Backoff | None = None,
        dictionary: Sequence[str] | None = None,
    ) -> None:
        self.store, self.prefix = store, prefix.rstrip("/")
        self.dictionary = dictionary  # columns worth dictionary encoding (None: all)
        self.segment_rows, self.segment_seconds = segment_rows, segment_seconds
        self.max_buffered_rows = max_buffered_rows
        # Names and ages of segments: the wall clock of now, then a monotonic clock, so
        # that a step of the wall clock neither breaks the names' order nor a segment's age.
        self._clock = clock or _steady_wall()
        self._pid = os.getpid()
        self._open: _Segment | None = None
        self._waiting: list[_Segment] = []  # closed before they could be stored, oldest first
        self._seq = 0
        # Local writes fail fast and cost nothing to retry: back off on remote stores only.
        self.backoff = backoff or Backoff(first_s=store.min_interval_s / 2)
        self.health = StreamHealth(self.prefix, self._pid)
        self.bytes_written = 0
        self.files_written = 0

    @property
    def dropped_rows(self) -> int:
        return int(self.health.doc["dropped_rows"])

    @property
    def buffered_rows(self) -> int:
        return sum(s.rows for s in self._segments())

    def append(self, batch: pa.RecordBatch) -> None:
        """Add rows; starts a new segment when the schema changes. Never writes."""
        if batch.num_rows == 0:
            return
        seg = self._open
        if seg is not None and not batch.schema.equals(seg.batches[0].schema):
            self._close()
        if self._open is None:
            self._open = _Segment(self._clock(), self._next_seq())
        self._open.add(batch)
        if self.buffered_rows > self.max_buffered_rows:
            self._shed()

    def flush(self, force: bool = False) -> None:
        """Store what is not stored yet; raises if the store fails (rows are kept).

        While a failed store's retry is not due, raises :class:`StoreUnavailable`
        without a request, unless ``force`` (the last flush of a process).
        """
        if not (self._waiting or (self._open and self._open.dirty) or self.health.dirty):
            return
        if not force:
            self.backoff.check()
        try:
            self._store_all()
        except Exception as exc:
            self.backoff.failed()
            self.health.failed(exc)
            raise
        self.backoff.succeeded()

    def _store_all(self) -> None:
        while self._waiting:
            self._write(self._waiting[0])
            self._waiting.pop(0)
        seg = self._open
        if seg is not None and seg.dirty:
            self._write(seg)
            full = seg.rows >= self.segment_rows
            if full or self._clock() - seg.started >= self.segment_seconds:
                self._open = None
        self.health.recovered()
        if self.health.dirty:
            self.store.write_json(self.health.key, self.health.doc)
            self.health.dirty = False

    def _write(self, seg: _Segment) -> None:
        data = encode_parquet(pa.Table.from_batches(seg.batches), self.dictionary)
        key = f"{self.prefix}/{segment_name(seg.started, seg.seq, self._pid)}"
        self.store.write_bytes(key, data)
        seg.stored = len(seg.batches)
        self.bytes_written += len(data)
        self.files_written += 1

    def _segments(self) -> list[_Segment]:
        return self._waiting + ([self._open] if self._open is not None else [])

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq - 1

    def _close(self) -> None:
        if self._open is not None and self._open.dirty:
            self._waiting.append(self._open)
        self._open = None

    def _shed(self) -> None:
        """Over the bound: forget stored rows first, then drop the oldest unstored ones."""
        self._waiting = [t for s in self._waiting if (t := self._unstored(s)) is not None]
        if self._open is not None:
            self._open = self._unstored(self._open)
        while self.buffered_rows > self.max_buffered_rows:
            oldest = self._segments()[0]
            if oldest is self._open and len(oldest.batches) <= 1:
                break  # the newest batch always stays
            dropped = oldest.batches.pop(0)
            oldest.rows -= dropped.num_rows
            self.health.dropped(dropped)
            if not oldest.batches:
                self._waiting.remove(oldest)

    def _unstored(self, seg: _Segment) -> _Segment | None:
        """The rows of ``seg`` not in the store yet, as a segment of their own.

        The stored file keeps the rows it has; the rest goes on in a new file of
        the same start time and a later sequence number (so it sorts right after).
        """
        if seg.stored == 0:
            return seg
        if not seg.dirty:
            return None
        tail = _Segment(seg.started, self._next_seq())
        for batch in seg.batches[seg.stored :]:
            tail.add(batch)
        return tail
