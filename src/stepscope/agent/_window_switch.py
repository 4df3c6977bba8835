"""Starting and stopping a window's profiler, and handing its export to the background.

The PyTorch profiler may not start or stop inside ``optimizer.step()`` (restarting
it there corrupted memory): outside the moments known to be safe (the agent's
attach, its stop), a detailed window's start and stop wait for the next data fetch
or forward, where the recorder runs them (``StepRecorder.deferred``). A stopped
profiler's export runs on the background thread (``submit``); ``exporting`` counts
the exports still running, whose steps the scheduler marks ``profiled``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder
from stepscope.agent._window_state import WindowRecord
from stepscope.agent.profilers import ArtifactSink, Finish, ProfileHookBusy, WindowProfiler


class ProfilerSwitch:
    """Starts and stops the profilers of one rank's windows (see the module docstring)."""

    def __init__(
        self,
        recorder: StepRecorder,
        sink: ArtifactSink,
        event: Callable[..., None],
        faults: FaultBoundary,
    ) -> None:
        self.rec, self.sink, self.event, self.faults = recorder, sink, event, faults
        self.submit: Callable[[Callable[[], None]], None] = lambda job: job()
        self.safe = False  # True where the PyTorch profiler may start and stop at once
        self.exporting = 0  # windows whose export runs on the background thread
        self._deferred: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()

    def guarded(self, fn: Callable[[], None]) -> None:
        """Run ``fn``; its failure is a fault of profiling, never training's."""
        try:
            fn()
        except Exception as exc:
            self.faults.record("profiling", exc)

    def start(self, profiler: WindowProfiler, detailed: bool) -> str | None:
        """Start ``profiler`` (a detailed one later where it is not safe now); why it
        could not start, or None."""
        if detailed and not self.safe:
            self._later(profiler.start)
            return None
        try:
            profiler.start()
        except ProfileHookBusy as exc:
            return str(exc)
        except Exception as exc:
            self.faults.record("profiling", exc)
            return f"the profiler failed to start: {type(exc).__name__}: {exc}"
        return None

    def stop(
        self, profiler: WindowProfiler, detailed: bool, base: str, record: WindowRecord
    ) -> None:
        """Stop ``profiler`` (a detailed one later where it is not safe now), then export
        its window on the background thread under ``base``."""
        with self._lock:
            self.exporting += 1
        if detailed and not self.safe:
            self._later(lambda: self._stop_and_submit(profiler, base, record))
        else:
            self._stop_and_submit(profiler, base, record)

    def run_deferred(self) -> None:
        """The starts and stops left for a safe moment (the recorder calls it)."""
        while self._deferred:
            self.guarded(self._deferred.popleft())

    def _later(self, op: Callable[[], None]) -> None:
        """Run ``op`` at the next data fetch or forward, outside ``optimizer.step()``."""
        self._deferred.append(op)
        self.rec.deferred = self.run_deferred

    def _stop_and_submit(self, profiler: WindowProfiler, base: str, record: WindowRecord) -> None:
        try:
            finish = profiler.stop()
        except Exception:
            with self._lock:
                self.exporting -= 1
            self.rec.poke = True
            raise
        self.submit(lambda: self._finish(finish, base, record))

    def _finish(self, finish: Finish, base: str, record: WindowRecord) -> None:
        """Background thread: export, then the window's record (docs/format.md)."""
        try:
            doc = record.to_dict(finish(self.sink, base))
            self.sink.write_json(f"{base}.window.json", doc)
            self.event("profiling_window", **doc)
        finally:
            with self._lock:
                self.exporting -= 1
            # After the decrement: the boundary that sees the poke sees the export done
            # and takes the mark off the steps after it.
            self.rec.poke = True
