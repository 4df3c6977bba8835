"""The job folder as code: the contract between every part of stepscope.

The agent, the sampler and the launcher write a job folder; the reader, the rules,
the report and the dashboard read it. This package says what is in it, and every
part reads and writes the folder only through it: the file names (:mod:`._paths`),
the typed records of its JSON files (job metadata, heartbeats, faults, profiling
windows, rule verdicts), the Arrow schemas of its row streams, the control
requests, and the format version with its check. docs/format.md is the same
contract in prose; a test checks that the two name the same things.

It imports nothing of stepscope but :mod:`stepscope.errors` and
:mod:`stepscope.config` (a profiling request carries the configuration's window
settings). I/O goes through :class:`FolderIO`, the few methods of a store it needs.
"""

from typing import TYPE_CHECKING

from stepscope.jobfolder import _paths as paths
from stepscope.jobfolder._clock import STEP_FAULT_S, JobClock, job_seconds, job_timeline
from stepscope.jobfolder._constants import (
    FORMAT_VERSION,
    HEARTBEAT_STALE_S,
    JOB_STATUSES,
    STEP_PARTS,
    TIME_RANGE,
)
from stepscope.jobfolder._faults import FaultLog, use_clock
from stepscope.jobfolder._json import (
    ClockReference,
    FaultJson,
    FindingJson,
    GpuFacts,
    JobJson,
    JsonObject,
    LauncherRecord,
    NodeInfo,
    RuleVerdict,
    WindowJson,
    as_clock_reference,
    as_json_object,
    as_launcher_record,
    as_node_info,
    as_rule_verdict,
    json_number,
)
from stepscope.jobfolder._liveness import (
    Heartbeat,
    end_without_launcher,
    heartbeats,
    liveness,
    write_heartbeat,
)
from stepscope.jobfolder._records import (
    FolderIO,
    JobMeta,
    is_job,
    read_all,
    read_meta,
    update_meta,
    write_meta,
)
from stepscope.jobfolder._unwritable import DELETED as FOLDER_DELETED
from stepscope.jobfolder._unwritable import folder_trouble, missing_job_json
from stepscope.jobfolder._validate import (
    FAULT_SPEC,
    NODE_SPEC,
    WINDOW_SPEC,
    check_job_json,
    check_version,
    record_problem,
    verdict_problem,
    without_bad_keys,
)

# The Arrow schemas and the tensors' names are resolved on first use: importing
# pyarrow costs ~0.1 s, which `stepscope ls`, `--help` and `run` need not pay. The
# live requests' parser too: it imports stepscope.config (tomllib, the profiling
# options: 10-20 ms), which the sampler never reads.
_LAZY = {
    "LiveRequest": "_requests",
    "Planned": "_requests",
    "describe": "_requests",
    "parse_request": "_requests",
    "AGENT_STEPS_SCHEMA": "_schemas",
    "EVENTS_SCHEMA": "_schemas",
    "IMPORTED_STEPS_SCHEMA": "_schemas",
    "OTHERS_SCHEMA": "_schemas",
    "STEPS_SCHEMA": "_schemas",
    "SYSTEM_BASE_SCHEMA": "_schemas",
    "SYSTEM_PRESSURE_SCHEMA": "_schemas",
    "SYSTEM_SCHEMA": "_schemas",
    "INDEX_SCHEMA": "_tensors",
    "SCALARS_SCHEMA": "_tensors",
    "VALUE_KEY": "_tensors",
    "blob_name": "_tensors",
    "rank_prefix": "_tensors",
}

if TYPE_CHECKING:
    from stepscope.jobfolder._requests import LiveRequest, Planned, describe, parse_request
    from stepscope.jobfolder._schemas import (
        AGENT_STEPS_SCHEMA,
        EVENTS_SCHEMA,
        IMPORTED_STEPS_SCHEMA,
        OTHERS_SCHEMA,
        STEPS_SCHEMA,
        SYSTEM_BASE_SCHEMA,
        SYSTEM_PRESSURE_SCHEMA,
        SYSTEM_SCHEMA,
    )
    from stepscope.jobfolder._tensors import (
        INDEX_SCHEMA,
        SCALARS_SCHEMA,
        VALUE_KEY,
        blob_name,
        rank_prefix,
    )


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stepscope.jobfolder' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"stepscope.jobfolder.{module}"), name)


__all__ = [
    "AGENT_STEPS_SCHEMA",
    "EVENTS_SCHEMA",
    "FAULT_SPEC",
    "FOLDER_DELETED",
    "FORMAT_VERSION",
    "HEARTBEAT_STALE_S",
    "IMPORTED_STEPS_SCHEMA",
    "INDEX_SCHEMA",
    "JOB_STATUSES",
    "NODE_SPEC",
    "OTHERS_SCHEMA",
    "SCALARS_SCHEMA",
    "STEPS_SCHEMA",
    "STEP_FAULT_S",
    "STEP_PARTS",
    "SYSTEM_BASE_SCHEMA",
    "SYSTEM_PRESSURE_SCHEMA",
    "SYSTEM_SCHEMA",
    "TIME_RANGE",
    "VALUE_KEY",
    "WINDOW_SPEC",
    "ClockReference",
    "FaultJson",
    "FaultLog",
    "FindingJson",
    "FolderIO",
    "GpuFacts",
    "Heartbeat",
    "JobClock",
    "JobJson",
    "JobMeta",
    "JsonObject",
    "LauncherRecord",
    "LiveRequest",
    "NodeInfo",
    "Planned",
    "RuleVerdict",
    "WindowJson",
    "as_clock_reference",
    "as_json_object",
    "as_launcher_record",
    "as_node_info",
    "as_rule_verdict",
    "blob_name",
    "check_job_json",
    "check_version",
    "describe",
    "end_without_launcher",
    "folder_trouble",
    "heartbeats",
    "is_job",
    "job_seconds",
    "job_timeline",
    "json_number",
    "liveness",
    "missing_job_json",
    "parse_request",
    "paths",
    "rank_prefix",
    "read_all",
    "read_meta",
    "record_problem",
    "update_meta",
    "use_clock",
    "verdict_problem",
    "without_bad_keys",
    "write_heartbeat",
    "write_meta",
]
