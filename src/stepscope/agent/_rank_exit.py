"""How a rank's process ended: ``ranks/rank-<r>.json`` (docs/distributed.md).

Written ``Running`` when the agent starts, then once more when the process
ends: ``Failed`` (an uncaught exception, from ``sys.excepthook``),
``Terminated`` (SIGTERM, e.g. torchrun stopping the survivors of a failed
rank) or ``Exited`` (the interpreter ended normally; the exit code is
torchrun's to know). A process killed hard (SIGKILL, a segfault) leaves
``Running``: the launcher reports such ranks as ended without a record.
The launcher reads these files to say which rank on which node failed first.
"""

from __future__ import annotations

import atexit
import sys
import traceback
from types import TracebackType

from stepscope.agent._agent import Agent
from stepscope.jobfolder import paths

STATUSES = ("Running", "Failed", "Terminated", "Exited")


class RankExit:
    """Records the end of one rank's process; every write is behind the fault boundary."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.key = paths.rank_key(agent.ident.rank)
        self.ended = False
        self._previous_hook = sys.excepthook

    def install(self) -> None:
        self._write("Running")
        sys.excepthook = self._excepthook
        atexit.register(self.exited)

    def uninstall(self) -> None:
        atexit.unregister(self.exited)
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook

    def _excepthook(
        self, kind: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        self.failed(exc)
        self._previous_hook(kind, exc, tb)

    def failed(self, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"
        where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        at = f"{where[0].filename}:{where[0].lineno}" if where else None
        self.agent.writer.event("rank_failed", error=error, at=at)
        self._write("Failed", error=error, at=at)

    def terminated(self, signal_name: str) -> None:
        self._write("Terminated", error=f"terminated by {signal_name}")

    def exited(self) -> None:
        if not self.ended:
            self._write("Exited")

    def _write(self, status: str, **detail: str | None) -> None:
        self.ended = status != "Running"
        ident = self.agent.ident
        body = {**ident.as_dict(), "status": status, "time": self.agent.clock.now(), **detail}
        try:
            self.agent.store.write_json(self.key, body)
        except Exception as exc:  # the record must never break training or its exit
            self.agent.faults.record("rank-exit", exc)
