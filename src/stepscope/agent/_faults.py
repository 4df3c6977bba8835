"""The agent's single fault boundary.

Everything stepscope does inside a training process runs behind a
:class:`FaultBoundary`: an exception is caught, logged once per component,
counted, and recorded in the job's ``faults/`` folder (best effort: the store
may be the very thing that failed). Training never sees it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from stepscope.jobfolder import paths
from stepscope.store import Store


@dataclass
class _Fault:
    first_time: float
    error: str
    count: int = 0
    detail: str = ""


@dataclass
class FaultBoundary:
    """Catches, logs once, records. ``identity`` goes into every fault file."""

    store: Store | None
    identity: Mapping[str, int | str]  # Identity.as_dict(): rank, local_rank, node, pid
    faults: dict[str, _Fault] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

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
        with self._lock:
            fault = self.faults.get(component)
            first = fault is None
            if fault is None:
                fault = self.faults[component] = _Fault(time.time(), error)
                fault.detail = "".join(traceback.format_exception(exc, limit=6))
            fault.count += 1
            fault.error = error
        if first:
            print(
                f"stepscope: {component} failed: {error} (training continues; "
                "recorded in the job's faults/)",
                file=sys.stderr,
                flush=True,
            )
        self._write(component, fault)

    def _write(self, component: str, fault: _Fault) -> None:
        if self.store is None:
            return
        pid = self.identity.get("pid", 0)
        key = paths.fault_key(component, str(self.identity.get("node", "node")), int(pid))
        body = {
            "component": component,
            "time": time.time(),
            "first_time": fault.first_time,
            "error": fault.error,
            "count": fault.count,
            "traceback": fault.detail,
            **self.identity,
        }
        with contextlib.suppress(Exception):
            self.store.write_json(key, body)
