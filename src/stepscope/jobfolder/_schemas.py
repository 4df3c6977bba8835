"""Arrow schemas of the job folder's row streams (docs/format.md is the spec).

Imported on first use of a schema (``stepscope.jobfolder`` resolves these names
lazily): the constants that need no pyarrow live in :mod:`._constants`.
"""

from __future__ import annotations

import pyarrow as pa

from stepscope.jobfolder._constants import (
    FORMAT_VERSION,
    HEARTBEAT_STALE_S,
    JOB_STATUSES,
    STEP_PARTS,
)

__all__ = [
    "AGENT_STEPS_SCHEMA",
    "EVENTS_SCHEMA",
    "FORMAT_VERSION",
    "HEARTBEAT_STALE_S",
    "JOB_STATUSES",
    "OTHERS_SCHEMA",
    "STEPS_SCHEMA",
    "STEP_PARTS",
    "SYSTEM_BASE_SCHEMA",
    "SYSTEM_PRESSURE_SCHEMA",
    "SYSTEM_SCHEMA",
]

_IDENTITY = [
    pa.field("rank", pa.int32()),
    pa.field("local_rank", pa.int32()),
    pa.field("node", pa.string()),
    pa.field("pid", pa.int32()),
]

STEPS_SCHEMA = pa.schema(
    [
        *_IDENTITY,
        pa.field("phase", pa.string()),
        pa.field("step", pa.int64()),
        pa.field("start", pa.float64()),
        pa.field("end", pa.float64()),
        pa.field("duration", pa.float32()),
        *[pa.field(p, pa.float32()) for p in STEP_PARTS],
        pa.field("other", pa.float32()),
        pa.field("profiled", pa.bool_()),
        pa.field("gpu_forward", pa.float32()),
        pa.field("gpu_backward", pa.float32()),
        pa.field("gpu_optimizer", pa.float32()),
    ]
)

# Optional step columns: written by the agent, absent in older jobs and in steps written
# by other tools, so no reader may require them (docs/format.md).
# ``cuda_*``: the CUDA caching allocator's bytes when the step ended (timed steps only).
AGENT_STEPS_SCHEMA = pa.schema(
    [
        *STEPS_SCHEMA,
        pa.field("collective", pa.float32()),
        *[pa.field(f"cuda_{c}", pa.int64()) for c in ("allocated", "reserved", "peak")],
    ]
)

# Optional step columns of imported jobs (docs/sagemaker.md): the step as the source tool
# recorded it, where its definition differs from ours (docs/format.md).
IMPORTED_STEPS_SCHEMA = pa.schema(
    [*STEPS_SCHEMA, pa.field("source_start", pa.float64()), pa.field("source_end", pa.float64())]
)

EVENTS_SCHEMA = pa.schema(
    [
        pa.field("time", pa.float64()),
        *_IDENTITY,
        pa.field("kind", pa.string()),
        pa.field("detail", pa.string()),
    ]
)

SYSTEM_BASE_SCHEMA = pa.schema(
    [
        pa.field("time", pa.float64()),
        pa.field("node", pa.string()),
        pa.field("interval_ms", pa.int32()),
        pa.field("cpu", pa.float32()),
        pa.field("cpu_iowait", pa.float32()),
        pa.field("mem_used", pa.float64()),
        pa.field("mem_percent", pa.float32()),
        pa.field("disk_read_bps", pa.float64()),
        pa.field("disk_write_bps", pa.float64()),
        pa.field("net_rx_bps", pa.float64()),
        pa.field("net_tx_bps", pa.float64()),
        pa.field("proc_cpu", pa.float32()),
        pa.field("proc_cpu_main", pa.float32()),
        pa.field("proc_run_wait", pa.float32()),
        pa.field("proc_io_wait", pa.float32()),
        pa.field("proc_read_bps", pa.float64()),
        pa.field("proc_write_bps", pa.float64()),
        pa.field("proc_rss", pa.float64()),
    ]
)

# Optional system columns of host contention and memory pressure: written by samplers
# since issue 19, absent in older jobs, so no reader may require them (docs/format.md).
SYSTEM_PRESSURE_SCHEMA = pa.schema(
    [
        pa.field("cpu_steal", pa.float32()),
        pa.field("run_queue", pa.int32()),
        pa.field("swap_used", pa.float64()),
        pa.field("swap_in_bps", pa.float64()),
        pa.field("swap_out_bps", pa.float64()),
        pa.field("proc_thread_run_wait", pa.float32()),
        pa.field("own_cpu", pa.float32()),
        pa.field("others_cpu_group", pa.float32()),
        pa.field("others_groups", pa.int32()),
        pa.field("proc_pool_run_wait", pa.float32()),
    ]
)
SYSTEM_SCHEMA = pa.schema([*SYSTEM_BASE_SCHEMA, *SYSTEM_PRESSURE_SCHEMA])

# others/<node>/: the busiest processes of a node outside the job, every few seconds.
OTHERS_SCHEMA = pa.schema(
    [
        pa.field("time", pa.float64()),
        pa.field("node", pa.string()),
        pa.field("pid", pa.int32()),
        pa.field("name", pa.string()),
        pa.field("command", pa.string()),
        pa.field("cpu", pa.float32()),
    ]
)
