"""Names from URLs to places in the served folder, refusing anything outside it.

A job name is one path segment of a strict alphabet naming a direct child of
the root that holds a ``job.json``; an artifact path is relative, under
``profiling/`` of that job, with no ``..``, and its real path (symlinks
resolved) must stay inside the job folder.
"""

from __future__ import annotations

import os
import posixpath
import re

from stepscope.errors import StepscopeError
from stepscope.jobfolder import is_job
from stepscope.store import Store

JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
ARTIFACT_DIRS = ("profiling",)


class NotServed(StepscopeError, LookupError):
    """The name does not lead to something the dashboard serves (a 404, never a hint)."""


def job_store(root: Store, name: str) -> Store:
    """The store of job ``name`` under ``root``; NotServed for anything else."""
    if not JOB_NAME.match(name) or ".." in name:
        raise NotServed(f"no job named {name!r}")
    if not is_job(root, name):
        raise NotServed(f"no job named {name!r}")
    return root.sub(name)


def artifact_key(rel: str) -> str:
    """A clean key under one of :data:`ARTIFACT_DIRS`; NotServed when it is not one."""
    if not rel or "\\" in rel or "\x00" in rel or rel.startswith("/"):
        raise NotServed("not an artifact path")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts) or parts[0] not in ARTIFACT_DIRS:
        raise NotServed("not an artifact path")
    if ".tmp-" in rel:
        raise NotServed("not an artifact path")
    return posixpath.join(*parts)


def local_artifact(job: Store, rel: str) -> str:
    """The local file of artifact ``rel`` of ``job``, symlinks resolved and checked."""
    key = artifact_key(rel)
    base = job.local_path()
    if base is None:
        raise NotServed("artifacts of remote jobs are not served")
    real_base = os.path.realpath(base)
    real = os.path.realpath(os.path.join(base, key))
    if os.path.commonpath([real, real_base]) != real_base or not os.path.isfile(real):
        raise NotServed("not an artifact path")
    return real
