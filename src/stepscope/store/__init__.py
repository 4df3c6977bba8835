"""Storage of job folders: one interface, backends chosen by URL scheme."""

from stepscope.errors import StoreError, StoreUnavailable
from stepscope.store._check import Checked, SegmentCheck, check_file
from stepscope.store._columns import column, record_batch
from stepscope.store._ranges import TIME_COLUMNS, clean_floats
from stepscope.store._segments import SegmentWriter, encode_parquet, read_tables, segment_name
from stepscope.store._store import REMOTE_MIN_INTERVAL_S, TMP_MARKER, Store, open_store

__all__ = [
    "REMOTE_MIN_INTERVAL_S",
    "TIME_COLUMNS",
    "TMP_MARKER",
    "Checked",
    "SegmentCheck",
    "SegmentWriter",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "check_file",
    "clean_floats",
    "column",
    "encode_parquet",
    "open_store",
    "read_tables",
    "record_batch",
    "segment_name",
]
