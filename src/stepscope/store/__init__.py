"""Storage of job folders: one interface, backends chosen by URL scheme."""

from stepscope.store._buffered import StoreUnavailable
from stepscope.store._segments import SegmentWriter, encode_parquet, read_tables, segment_name
from stepscope.store._store import REMOTE_MIN_INTERVAL_S, Store, StoreError, open_store

__all__ = [
    "REMOTE_MIN_INTERVAL_S",
    "SegmentWriter",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "encode_parquet",
    "open_store",
    "read_tables",
    "segment_name",
]
