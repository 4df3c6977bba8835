"""The job folder's constants that need no pyarrow (docs/format.md is the spec)."""

from __future__ import annotations

FORMAT_VERSION = 1
# The parts of a step's time, in the order of the steps/ columns.
STEP_PARTS = ("data_wait", "forward", "backward", "optimizer")
# Unknown: the launcher was lost and how the training ended was not recorded;
# Imported: written by `stepscope import` from another tool's output
JOB_STATUSES = ("Running", "Completed", "Failed", "Stopped", "Unknown", "Imported")
HEARTBEAT_STALE_S = 30.0

#: Times (unix seconds) a reader accepts, 1970 to 2100: a row with a time outside is
#: skipped, a job.json with one is damaged (docs/format.md, "Damaged job folders").
TIME_RANGE = (0.0, 4_102_444_800.0)
