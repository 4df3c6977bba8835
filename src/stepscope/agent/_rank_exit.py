"""How a rank's process ended: ``ranks/rank-<r>.json`` (docs/distributed.md).

Written ``Running`` when the agent starts, then once more when the process
ends: ``Failed`` (an uncaught exception, from ``sys.excepthook``),
``Terminated`` (SIGTERM, e.g. torchrun stopping the survivors of a failed
rank) or ``Exited`` (the interpreter ended normally), with the ``exit_code``
where the agent knows it (``sys.exit(n)``, ``raise SystemExit(n)`` or a normal end:
``n`` or 0; an uncaught exception: 1). A launcher that died reads it from here
(``end_without_launcher``). A process
that ends without any of these (``os._exit``, SIGKILL, a segfault) leaves ``Running``:
the launcher, which outlives it, rewrites the record as ``Abrupt`` (launch/_ending.py),
bounding what was lost by the ``flush_s`` the ``Running`` record carries.
The launcher reads these files to say which rank on which node failed first.

``raise SystemExit(n)`` (and ``exit(n)``) pass no hook: the interpreter takes the
code from the exception and clears it before ``atexit`` runs. Between the two, for
a script (``python train.py``), it flushes ``sys.stderr`` with no Python frame left
(CPython's ``flush_io``): our ``flush`` on that stream object looks, then only,
for the exception still held (gc), and for ``python -m`` the runner is wrapped.
A script that replaces ``sys.stderr`` keeps the old behaviour (recorded as 0).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import runpy
import sys
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import NoReturn

from stepscope.agent._agent import Agent
from stepscope.agent._cuda_oom import record_oom
from stepscope.jobfolder import paths

STATUSES = ("Running", "Failed", "Terminated", "Exited")


def exit_code(status: object) -> int:
    """The code the interpreter ends with for ``SystemExit(status)``."""
    return 0 if status is None else int(status) if isinstance(status, int) else 1


def pending_system_exit() -> SystemExit | None:
    """The SystemExit the interpreter is ending with, once the script's frames are
    gone: the newest one not caught on the way (young objects first)."""
    for generation in (0, 1, 2):
        # type(), not isinstance(): an object's own __class__ may run code (torch's
        # deprecated module attributes warn when looked at)
        found = [o for o in gc.get_objects(generation) if issubclass(type(o), SystemExit)]
        kept = [e for e in found if isinstance(e, SystemExit) and _from_main(e.__traceback__)]
        if kept:
            return kept[-1]
    return None


def _from_main(tb: TracebackType | None) -> bool:
    """Not one caught and kept by the script: CPython 3.11 sets ``__traceback__`` only
    where the exception is caught; 3.12 as it is raised (out of ``__main__`` here)."""
    return tb is None or tb.tb_frame.f_globals.get("__name__") == "__main__"


class RankExit:
    """Records the end of one rank's process; every write is behind the fault boundary."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.key = paths.rank_key(agent.ident.rank)
        self.ended = False
        self._previous_hook = sys.excepthook
        self._previous_exit = sys.exit
        self._stderr = sys.stderr
        self._previous_flush: Callable[[], None] | None = None
        self._previous_run_main = runpy._run_module_as_main  # type: ignore[attr-defined]
        self.exit_code = 0

    def install(self) -> None:
        # the flush interval: the launcher's bound on what an abrupt end loses
        self._write("Running", flush_s=self.agent.writer.flush_s)
        sys.excepthook = self._excepthook
        sys.exit = self._exit
        runpy._run_module_as_main = self._run_module_as_main  # type: ignore[attr-defined]
        with contextlib.suppress(AttributeError, TypeError):  # None, or a stream without a dict
            previous = self._stderr.flush
            self._stderr.flush = self._flush  # type: ignore[method-assign]
            self._previous_flush = previous
        atexit.register(self.exited)

    def uninstall(self) -> None:
        atexit.unregister(self.exited)
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
        if sys.exit == self._exit:
            sys.exit = self._previous_exit
        if runpy._run_module_as_main == self._run_module_as_main:  # type: ignore[attr-defined]
            runpy._run_module_as_main = self._previous_run_main  # type: ignore[attr-defined]
        if self._previous_flush is not None:
            with contextlib.suppress(AttributeError):
                del self._stderr.flush
            self._previous_flush = None

    def _exit(self, status: object = None) -> NoReturn:
        """``sys.exit``, noting the exit code the interpreter will end with."""
        self.exit_code = exit_code(status)
        self._previous_exit(status)  # type: ignore[arg-type]  # sys.exit takes any object

    def _flush(self) -> None:
        """``sys.stderr.flush``; called with no Python frame left, the interpreter is
        ending the script: note the code of a SystemExit it still holds."""
        if self._previous_flush is not None:
            self._previous_flush()
        if sys._getframe().f_back is None and not self.ended:
            with contextlib.suppress(Exception):  # never in the way of the exit
                if (pending := pending_system_exit()) is not None:
                    self.exit_code = exit_code(pending.code)

    def _run_module_as_main(self, *args: object, **kwargs: object) -> object:
        """runpy's runner of ``python -m``, noting the code of a SystemExit out of it."""
        try:
            return self._previous_run_main(*args, **kwargs)
        except SystemExit as exc:
            self.exit_code = exit_code(exc.code)
            raise

    def _excepthook(
        self, kind: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        self.failed(exc)
        self._previous_hook(kind, exc, tb)

    def failed(self, exc: BaseException) -> None:
        record_oom(self.agent, exc)  # out of CUDA memory: a fault with the last readings
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

    def end(self, status: str) -> None:
        """The end of a job ``stepscope.init()`` opened (``Exited`` or ``Failed``)."""
        self._write(status, exit_code=self.exit_code)

    def _write(self, status: str, **detail: str | float | None) -> None:
        self.ended = status != "Running"
        ident = self.agent.ident
        body = {**ident.as_dict(), "status": status, "time": self.agent.clock.now(), **detail}
        try:
            # room kept: its end is written in place on a disk full by then
            self.agent.store.write_json(self.key, body, reserve=1024)
        except Exception as exc:  # the record must never break training or its exit
            self.agent.faults.record("rank-exit", exc)
