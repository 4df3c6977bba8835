"""Storage of job folders: one interface, backends chosen by URL scheme."""

from ._schemas import (
    EVENTS_SCHEMA,
    FORMAT_VERSION,
    HEARTBEAT_STALE_S,
    JOB_STATUSES,
    STEP_PARTS,
    STEPS_SCHEMA,
    SYSTEM_BASE_SCHEMA,
)
from ._segments import SegmentWriter, encode_parquet, segment_name
from ._store import Store, StoreError, open_store

__all__ = [
    "EVENTS_SCHEMA",
    "FORMAT_VERSION",
    "HEARTBEAT_STALE_S",
    "JOB_STATUSES",
    "STEPS_SCHEMA",
    "STEP_PARTS",
    "SYSTEM_BASE_SCHEMA",
    "SegmentWriter",
    "Store",
    "StoreError",
    "encode_parquet",
    "open_store",
    "segment_name",
]
