"""Live reading: only the rows that are new since the last scan; running totals.

Each stream (``system/<node>``, ``steps/rank-<r>``, ``events/rank-<r>``,
``others/<node>``) has a
watermark: the newest segment seen and the newest row time. A scan re-reads
only segments at or after the newest seen (the current one is rewritten by its
writer every flush) and keeps rows newer than the watermark, so its cost does
not grow with the job's age. The buffer the rules judge is ``_buffer.LiveState``.
"""

from __future__ import annotations

import bisect
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import duckdb
import pandas as pd

from stepscope.rules._base import Rule
from stepscope.rules._data import RULE_SYSTEM_COLUMNS, list_names, read_segments
from stepscope.rules._node_rule import NodeRule
from stepscope.rules._types import RuleResult, Status
from stepscope.store import Store

TIME_COLUMNS = {"system": "time", "steps": "end", "events": "time", "others": "time"}
Version = tuple[int, int]
READ_ATTEMPTS = 3
ORDER = {"system": "node, time", "steps": "rank, phase, step", "events": "time", "others": "time"}


def _one_thread_connection() -> duckdb.DuckDBPyConnection:
    return duckdb.connect(config={"threads": 1})


@dataclass
class StreamReader:
    """Reads the rows of one kind of stream that are new since the last call."""

    store: Store
    kind: str
    last_key: dict[str, str] = field(default_factory=dict)
    watermark: dict[str, float] = field(default_factory=dict)
    rows_read: int = 0
    files_read: int = 0
    # One thread: the live runner reads beside a training that owns the cores.
    con: duckdb.DuckDBPyConnection = field(default_factory=_one_thread_connection)
    streams: set[str] = field(default_factory=set)  # folders known to be streams
    # Local stores: (size, mtime) of the segments read, per stream (its tail only). A
    # scan every few seconds finds many unchanged since the last (events, idle ranks):
    # a stat each spares them a query.
    versions: dict[str, dict[str, Version]] = field(default_factory=dict)
    columns: str = "*"  # the columns read (a DuckDB select list)

    def read_new(self) -> pd.DataFrame | None:
        """New rows of every stream of this kind, read in one query."""
        keys, owner, versions, tails = self._new_keys()
        if not keys:
            self.last_key.update(tails)
            return None
        col = TIME_COLUMNS[self.kind]
        low = min(self.watermark.get(p, -math.inf) for p in set(owner.values()))
        frame = self._read(keys, f'"{col}" > ?', [low])
        # Only now: a scan whose read failed leaves them, and the next reads these again.
        self.last_key.update(tails)
        self.files_read += len(keys)
        self.versions.update(versions)  # read: unchanged from now on until rewritten
        if frame is None or not len(frame):
            return None
        prefixes = frame.pop("filename").map(owner)
        marks = prefixes.map(lambda p: self.watermark.get(p, -math.inf))
        fresh = (frame[col] > marks).to_numpy()
        frame, prefixes = frame[fresh].reset_index(drop=True), prefixes[fresh]
        for prefix, newest in frame[col].groupby(prefixes.to_numpy()).max().items():
            self.watermark[str(prefix)] = float(newest)
        self.rows_read += len(frame)
        return frame if len(frame) else None

    def _read(self, keys: list[str], where: str, params: list[object]) -> pd.DataFrame | None:
        """The query, again if a writer replaced a segment while DuckDB read it.

        DuckDB reads a file's footer when it plans the query and opens the file
        again to run it: a flush between the two (one every 2 s per stream) gives
        the new file with the old footer (``TProtocolException``: "Invalid data",
        "Exceeded size limit"; 6% of reads racing a writer that replaces the file
        every 10 ms). A second read sees one version throughout; a third failure is real.
        """
        for attempt in range(READ_ATTEMPTS):
            try:
                return read_segments(self.store, keys, where, params, ORDER[self.kind],
                                     self.con, filename=True, columns=self.columns)  # fmt: skip
            except duckdb.Error:
                if attempt == READ_ATTEMPTS - 1:
                    raise
        return None  # not reached: the last attempt returns or raises

    def prefixes(self) -> list[str]:
        """The streams of this kind: one folder each (each new name checked once)."""
        found = [f"{self.kind}/{name}" for name in list_names(self.store, self.kind)]
        self.streams.update(p for p in found if p not in self.streams and self.store.isdir(p))
        return [p for p in found if p in self.streams]

    def _new_keys(
        self,
    ) -> tuple[list[str], dict[str, str], dict[str, dict[str, Version]], dict[str, str]]:
        """Segments at or after the newest seen that changed since read, per stream;
        full path -> stream; each stream's tail with its versions; its newest segment."""
        keys, owner, versions, tails = [], {}, {}, {}
        for prefix in self.prefixes():
            last = self.last_key.get(prefix, "").rpartition("/")[2]
            # One flat listing of names (no stat per file): segments are direct children,
            # sorted, so the new ones are a tail of the listing.
            names = list_names(self.store, prefix)
            tail = names[bisect.bisect_left(names, last) :]
            new = [f"{prefix}/{n}" for n in tail if n.endswith(".parquet")]
            if new:
                tails[prefix] = new[-1]
            if self.store.is_local:
                seen = self.versions.get(prefix, {})
                versions[prefix] = {k: _version(self.store.path(k)) for k in new}
                new = [k for k in new if seen.get(k) != versions[prefix][k]]
            owner.update({self.store.path(k): prefix for k in new})
            keys += new
        return keys, owner, versions, tails


