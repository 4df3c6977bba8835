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

import time
from collections.abc import Callable

from stepscope.jobfolder import folder_trouble
from stepscope.jobfolder._unwritable import DELETED
from stepscope.store import Store

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
        return why if self.lost == DELETED else f"{why} ({show})"
