"""Checking segments before they are read: a damaged file is skipped, never fatal.

A job folder can hold files no writer of stepscope made whole: a segment cut
short by a full disk, an empty file, bytes that are not Parquet under a
``part-*.parquet`` name, a file whose columns have other types. Readers check
each segment once (by key, size and modification time: a rewritten segment is
checked again) before a query names it: its size, its magic bytes at both ends,
its footer (a cheap metadata read) and the types of the columns the stream
defines. A file that fails is left out of every query and named in a warning;
its row-group statistics also tell which columns hold out-of-range values
(non-finite numbers, times outside :data:`TIME_RANGE`), which readers then skip
(docs/format.md, "Damaged job folders").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from stepscope.jobfolder import (
    AGENT_STEPS_SCHEMA,
    EVENTS_SCHEMA,
    INDEX_SCHEMA,
    OTHERS_SCHEMA,
    SCALARS_SCHEMA,
    SYSTEM_SCHEMA,
    TIME_RANGE,
)
from stepscope.store._ranges import out_of_range
from stepscope.store._segments import arrow_reader
from stepscope.store._store import Store

MAGIC = b"PAR1"


_SCHEMAS = {"steps": AGENT_STEPS_SCHEMA, "events": EVENTS_SCHEMA, "system": SYSTEM_SCHEMA,
            "others": OTHERS_SCHEMA}  # fmt: skip
_TENSOR_SCHEMAS = {"scalars": SCALARS_SCHEMA, "index": INDEX_SCHEMA}


@dataclass(frozen=True)
class Checked:
    """What the check of one segment found: a ``problem`` (None: readable), its column
    types, and the columns whose statistics show out-of-range values."""

    problem: str | None
    types: dict[str, pa.DataType] = field(default_factory=dict)
    out_of_range: tuple[str, ...] = ()


def _kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"  # of any item name (Parquet writers differ: item, element)
    return "other"


def _bad_types(types: dict[str, pa.DataType], schema: pa.Schema | None) -> str | None:
    """The first column whose type cannot be read as the stream's (None: all can)."""
    if schema is None:
        return None
    for name, t in types.items():
        i = schema.get_field_index(name)
        if i >= 0 and _kind(t) != _kind(schema.field(i).type):
            return f"column {name!r} is {t}, not {schema.field(i).type}"
    return None


def schema_of(key: str) -> pa.Schema | None:
    """The schema of the stream that holds the segment ``key`` (None: not a known stream)."""
    parts = key.split("/")
    if parts[0] == "tensors" and len(parts) > 2:
        return _TENSOR_SCHEMAS.get(parts[2])
    return _SCHEMAS.get(parts[0])


def check_file(path: str, schema: pa.Schema | None = None) -> Checked:
    """Check one local segment file: size, magic bytes, footer and column types."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 2 * len(MAGIC) + 4:
                return Checked(f"too small to be Parquet ({size} bytes)")
            head = f.read(len(MAGIC))
            f.seek(-len(MAGIC), os.SEEK_END)
            tail = f.read(len(MAGIC))
        if head != MAGIC or tail != MAGIC:
            return Checked("not a Parquet file (no magic bytes): cut short or not a segment")
        meta = pq.read_metadata(path)
        types = {f.name: f.type for f in meta.schema.to_arrow_schema()}
    except IsADirectoryError:
        return Checked("a folder, not a segment file")
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        return Checked(f"unreadable footer: {_first_line(exc)}")
    bad = _bad_types(types, schema)
    return Checked(bad, types, out_of_range(meta))


def check_table(table: pa.Table, schema: pa.Schema | None = None) -> Checked:
    """The check of a segment already read whole (object stores): its column types."""
    types = {f.name: f.type for f in table.schema}
    return Checked(_bad_types(types, schema), types)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


class SegmentCheck:
    """The segments of one reader, each checked once; the damage found, by key.

    ``damaged`` maps a segment's key to why it is skipped; ``out_of_range`` maps
    a key to its columns with out-of-range values (read, those values skipped).
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int, int], Checked] = {}
        self.damaged: dict[str, str] = {}
        self.out_of_range: dict[str, tuple[str, ...]] = {}

    def readable(
        self, store: Store, keys: Sequence[str]
    ) -> tuple[list[str], dict[str, pa.DataType]]:
        """The keys of local segments that pass the check, and the union of their columns.

        Object stores' segments are checked when read (:meth:`read_tables`).
        """
        good: list[str] = []
        types: dict[str, pa.DataType] = {}
        for key in keys:
            got = self._check(store, key)
            if got.problem is None:
                good.append(key)
                for name, t in got.types.items():
                    types.setdefault(name, t)
        return good, types

    def _check(self, store: Store, key: str) -> Checked:
        path = store.path(key)
        try:
            st = os.stat(path)
        except OSError as exc:
            return Checked(f"cannot be read: {_first_line(exc)}")
        ident = (key, st.st_size, st.st_mtime_ns)
        got = self._seen.get(ident)
        if got is None:
            got = self._seen[ident] = check_file(path, schema_of(key))
        self._note(key, got)
        return got

    def _note(self, key: str, got: Checked) -> None:
        if got.problem is not None:
            self.damaged[key] = got.problem
        else:
            self.damaged.pop(key, None)
        if got.out_of_range:
            self.out_of_range[key] = got.out_of_range

    def reject(self, key: str, problem: str) -> None:
        """Leave ``key`` out from now on (a full read of it failed)."""
        self.damaged[key] = problem
        for ident in [i for i in self._seen if i[0] == key]:
            self._seen[ident] = Checked(problem)

    def read_tables(self, store: Store, keys: Sequence[str]) -> list[pa.Table]:
        """The readable segments ``keys`` as tables (one whole-file read each)."""
        tables: list[pa.Table] = []
        for key, data in zip(keys, store.read_many(list(keys)), strict=True):
            got, table = _parse(data, schema_of(key))
            self._note(key, got)
            if table is not None and got.problem is None:
                tables.append(table)
        return tables

    def deep(self, store: Store, keys: Sequence[str], read: Callable[[str], object]) -> int:
        """Read each of ``keys`` whole with ``read(path)`` (after a query over them
        failed): reject those that fail. Returns how many were rejected."""
        rejected = 0
        for key in keys:
            try:
                read(store.path(key))
            except Exception as exc:  # any engine's error: the file is what failed
                self.reject(key, f"unreadable data: {_first_line(exc)}")
                rejected += 1
        return rejected

    def warnings(self) -> list[str]:
        """One line per damaged segment, then one per segment with out-of-range values."""
        lo, hi = (int(t) for t in TIME_RANGE)
        out = [f"skipped {key}: {why}" for key, why in sorted(self.damaged.items())]
        out += [
            f"out-of-range values in {key} ({', '.join(cols)}): NaN/inf read as missing, "
            f"rows with a time outside {lo}-{hi} skipped"
            for key, cols in sorted(self.out_of_range.items())
            if key not in self.damaged
        ]
        return out


def _parse(data: bytes, schema: pa.Schema | None) -> tuple[Checked, pa.Table | None]:
    if len(data) < 2 * len(MAGIC) + 4 or data[:4] != MAGIC or data[-4:] != MAGIC:
        return Checked("not a Parquet file (no magic bytes): cut short or not a segment"), None
    try:
        with pq.ParquetFile(arrow_reader(data)) as segment:  # no pyarrow.dataset import
            table = segment.read()
    except (OSError, ValueError) as exc:
        return Checked(f"unreadable: {_first_line(exc)}"), None
    return check_table(table, schema), table
