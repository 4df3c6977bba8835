"""Storage of job folders: one interface, backends chosen by URL scheme.

The segment and column helpers (pyarrow, numpy) are resolved on first use, so
that opening a store and reading its JSON files imports neither.
"""

from typing import TYPE_CHECKING

from stepscope.errors import StoreError, StoreUnavailable
from stepscope.store._store import REMOTE_MIN_INTERVAL_S, TMP_MARKER, Store, open_store

_LAZY = {
    "column": "_columns",
    "record_batch": "_columns",
    "SegmentWriter": "_segments",
    "encode_parquet": "_segments",
    "read_tables": "_segments",
    "segment_name": "_segments",
}

if TYPE_CHECKING:
    from stepscope.store._columns import column, record_batch
    from stepscope.store._segments import (
        SegmentWriter,
        encode_parquet,
        read_tables,
        segment_name,
    )

__all__ = [
    "REMOTE_MIN_INTERVAL_S",
    "TMP_MARKER",
    "SegmentWriter",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "column",
    "encode_parquet",
    "open_store",
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
