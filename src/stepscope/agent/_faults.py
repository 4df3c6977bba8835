"""The agent's single fault boundary.

Everything stepscope does inside a training process runs behind a
:class:`FaultBoundary`: an exception is caught, logged once per component,
counted, and recorded in the job's ``faults/`` folder (best effort: the store
may be the very thing that failed). Training never sees it.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from stepscope.jobfolder import FaultLog, folder_trouble
from stepscope.store import Store


@dataclass
class FaultBoundary:
    """Catches, logs once, records. ``identity`` goes into every fault file."""

    store: Store | None
    identity: Mapping[str, int | str]  # Identity.as_dict(): rank, local_rank, node, pid
    # says that the job folder was deleted or made read-only (without a launcher,
    # which otherwise says it once for every writer)
    tells_folder: bool = False
    # the times of its records: the agent's clock (the job's timeline), not a stepped wall
    wall: Callable[[], float] = field(default=time.time)
    log: FaultLog = field(init=False)
    _folder_told: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        # the job folder's one writer of fault records (faults/<component>-<node>-<pid>)
        node, pid = str(self.identity.get("node", "node")), int(self.identity.get("pid", 0))
        self.log = FaultLog(self.store, node, pid, dict(self.identity), wall=self.wall)

    def record(self, component: str, exc: BaseException) -> None:
        """Note a fault of ``component``; never raises."""
        with contextlib.suppress(Exception):
            self._record(component, exc)

    def call(self, component: str, fn: Callable[..., object], *args: object) -> None:
        """``fn(*args)``, its exception recorded as a fault of ``component``."""
        try:
            fn(*args)
        except Exception as exc:
            self.record(component, exc)

    def _record(self, component: str, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"
        if component in self.log.records:
            self.log.record(component, error)
            return
        detail = "".join(traceback.format_exception(exc, limit=6))  # the first one only
        self.log.record(component, error, traceback=detail)
        trouble = folder_trouble(self.store, exc) if self.store is not None else None
        if trouble is not None:  # no record can be written: said once, by one writer
            if self.tells_folder and not self._folder_told and self.store is not None:
                _say(f"the job folder {self.store.url} {trouble}: nothing more is recorded")
            self._folder_told = True
            return
        kept = "not recorded" if component in self.log.unsaved else "recorded in the job's faults/"
        _say(f"{component} failed: {error} (training continues; {kept})")


def _say(msg: str) -> None:
    print(f"stepscope: {msg}", file=sys.stderr, flush=True)
