"""Storage of job folders: one interface, backends chosen by URL scheme."""

from stepscope.jobfolder._schemas import (
    EVENTS_SCHEMA,
    FORMAT_VERSION,
    HEARTBEAT_STALE_S,
    JOB_STATUSES,
    STEP_PARTS,
    STEPS_SCHEMA,
    SYSTEM_BASE_SCHEMA,
)
from stepscope.store._buffered import StoreUnavailable
from stepscope.store._segments import SegmentWriter, encode_parquet, read_tables, segment_name
from stepscope.store._store import REMOTE_MIN_INTERVAL_S, Store, StoreError, open_store

__all__ = [
    "EVENTS_SCHEMA",
    "FORMAT_VERSION",
    "HEARTBEAT_STALE_S",
    "JOB_STATUSES",
    "REMOTE_MIN_INTERVAL_S",
    "STEPS_SCHEMA",
    "STEP_PARTS",
    "SYSTEM_BASE_SCHEMA",
    "SegmentWriter",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "encode_parquet",
    "open_store",
    "read_tables",
    "segment_name",
]
