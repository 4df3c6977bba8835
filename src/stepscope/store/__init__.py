"""Storage of job folders: one interface, backends chosen by URL scheme."""

from ._segments import SegmentWriter, encode_parquet, segment_name
from ._store import Store, StoreError, open_store

__all__ = ["SegmentWriter", "Store", "StoreError", "encode_parquet", "open_store", "segment_name"]
