"""How a rank's process ended: ``ranks/rank-<r>.json`` (docs/distributed.md).

Written ``Running`` when the agent starts, then once more when the process
ends: ``Failed`` (an uncaught exception, from ``sys.excepthook``),
``Terminated`` (SIGTERM, e.g. torchrun stopping the survivors of a failed
rank) or ``Exited`` (the interpreter ended normally), with the ``exit_code``
where the agent knows it (``sys.exit(n)`` or a normal end: ``n`` or 0; an uncaught
exception: 1; ``raise SystemExit(n)`` bypasses it and is recorded as 0). A
launcher that died reads it from here (``end_without_launcher``). A process
killed hard (SIGKILL, a segfault) leaves ``Running``: the launcher reports such
ranks as ended without a record.
The launcher reads these files to say which rank on which node failed first.
"""

from __future__ import annotations

import atexit
import sys
import traceback
from types import TracebackType
from typing import NoReturn

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
        self._previous_exit = sys.exit
        self.exit_code = 0

    def install(self) -> None:
        self._write("Running")
        sys.excepthook = self._excepthook
        sys.exit = self._exit
        atexit.register(self.exited)

    def uninstall(self) -> None:
        atexit.unregister(self.exited)
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
        if sys.exit == self._exit:
            sys.exit = self._previous_exit

    def _exit(self, status: object = None) -> NoReturn:
        """``sys.exit``, noting the exit code the interpreter will end with."""
        self.exit_code = 0 if status is None else status if isinstance(status, int) else 1
        self._previous_exit(status)  # type: ignore[arg-type]  # sys.exit takes any object

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
        self.exit_code = 1
        self._write("Failed", error=error, at=at, exit_code=1)

    def terminated(self, signal_name: str) -> None:
        self._write("Terminated", error=f"terminated by {signal_name}")

    def exited(self) -> None:
        if not self.ended:
            self._write("Exited", exit_code=self.exit_code)

    def _write(self, status: str, **detail: str | int | None) -> None:
        self.ended = status != "Running"
        ident = self.agent.ident
        body = {**ident.as_dict(), "status": status, "time": self.agent.clock.now(), **detail}
        try:
            # room kept: its end is written in place on a disk full by then
            self.agent.store.write_json(self.key, body, reserve=1024)
        except Exception as exc:  # the record must never break training or its exit
            self.agent.faults.record("rank-exit", exc)
