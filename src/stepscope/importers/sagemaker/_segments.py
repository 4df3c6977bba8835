"""Deterministic segments: the same input writes the same files (names and bytes).

The agent's :class:`stepscope.store.SegmentWriter` names a segment by the writer's
pid; an import has no writing process worth naming, so its segments carry pid 0
(docs/format.md) and their start times are the rows' own, and an import run twice
writes identical files.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from stepscope.store import Store, encode_parquet

IMPORT_PID = 0
SEGMENT_ROWS = 50_000


def segment_key(prefix: str, start: float, seq: int) -> str:
    """``<prefix>/part-<start_ms>-0-<seq>.parquet``."""
    return f"{prefix}/part-{int(start * 1000):013d}-{IMPORT_PID}-{seq:05d}.parquet"


class Segments:
    """Rows of one stream, cut into segments of ``rows`` rows, written whole."""

    def __init__(
        self,
        store: Store,
        prefix: str,
        time_col: str,
        rows: int = SEGMENT_ROWS,
        dictionary: Sequence[str] | None = None,
    ) -> None:
        self.store, self.prefix, self.time_col = store, prefix, time_col
        self.rows, self.dictionary = rows, dictionary
        self._pending: list[pa.Table] = []
        self._count = 0
        self._seq = 0
        self.written = 0

    def add(self, table: pa.Table) -> None:
        """Queue rows (sorted by time by the caller); full segments are written."""
        if table.num_rows == 0:
            return
        self._pending.append(table)
        self._count += table.num_rows
        while self._count >= self.rows:
            self._write(self.rows)

    def close(self) -> None:
        """Write what is left."""
        if self._count:
            self._write(self._count)

    def _write(self, n: int) -> None:
        table = pa.concat_tables(self._pending, promote_options="default")
        head, rest = table.slice(0, n), table.slice(n)
        self._pending, self._count = ([rest] if rest.num_rows else []), rest.num_rows
        start = float(head.column(self.time_col)[0].as_py())
        data = encode_parquet(head.combine_chunks(), self.dictionary)
        self.store.write_bytes(segment_key(self.prefix, start, self._seq), data)
        self._seq += 1
        self.written += head.num_rows


def write_table(store: Store, prefix: str, table: pa.Table, time_col: str) -> int:
    """Write a whole stream of rows sorted by ``time_col``; returns the rows written."""
    seg = Segments(store, prefix, time_col)
    seg.add(table.sort_by(time_col))
    seg.close()
    return seg.written
