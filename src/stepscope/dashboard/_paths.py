"""Names from URLs to places in the served folder, refusing anything outside it.

A job name is one path segment of a strict alphabet naming a direct child of
the root that holds a ``job.json``; an artifact path is relative, under
``profiling/`` of that job, with no ``..``, and its real path (symlinks
resolved) must stay inside the job folder.

The served folder is the boundary (:class:`Boundary`): a job folder that
resolves outside it (a symlink to elsewhere), or that holds a symlink leading
outside it, is neither listed nor served, unless the server was started with
``follow_links`` (``stepscope ui --follow-symlinks``).
"""

from __future__ import annotations

import os
import posixpath
import re
import time

from stepscope.errors import StepscopeError
from stepscope.jobfolder import is_job
from stepscope.store import Store

JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
ARTIFACT_DIRS = ("profiling",)
#: How long a job folder's check holds: a running job's folder gains files, and
#: walking it on every request (each poll) would cost a scan per chart.
CHECK_TTL_S = 1.0
OUTSIDE = (
    "job {name!r} is not served: its folder, or a link in it, resolves outside the served "
    "folder. Serve the folder it leads to, or start `stepscope ui --follow-symlinks`."
)


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


def _inside(real_root: str, real: str) -> bool:
    return real != real_root and os.path.commonpath([real, real_root]) == real_root


def _leaves(real_root: str, folder: str) -> bool:
    """Whether ``folder`` resolves outside ``real_root`` or holds a symlink that does.

    Symlinks are not followed into (their targets are checked, and a target inside the
    root is checked as what it is there); folders that vanish meanwhile are skipped.
    """
    if not _inside(real_root, os.path.realpath(folder)):
        return True
    stack = [folder]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        if not _inside(real_root, os.path.realpath(entry.path)):
                            return True
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return False


class Boundary:
    """The served folder ``root`` as the boundary of what the dashboard reads and writes.

    Jobs on object stores have no symlinks: every job there is inside. ``follow_links``
    serves job folders and links that resolve elsewhere (an explicit opt-in).
    """

    def __init__(self, root: Store, follow_links: bool = False) -> None:
        self.root = root
        base = root.local_path()
        self._real = None if base is None or follow_links else os.path.realpath(base)
        self._checked: dict[str, tuple[float, bool]] = {}

    def inside(self, name: str) -> bool:
        """Whether job folder ``name`` and everything in it resolve inside the root."""
        if self._real is None:
            return True
        now = time.monotonic()
        at, ok = self._checked.get(name, (-CHECK_TTL_S, True))
        if now - at >= CHECK_TTL_S:
            ok = not _leaves(self._real, os.path.join(self._real, name))
            self._checked[name] = (now, ok)
        return ok

    def names(self) -> list[str]:
        """The served jobs' names: direct children with a job.json, inside the root."""
        return [n for n in self.root.listdir() if is_job(self.root, n) and self.inside(n)]

    def job_store(self, name: str) -> Store:
        """The store of job ``name``; NotServed when there is none or it leads outside."""
        store = job_store(self.root, name)
        if not self.inside(name):
            raise NotServed(OUTSIDE.format(name=name))
        return store
