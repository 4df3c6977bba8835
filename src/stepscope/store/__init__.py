"""Storage of job folders: one interface, backends chosen by URL scheme.

The segment and column helpers (pyarrow, numpy) are resolved on first use, so
that opening a store and reading its JSON files imports neither.
"""

from typing import TYPE_CHECKING

from stepscope.errors import StoreError, StoreUnavailable
from stepscope.store._files import FolderGoneError
from stepscope.store._store import REMOTE_MIN_INTERVAL_S, TMP_MARKER, Store, open_store

_LAZY = {
    "Checked": "_check",
    "SegmentCheck": "_check",
    "check_file": "_check",
    "TIME_COLUMNS": "_ranges",
    "clean_floats": "_ranges",
    "column": "_columns",
    "record_batch": "_columns",
    "SegmentWriter": "_segments",
    "encode_parquet": "_segments",
    "arrow_reader": "_segments",
    "read_segment": "_segments",
    "read_tables": "_segments",
    "segment_name": "_segments",
}

if TYPE_CHECKING:
    from stepscope.store._check import Checked, SegmentCheck, check_file
    from stepscope.store._columns import column, record_batch
    from stepscope.store._ranges import TIME_COLUMNS, clean_floats
    from stepscope.store._segments import (
        SegmentWriter,
        arrow_reader,
        encode_parquet,
        read_segment,
        read_tables,
        segment_name,
    )

__all__ = [
    "REMOTE_MIN_INTERVAL_S",
    "TIME_COLUMNS",
    "TMP_MARKER",
    "Checked",
    "FolderGoneError",
    "SegmentCheck",
    "SegmentWriter",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "arrow_reader",
    "check_file",
    "clean_floats",
    "column",
    "encode_parquet",
    "open_store",
    "read_segment",
    "read_tables",
    "record_batch",
    "segment_name",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stepscope.store' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"stepscope.store.{module}"), name)
