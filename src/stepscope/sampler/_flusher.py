"""The sampler's flush thread: every store call of the sampler but its last.

Sampling only reads counters and adds a row to the bounded buffer
(:class:`~stepscope.sampler._output.RowBuffer`); this thread stores the rows every
``flush_s``, polls ``control/`` for interval requests, writes the fault and gap
records, the node's facts and (once the launcher is gone) its heartbeat. A store
that blocks (an object store that does not answer: each call waits for its
timeouts) then holds back only this thread: sampling goes on, and the rows are
stored when the store is back. A store call that blocks longer than ``STALL_S``
and failed (or any over ``SLOW_S``) is recorded in
``faults/sampler-store-<node>-<pid>.json`` with its duration.

:meth:`Flusher.stop` ends the thread; the sampler then makes its last flush on
its own thread. A thread stuck in a store call is waited for up to
``JOIN_TIMEOUT_S`` (longer than one call's timeouts: S3 connect 3 s and read
15 s, 3 attempts), after which the sampler ends without it (a daemon thread).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from stepscope.jobfolder import FaultLog

STALL_S = 1.0  # a store call that failed after this long is recorded as a stall
SLOW_S = 10.0  # and one this long even if it worked (a busy node's local flush can
# take a second: no fault for it)
JOIN_TIMEOUT_S = 60.0
COMPONENT = "sampler-store"
ERROR_CHARS = 160


class Stalls:
    """Store calls of the flush thread that blocked: count, total and longest."""

    def __init__(self, log: FaultLog) -> None:
        self.log = log
        self.total_s = self.longest_s = 0.0
        self.count = 0

    def took(
        self, what: str, began_wall: float, took_s: float, error: str | None, failed: bool
    ) -> None:
        """``what`` began at ``began_wall``, took ``took_s`` and ``failed`` or not:
        recorded if a stall."""
        if took_s <= (STALL_S if failed else SLOW_S):
            return
        self.count += 1
        self.total_s += took_s
        self.longest_s = max(self.longest_s, took_s)
        why = f"; last store error: {error[:ERROR_CHARS]}" if error else ""
        text = (
            f"{what} blocked the sampler's flush thread {took_s:.1f} s (from "
            f"{began_wall:.1f}); {self.count} stall(s), {self.total_s:.1f} s in all, "
            f"longest {self.longest_s:.1f} s; sampling went on{why}"
        )
        self.log.record(COMPONENT, text, blocked_seconds=round(self.total_s, 3))


class Flusher:
    """A thread that runs ``first`` once, then ``flush`` every ``every_s`` and ``poll``
    when it is due."""

    def __init__(
        self,
        flush: Callable[[], None],
        every_s: float,
        poll: Callable[[], None],
        poll_due: Callable[[], bool],
        first: Callable[[], None],
    ) -> None:
        self._flush, self._every_s, self._first = flush, every_s, first
        self._poll, self._poll_due = poll, poll_due
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepscope-sampler-flush")
        self._thread.daemon = True  # a store call stuck past JOIN_TIMEOUT_S never holds exit

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = JOIN_TIMEOUT_S) -> bool:
        """End the thread after its current call; False if it did not end in time."""
        self._stopping.set()
        if self._thread.ident is None:
            return True  # never started
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        self._first()  # the node's facts, at once
        due = time.monotonic() + self._every_s
        while not self._stopping.is_set():
            if self._poll_due():
                self._poll()
            if time.monotonic() >= due:
                self._flush()
                due = time.monotonic() + self._every_s
            self._stopping.wait(min(max(due - time.monotonic(), 0.0), 0.25))
