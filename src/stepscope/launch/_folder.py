"""The launcher's watch over its job folder: a folder that takes no record, told once.

A job folder deleted or made read-only while the job runs fails every write into
it, and each fault record of those failures too. The training goes on unharmed;
what is lost is the job's record. The launcher notices it on its next write (a
heartbeat: within ``HEARTBEAT_S``) and says so once on stderr, with what can no
longer be recorded; the other writers stay quiet (``jobfolder.folder_trouble``).
Other storage errors (a store that does not answer) are told once each time they
begin, not at every heartbeat.
"""

from __future__ import annotations

import errno
import shutil
import time
from collections.abc import Callable

from stepscope.errors import StepscopeError, UsageError, quote
from stepscope.jobfolder import FOLDER_DELETED, FaultLog, folder_trouble
from stepscope.store import Store

DISK_FULL_BYTES = 1 << 20  # less free space than this under a local job folder: recorded

LOST = (
    "nothing more of this job can be recorded: heartbeats, steps, system samples, "
    "rule verdicts, faults, and how it ends; the training goes on"
)


class FolderWatch:
    """Notes the job folder's failures; says each kind once on stderr."""

    def __init__(self, store: Store, say: Callable[[str], None]) -> None:
        self.store, self._say, self._started = store, say, time.monotonic()
        self.lost: str | None = None  # "was deleted", "is read-only", "is not writable"
        self._failing = False
        self.end_unrecorded = False

    def guarded(self, fn: Callable[[], object]) -> None:
        """``fn()``; a storage error is told (once), never raised: the training goes on."""
        try:
            fn()
        except Exception as exc:
            self.failed(exc)
        else:
            self._failing = False

    def failed(self, exc: BaseException) -> None:
        """Note the error ``exc`` of a write into the job folder."""
        if self.lost is not None:
            return
        trouble = folder_trouble(self.store, exc)
        if trouble is not None:
            self.lost = trouble
            into = time.monotonic() - self._started
            self._say(
                f"the job folder {self.store.url} {trouble} {into:.1f} s into the job: {LOST}"
            )
        elif not self._failing:
            self._failing = True
            self._say(f"job folder unavailable ({exc}); the command keeps running")

    def end_failed(self, exc: BaseException) -> None:
        """The end of the job could not be recorded (told, unless the folder's loss was)."""
        self.failed(exc)
        if self.lost is None:
            self._say(f"could not record the end of the job ({exc})")
        self.end_unrecorded = True

    def where(self) -> str:
        """The end of the launcher's last line: where to look, and what was not recorded."""
        show = f"stepscope show {self.store.url}"
        if not self.end_unrecorded:
            return f": {show}"
        why = f"; not recorded: the job folder {self.lost}" if self.lost else "; not recorded"
        return why if self.lost == FOLDER_DELETED else f"{why} ({show})"


# errno -> what is wrong with the place the job folder was to go, and the fix
_START_FIX = {
    errno.EACCES: "permission denied: give a folder you can write with -o",
    errno.EPERM: "permission denied: give a folder you can write with -o",
    errno.EROFS: "the file system is read-only: give a writable folder with -o",
    errno.ENOSPC: "no space left on the device: free some space, or give another -o",
    errno.EDQUOT: "the disk quota is exceeded: free some space, or give another -o",
    errno.ENAMETOOLONG: "the path is too long: give a shorter -o or --job",
    errno.ELOOP: "a symbolic link on the path loops: fix the link, or give another -o",
    errno.ENOTDIR: "a part of the path is a file, not a folder: give another -o",
    errno.EEXIST: "a file (or a dangling link) is where the folder should be: give another -o",
    errno.ENOENT: "a folder on the path is missing (a dangling link?): give another -o",
}


def start_error(url: str, exc: OSError) -> StepscopeError:
    """The one-line error of a job folder that cannot be created (no job was started)."""
    if isinstance(exc, StepscopeError):
        return exc  # a store's own error says it already
    why = _START_FIX.get(exc.errno or 0) or f"{exc.strerror or exc}: give another folder with -o"
    return UsageError(f"cannot create the job folder {quote(url)}: {why}. No job was started.")


def disk_full(store: Store, faults: FaultLog) -> None:
    """Record a full disk under a local job folder (its writes fail, the job goes on)."""
    path = store.local_path()
    try:
        free = shutil.disk_usage(path).free if path is not None else None
    except OSError:
        return
    if free is not None and free < DISK_FULL_BYTES:
        faults.record("disk", f"No space left on device: {free} bytes free under {path}")
