"""Caches that make many viewers cheap: segment tables by file, answers by key.

:class:`Streams` keeps each Parquet segment of a local job as an Arrow table,
keyed by its path, size and modification time: a running job's writer rewrites
only its current segment, so a refresh reads one file, not a day of them.
:class:`Answers` keeps computed answers (chart specs) by a key that includes the
stream's signature, so a stale answer is never served; concurrent requests for
the same key wait for one computation instead of repeating it.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..store import Store

T = TypeVar("T")
Entry = tuple[str, int, int]
Signature = tuple[Entry, ...]
MAX_STREAMS = 64
MAX_ANSWERS = 512


def signature(store: Store, prefix: str, suffix: str = ".parquet") -> Signature:
    """(key, size, mtime_ns) of every file of a local folder (segments by default), by name."""
    out = []
    for key in store.list(prefix, suffix=suffix):
        try:
            st = os.stat(store.path(key))
        except FileNotFoundError:  # replaced between listing and stat: next refresh sees it
            continue
        out.append((key, st.st_size, st.st_mtime_ns))
    return tuple(out)


class Streams:
    """Row streams of local jobs as DataFrames, re-reading only changed segments.

    Segments are named by their first row's time, and only a writer's last
    segment changes, so each stream keeps a "head" frame of every segment but
    the last: a refresh converts the new or changed tail and appends it.
    """

    def __init__(self, max_streams: int = MAX_STREAMS) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, dict[Entry, pa.Table]] = {}
        self._frames: OrderedDict[str, tuple[Signature, pd.DataFrame]] = OrderedDict()
        self._heads: dict[str, tuple[Signature, pd.DataFrame]] = {}
        self._checked: dict[str, float] = {}  # when each stream's files were last listed
        self.max_streams = max_streams
        self.files_read = 0

    def frame(
        self, store: Store, prefix: str, sort: str, max_age: float = 0.0
    ) -> tuple[Signature, pd.DataFrame]:
        """The whole stream ``prefix`` of ``store`` sorted by ``sort``, and its signature.

        A frame whose files were listed less than ``max_age`` seconds ago is returned
        without listing them again (``inf`` for a finished job: its files are final).
        """
        ident = store.path(prefix)
        with self._lock:
            cached = self._frames.get(ident)
            if cached is not None and time.monotonic() - self._checked[ident] < max_age:
                return cached
        sig = signature(store, prefix)
        with self._lock:
            self._checked[ident] = time.monotonic()
            if cached is not None and cached[0] == sig:
                self._frames.move_to_end(ident)
                return cached
            old = self._tables.get(ident, {})
            head = self._heads.get(ident, ((), pd.DataFrame()))
        tables = {e: old.get(e) or self._read(store, e[0]) for e in sig}
        good = tuple(e for e in sig if tables[e] is not None)
        head = _extend(head, good[:-1], tables, sort)
        frame = _append(head[1], [tables[e] for e in good[-1:]], sort)
        with self._lock:
            self._tables[ident] = {e: tables[e] for e in good}
            self._heads[ident] = head
            self._frames[ident] = (sig, frame)
            while len(self._frames) > self.max_streams:
                gone, _ = self._frames.popitem(last=False)
                for d in (self._tables, self._heads, self._checked):
                    d.pop(gone, None)
        return sig, frame

    def _read(self, store: Store, key: str) -> pa.Table | None:
        self.files_read += 1
        try:
            return pq.read_table(store.path(key))
        except (OSError, pa.ArrowInvalid):  # vanished or being replaced: skipped this time
            return None


def _extend(
    head: tuple[Signature, pd.DataFrame], want: Signature, tables: dict[Entry, Any], sort: str
) -> tuple[Signature, pd.DataFrame]:
    """The head frame for the segments ``want``: extended when the old head is a prefix."""
    have, frame = head
    if want[: len(have)] != have:
        have, frame = (), pd.DataFrame()
    return want, _append(frame, [tables[e] for e in want[len(have) :]], sort)


def _append(frame: pd.DataFrame, tables: list[pa.Table], sort: str) -> pd.DataFrame:
    """``frame`` with the rows of ``tables`` after it, sorted by ``sort``."""
    if not tables:
        return frame
    tail = _concat(tables, sort)
    if frame.empty:
        return tail
    out = pd.concat([frame, tail], ignore_index=True)
    if out[sort].is_monotonic_increasing:
        return out
    return out.sort_values(sort, kind="stable").reset_index(drop=True)


def _concat(tables: list[pa.Table], sort: str) -> pd.DataFrame:
    if not tables:
        return pd.DataFrame()
    frame = pa.concat_tables(tables, promote_options="default").to_pandas()
    return frame.sort_values(sort, kind="stable").reset_index(drop=True)


class Answers:
    """A bounded LRU of computed answers with one computation per key at a time."""

    def __init__(self, max_entries: int = MAX_ANSWERS) -> None:
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._busy: dict[Hashable, threading.Lock] = {}
        self.max_entries = max_entries
        self.hits = self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The cached answer for ``key``, computing it (once) when missing."""
        with self._lock:
            if key in self._values:
                self.hits += 1
                self._values.move_to_end(key)
                return self._values[key]
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:
            with self._lock:
                if key in self._values:
                    self.hits += 1
                    return self._values[key]
            self.misses += 1
            value = compute()
            with self._lock:
                self._values[key] = value
                self._busy.pop(key, None)
                while len(self._values) > self.max_entries:
                    self._values.popitem(last=False)
        return value
