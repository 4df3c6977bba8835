"""Row streams of local jobs as parts, one per Parquet segment, re-reading only changed files.

A stream (``system/<node>``, ``steps/rank-<n>``) is a folder of segments named by
their first row's time; a running job's writer rewrites only its last one. Each
segment is kept as a :class:`Part` keyed by its path, size and modification time,
so a refresh reads one file, and everything computed from a part (its columns as
arrays, its rows of one phase, its summaries in :mod:`._reduce`) can be cached by
that key: a rewritten segment has a new key and is never served stale.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from stepscope.analysis.downsample import FloatArray
from stepscope.store import TMP_MARKER, Store, check_file, clean_floats

Entry = tuple[str, int, int]
Signature = tuple[Entry, ...]
MAX_STREAMS = 64
#: A folder changed this recently may change again within one tick of its mtime's clock.
RACY_S = 1.0


def signature(store: Store, prefix: str, suffix: str = ".parquet") -> Signature:
    """(key, size, mtime_ns) of every file of a local folder (segments by default), by name.

    Read with ``os.scandir`` rather than ``Store.list``: a running job's streams
    are listed every 0.5 s, and fsspec's walk plus a stat per file took ~10 ms
    for a day's 288 segments.
    """
    out: list[Entry] = []
    _scan(store.path(prefix), prefix, suffix, out)
    return tuple(sorted(out))


def _scan(folder: str, key: str, suffix: str, out: list[Entry]) -> None:
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for e in entries:
        try:
            if e.is_dir():
                _scan(e.path, f"{key}/{e.name}", suffix, out)
            elif e.name.endswith(suffix) and TMP_MARKER not in e.name:
                st = e.stat()
                out.append((f"{key}/{e.name}", st.st_size, st.st_mtime_ns))
        except FileNotFoundError:  # replaced between listing and stat: next refresh sees it
            continue


class Part:
    """The rows of one segment sorted by ``sort``, with their columns as arrays on demand.

    ``key`` identifies the segment's content (None: not cacheable, such as a
    remote job's rows). Concurrent requests may convert a column twice; both
    results are equal, so no lock is needed.
    """

    def __init__(self, key: Hashable | None, table: pa.Table, sort: str) -> None:
        x = _floats(table.column(sort)) if sort in table.column_names else np.empty(0)
        if np.any(np.diff(x) < 0):
            order = np.argsort(x, kind="stable")
            table, x = table.take(order), x[order]
        self.key, self.table, self.x, self.sort = key, table, x, sort
        self.first, self.last = (float(x[0]), float(x[-1])) if len(x) else (0.0, 0.0)
        self.names = tuple(table.column_names)  # Table.column_names builds a new list per call
        self._types = dict(zip(self.names, table.schema.types, strict=True))
        self._columns: dict[str, npt.NDArray[np.generic]] = {}
        self._only: dict[tuple[str, str | float], Part] = {}

    def __len__(self) -> int:
        return len(self.x)

    def column(self, name: str) -> npt.NDArray[np.generic]:
        """Column ``name``: floats (NaN for nulls, all NaN when missing), strings as objects."""
        got = self._columns.get(name)
        if got is None:
            if name not in self._types:
                got = np.full(len(self.x), np.nan)
            elif pa.types.is_string(self._types[name]):
                got = self.table.column(name).to_numpy()
            else:
                got = _floats(self.table.column(name))
            self._columns[name] = got
        return got

    def only(self, name: str, value: str | float) -> Part:
        """The part of the rows whose ``name`` is ``value`` (kept: one filter per segment)."""
        got = self._only.get((name, value))
        if got is None:
            mask = pc.equal(self.table.column(name), value) if name in self._types \
                else pa.array(np.zeros(len(self.x), bool))  # fmt: skip
            key = None if self.key is None else (self.key, name, value)
            got = self._only[(name, value)] = Part(key, self.table.filter(mask), self.sort)
        return got


def _floats(col: pa.ChunkedArray) -> FloatArray:
    return np.asarray(col.to_numpy(), dtype=np.float64)


class _Listing(NamedTuple):
    """A stream's parts as last listed, and what they were listed under."""

    sig: Signature
    parts: tuple[Part, ...]
    checked: float  # time.monotonic() of the listing
    state: Hashable  # the job's state (status, end) when listed
    folder: tuple[int, int] | None  # (inode, mtime_ns) of the stream's folder before listing
    settled: bool  # listed RACY_S after the folder last changed, and no subfolders


def _folder(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


class Streams:
    """The parts of local streams, refreshed by file signature."""

    def __init__(self, max_streams: int = MAX_STREAMS) -> None:
        self._lock = threading.Lock()
        self._streams: OrderedDict[str, _Listing] = OrderedDict()
        self.max_streams = max_streams
        self.files_read = 0
        self.listings = 0

    def parts(
        self, store: Store, prefix: str, sort: str, max_age: float = 0.0, state: Hashable = None
    ) -> tuple[Signature, tuple[Part, ...]]:
        """The non-empty parts of stream ``prefix`` of ``store`` in time order, and its signature.

        A listing is reused only under the same job ``state`` (its status and end
        time): when a job ends, its streams are listed again, so the rows written
        by its last flushes are seen. Under the same state, parts listed less than
        ``max_age`` seconds ago are returned without listing; with ``inf`` (a
        finished job) for as long as the stream's folder is unchanged: the
        writers add and replace segments by renames, which change the folder's
        modification time.
        """
        ident = store.path(prefix)
        folder = _folder(ident)
        with self._lock:
            cached = self._streams.get(ident)
            if cached is not None and _fresh(cached, max_age, state, folder):
                self._streams.move_to_end(ident)
                return cached.sig, cached.parts
        listed_at, began = time.time(), time.monotonic()
        self.listings += 1
        sig = signature(store, prefix)
        if cached is not None and cached.sig == sig:
            parts = cached.parts
        else:
            old = {p.key: p for p in cached.parts} if cached else {}
            read = [old.get((ident, e)) or self._read(store, ident, e, sort) for e in sig]
            parts = tuple(p for p in read if p is not None and len(p))
        depth = prefix.count("/") + 1
        settled = (
            folder is not None
            and listed_at - folder[1] / 1e9 > RACY_S
            and all(e[0].count("/") == depth for e in sig)
        )
        with self._lock:
            self._streams[ident] = _Listing(sig, parts, began, state, folder, settled)
            self._streams.move_to_end(ident)
            while len(self._streams) > self.max_streams:
                self._streams.popitem(last=False)
        return sig, parts

    def _read(self, store: Store, ident: str, entry: Entry, sort: str) -> Part | None:
        self.files_read += 1
        path = store.path(entry[0])
        # A damaged segment is skipped (the job's warnings name it); NaN, infinities and
        # absurd times are left out as every reader does (docs/format.md).
        if check_file(path).problem is not None:
            return None
        try:
            return Part((ident, entry), clean_floats(pq.read_table(path)), sort)
        except (OSError, pa.ArrowInvalid):  # vanished or being replaced: skipped this time
            return None


def _fresh(
    cached: _Listing, max_age: float, state: Hashable, folder: tuple[int, int] | None
) -> bool:
    """Whether ``cached`` may be returned without listing the stream's files again."""
    if cached.state != state:
        return False
    if math.isinf(max_age):
        return cached.settled and cached.folder == folder
    return time.monotonic() - cached.checked < max_age