def _version(path: str) -> Version:
    """(size, mtime) of a segment: a writer replaces it whole, so a new flush changes it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:  # gone since the listing: read it (as before) and fail there
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def readers(store: Store, rules: Sequence[Rule]) -> dict[str, StreamReader]:
    """A reader per kind of stream. As offline, the per-core, disk and network columns
    (a third of a wide sample) are left out unless a whole-job rule reads samples."""
    wide = any("system" in r.frames for r in rules if not isinstance(r, NodeRule))
    columns = {"system": "*" if wide else RULE_SYSTEM_COLUMNS}
    return {k: StreamReader(store, k, columns=columns.get(k, "*")) for k in TIME_COLUMNS}


def merge(rule: Rule, committed: RuleResult | None, current: RuleResult) -> RuleResult:
    """Running totals: committed chunks plus the current buffer."""
    if committed is None:
        return current
    if Status.ERROR in (committed.status, current.status):
        return current if current.status is Status.ERROR else committed
    keys = {f.key() for f in committed.findings}
    findings = [*committed.findings, *(f for f in current.findings if f.key() not in keys)]
    triggers = committed.triggers + current.triggers
    datapoints = committed.datapoints + current.datapoints
    tolerated = rule.tolerated() if isinstance(rule, NodeRule) else 0
    status = _status(triggers, tolerated, datapoints, committed, current)
    message = f"{triggers} trigger(s) in {datapoints} datapoints so far; latest: {current.message}"
    return replace(
        current,
        status=status,
        findings=tuple(findings),
        triggers=triggers,
        datapoints=datapoints,
        message=message,
        cost_seconds=_add(committed.cost_seconds, current.cost_seconds),
        saving_seconds=_add(committed.saving_seconds, current.saving_seconds),
    )


def _add(a: float | None, b: float | None) -> float | None:
    """The cost of committed chunks plus the buffer's (they hold different rows)."""
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


def _status(triggers: int, tolerated: int, datapoints: int, *results: RuleResult) -> Status:
    if triggers > tolerated or any(r.status is Status.ISSUES_FOUND for r in results):
        return Status.ISSUES_FOUND
    if datapoints or any(r.status is Status.NO_ISSUES_FOUND for r in results):
        return Status.NO_ISSUES_FOUND
    return Status.NOT_APPLICABLE
