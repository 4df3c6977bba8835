"""The ``tensors/`` part of the job folder (docs/format.md is the spec).

```
tensors/rank-<r>/scalars/part-*.parquet   one row per (tensor, step, key): losses,
                                          recorded scalars and reductions
tensors/rank-<r>/index/part-*.parquet     one row per raw tensor saved: where its bytes are
tensors/rank-<r>/blobs/<blob>.bin         raw tensor bytes, C order, one file per flush
tensors/rank-<r>/collections.json         {collection: [tensor names]} seen so far
```
"""

from __future__ import annotations

import pyarrow as pa

from stepscope.jobfolder import _paths as paths

TENSORS = paths.TENSORS
VALUE_KEY = "value"  # the key of a scalar's own value (a loss, a recorded scalar)

SCALARS_SCHEMA = pa.schema(
    [
        pa.field("time", pa.float64()),
        pa.field("rank", pa.int32()),
        pa.field("phase", pa.string()),
        pa.field("step", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("key", pa.string()),
        pa.field("value", pa.float64()),
    ]
)

INDEX_SCHEMA = pa.schema(
    [
        pa.field("time", pa.float64()),
        pa.field("rank", pa.int32()),
        pa.field("phase", pa.string()),
        pa.field("step", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("dtype", pa.string()),
        pa.field("shape", pa.list_(pa.int64())),
        pa.field("blob", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("nbytes", pa.int64()),
    ]
)


def rank_prefix(rank: int) -> str:
    """``tensors/rank-<r>``: everything one rank writes."""
    return paths.tensors_dir(rank)


def blob_name(start: float, pid: int, seq: int) -> str:
    """``blob-<start_ms>-<pid>-<seq>.bin``; names sort by time like segments."""
    return f"blob-{int(start * 1000):013d}-{pid}-{seq:05d}.bin"
