"""The job folder's constants that need no pyarrow (docs/format.md is the spec)."""

from __future__ import annotations

FORMAT_VERSION = 1
# The parts of a step's time, in the order of the steps/ columns.
STEP_PARTS = ("data_wait", "forward", "backward", "optimizer")
JOB_STATUSES = ("Running", "Completed", "Failed", "Stopped")
HEARTBEAT_STALE_S = 30.0
