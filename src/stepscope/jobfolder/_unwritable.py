"""A job folder that takes no record any more, or that has lost its job.json.

Deleted or made read-only while the job runs, a job folder fails every writer's
next write, and the fault record of that failure too (it goes to the same
folder). :func:`folder_trouble` tells such an error from the failure of one
file, so that the launcher says it once on stderr and the other writers (the
agent, the sampler, the rule runner) stay quiet instead of each claiming a fault
record that cannot be written. :func:`missing_job_json` says what a folder with
job records but no job.json is, for the readers (``ls``, ``show``).
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

from stepscope.jobfolder import _paths as paths

if TYPE_CHECKING:  # _records imports this module
    from stepscope.jobfolder._records import FolderIO

DELETED, READ_ONLY, NOT_WRITABLE = "was deleted", "is read-only", "is not writable"
_NOT_WRITABLE = (errno.EACCES, errno.EPERM)


def folder_trouble(io: FolderIO, exc: BaseException) -> str | None:
    """Why the job folder ``io`` takes no record at all, if ``exc`` (an error of a
    write into it) says so: :data:`DELETED`, :data:`READ_ONLY`, :data:`NOT_WRITABLE`;
    None for the failure of one file (a full disk, a damaged segment, a store error)."""
    path = io.local_path()
    if path is not None and not os.path.isdir(path):
        return DELETED  # whatever the error says (job.json missing, a file missing)
    if not isinstance(exc, OSError):
        return None
    if exc.errno == errno.EROFS:
        return READ_ONLY
    if path is None:
        return None
    if exc.errno in _NOT_WRITABLE and not os.access(path, os.W_OK):
        return NOT_WRITABLE
    return None


def missing_job_json(io: FolderIO) -> str | None:
    """Why a folder that holds job records (``steps/``, ``rules/``...) has no job.json,
    in one line; None if it has one, or holds no job records either (not a job)."""
    if io.exists(paths.JOB_JSON):
        return None
    found = [name for name in paths.ENTRIES[1:] if io.exists(name)]
    if not found:
        return None
    listed = ", ".join(f"{name}/" for name in found[:3]) + (", ..." if len(found) > 3 else "")
    return (
        f"damaged: no job.json, but job records ({listed}): its job.json was deleted "
        "(with the folder while the job ran, which older stepscope versions re-created "
        "in part, or by hand); remove the folder, or restore its job.json from a copy"
    )
