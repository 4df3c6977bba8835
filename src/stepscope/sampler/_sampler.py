"""The sampler's loop: :class:`Sampler`, run by :mod:`stepscope.sampler.main` (the
process, its command line and signals; its docstring says what the loop does).

It samples on a fixed schedule (:func:`next_tick`) into a bounded buffer
(:class:`._output.RowBuffer`); a thread of its own (:mod:`._flusher`) makes every
store call while it runs, so a store that blocks never stops the sampling. It is
the fault boundary (:meth:`Sampler._guard`).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import sys
import time
from collections.abc import Callable

from stepscope.jobfolder import FaultLog, paths
from stepscope.process import ExitWatch, ProgressWriter
from stepscope.sampler._control import IntervalRequests
from stepscope.sampler._flusher import Flusher, Stalls
from stepscope.sampler._gaps import GapWatch, stored_until
from stepscope.sampler._nvml import Gpus, Row
from stepscope.sampler._orphan import Orphan
from stepscope.sampler._others import OthersStream
from stepscope.sampler._output import MAX_BUFFER_ROWS, Faults, RowBuffer, node_facts
from stepscope.sampler._probe import SystemProbe, validate_interval_ms
from stepscope.store import SegmentWriter, Store

FLUSH_S = 2.0
PARENT_EXITED = "parent process exited"
LIVENESS_CHECK_S = 1.0  # how often the watched and parent processes are checked at least
MIN_FINAL_GAP_S = 0.05  # CPU time is counted in 10 ms ticks: no rates over less than this


def next_tick(tick: float, now: float, interval_s: float) -> float:
    """The first tick of the grid ``tick + k * interval_s`` after ``now``."""
    behind = max(now - tick, 0.0)
    return tick + interval_s * (math.floor(behind / interval_s) + 1)


class Sampler:
    """Samples a node's system metrics into a job folder until told or bound to stop."""

    def __init__(
        self,
        store: Store,
        node: str,
        *,
        interval_ms: int = 500,
        watch_pid: int | None = None,
        parent_pid: int | None = None,
        flush_s: float = FLUSH_S,
        max_buffer_rows: int = MAX_BUFFER_ROWS,
        probe: SystemProbe | None = None,
        clock_offset_s: float | None = 0.0,
        clock_skew_s: float = 0.0,
        timeline_s: float | None = None,
        gap: tuple[float, str] | None = None,
        progress: ProgressWriter | None = None,
    ) -> None:
        self.store, self.node = store, node
        # Its times (samples, faults): the job's timeline (the launcher's monotonic offset,
        # ``timeline_s``; None: its own wall read), plus the node's offset (None: not
        # measured, times stay on this node's clock); skew: tests only, as the agent's.
        self.clock_offset_s = clock_offset_s
        local = time.monotonic() + timeline_s if timeline_s is not None else time.time()
        self._wall0 = local + clock_skew_s + (clock_offset_s or 0.0)
        self._mono0 = time.monotonic()
        self.flush_s = max(flush_s, store.min_interval_s)  # object stores: fewer requests
        self.interval_ms = validate_interval_ms(interval_ms)
        self.probe = probe or SystemProbe(watch_pid, Gpus.open())
        # The watched process and the launcher: their pidfds wake the sampler's sleep.
        self._exits = ExitWatch({"watched process exited": watch_pid, PARENT_EXITED: parent_pid})
        self._writer = SegmentWriter(store, paths.system_stream(node))
        # others/<node>/, every few s; the parent (a launcher) and its helpers are ours
        self.others = OthersStream(store, node, watch_pid, parent_pid)
        self.faults = Faults(store, node, self.now)
        self._pending = RowBuffer(max_buffer_rows, self.faults)
        self.log = FaultLog(store, node, os.getpid(), wall=self.now)
        self.stalls = Stalls(self.log)
        self.gaps, self.orphan = GapWatch(self.log), Orphan(store, node, self.log)
        self._watching = watch_pid is not None
        # the launcher's watch on this loop (hung?): a beat per wake-up, at least 1/s
        self.progress = progress or ProgressWriter(None)
        if gap is not None:  # restarted: the gap from what the dead sampler stored
            self.gaps.restarted(stored_until(store, node, gap[0]), gap[1])
        self.requests = IntervalRequests(store, node)  # live interval changes (control/)
        self._flusher = Flusher(  # a late lookup of flush: benchmarks/sampler.py times it
            lambda: self.flush(), self.flush_s, self._take_requests, self.requests.due, self._first
        )
        self._tick: float | None = None  # monotonic time of the last tick
        self._sampled, self.samples = -math.inf, 0
        self._node_written = self._stopped = self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def now(self) -> float:
        """The current time on the samples' clock (the job's timeline, aligned)."""
        return self._wall0 + (time.monotonic() - self._mono0)

    def set_interval(self, ms: int) -> None:
        """Change the interval (validated); the next tick is the last one plus ``ms``."""
        self.interval_ms = validate_interval_ms(ms)
        self._node_written = False  # nodes/<node>.json says the interval in force
        self._wake()

    def stop(self) -> None:
        """End :meth:`run` (safe from a signal handler and from other threads)."""
        self._stopped = True
        self._wake()

    def run(self) -> str:
        """Sample until stopped or a watched process ends; returns why it ended."""
        self._flusher.start()
        try:
            while (reason := self._sleep()) is None:
                self._guard(self.sample)
            # when the watched process ended (its pidfd woke us), on the samples' clock
            ended = self.now()
            if time.monotonic() - self._sampled >= MIN_FINAL_GAP_S:
                self._guard(self.sample)  # the state at the end, unless the last one is it
        finally:
            stopped = self._flusher.stop()
        if stopped:
            self.flush(final=True)
        else:  # stuck in a store call: a second flush beside it would race it
            print(
                f"stepscope: sampler: the store did not answer the flush thread; "
                f"{len(self._pending)} sample(s) not stored",
                file=sys.stderr,
                flush=True,
            )
        self.orphan.end(ended)
        self.close()
        return reason

    def flush(self, final: bool = False) -> None:
        """Store buffered rows (and what failed before); faults are caught and recorded.

        ``final``: the last flush tries the store even while a retry is not due.
        Run by the flush thread while :meth:`run` samples (and by it at the end).
        """
        began, wall, errors = time.monotonic(), self.now(), self.faults.doc["count"]
        if not self._node_written:
            self._guard(self._write_node)
        stored = self._guard(lambda: self._pending.store(self._writer, final))
        if stored and self._pending.last_stored is not None:  # written by the next beat
            self.progress.mark = self._pending.last_stored
        self._guard(lambda: self.others.flush(final))
        span = self._pending.dropped_span() if stored or final else None
        if span is not None:  # recorded once the store is back: one gap per outage
            self.gaps.dropped(span, self._pending.max_rows, self.faults.doc.get("error"))
        self.gaps.save()
        self.faults.save()
        self.orphan.beat()
        error, failed = self.faults.doc.get("error"), self.faults.doc["count"] > errors
        self.stalls.took("a flush", wall, time.monotonic() - began, error, failed)
        self.log.flush()

    def _first(self) -> None:
        self._guard(self._write_node)

    def _take_requests(self) -> None:
        """Apply the ``config`` requests in ``control/`` (the flush thread, once a second)."""
        began, wall = time.monotonic(), self.now()
        ok = self._guard(lambda: self.requests.take(self))
        took, error = time.monotonic() - began, self.faults.doc.get("error")
        self.stalls.took("reading control requests", wall, took, error, not ok)

    def close(self) -> None:
        """Release NVML and the wake-up pipe (:meth:`run` does it on its way out)."""
        if not self._closed:
            self._flusher.stop()
            self._closed = True
            if self.probe.gpus is not None:
                self.probe.gpus.close()
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._exits.close()

    def _guard(self, action: Callable[[], None]) -> bool:
        """The fault boundary: nothing raised while sampling or storing stops the sampler.
        True if ``action`` went through."""
        return self.faults.guard(action)

    def sample(self) -> None:
        """Take one sample now into the buffer (:meth:`run` calls it on schedule)."""
        self._sampled = mono = time.monotonic()
        wall = self._wall0 + (mono - self._mono0)
        row: Row = {"time": wall, "node": self.node}
        row["interval_ms"] = self.interval_ms
        row.update(self.probe.read(mono))
        row["own_cpu"] = self.others.scanner.own_cpu(mono)
        row |= self.others.sample(mono, wall, self.interval_ms / 1e3)  # a scan, if due
        self._pending.add(row)
        self.samples += 1
        self.gaps.sampled(wall, self.interval_ms / 1e3)

    def _write_node(self) -> None:
        self.store.write_json(paths.node_key(self.node), node_facts(self))
        self._node_written = True

    def _sleep(self) -> str | None:
        """Wait for the next tick; the reason to end instead, if there is one."""
        due = self._due()
        while (reason := self._end_reason()) is None:
            self.progress.beat()
            left = due - time.monotonic()
            if left <= 0:
                self._tick = due
                return None
            if self._wait(min(left, LIVENESS_CHECK_S)):
                due = self._due()  # the interval may have changed
        return reason

    def _due(self) -> float:
        now = time.monotonic()
        return now if self._tick is None else next_tick(self._tick, now, self.interval_ms / 1e3)

    def _end_reason(self) -> str | None:
        if self._stopped:
            return "stopped"
        ended = self._exits.ended()
        if ended == PARENT_EXITED and self._watching:  # the training may still run
            self._exits.forget(ended)
            self.orphan.begin()
            return self._exits.ended()
        return ended

    def _wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` (less if a watched process ends); True if woken by
        stop() or set_interval()."""
        # A pipe, not a threading.Event: Event.set() from a signal handler can deadlock
        # on the Event's own lock, while os.write is safe anywhere.
        ready, _, _ = select.select([self._wake_r, *self._exits.fds], [], [], timeout)
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)
        return self._wake_r in ready

    def _wake(self) -> None:
        if not self._closed:
            with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
                os.write(self._wake_w, b"!")
