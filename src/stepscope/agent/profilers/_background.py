"""The agent's profiling thread: runs the windows' exports off the training thread."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable


class Background:
    """The agent's profiling thread: runs the windows' exports, off the training thread.

    It sleeps until a job comes (no timed wake-up: every wake-up of an agent thread
    costs the training thread a GIL handoff), unless given a poll to run on a
    schedule (``poll_every``: on object storage, where the writer's thread does not
    poll).
    """

    def __init__(self, guard: Callable[[Exception], None]) -> None:
        self.guard = guard
        self.poll: Callable[[], None] | None = None
        self.poll_s = 1.0
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="stepscope-profiling", daemon=True)
        self._stopping = False

    def poll_every(self, poll: Callable[[], None], seconds: float) -> None:
        """Call ``poll`` every ``seconds`` on the thread (set before ``start``)."""
        self.poll, self.poll_s = poll, seconds

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the thread (inline once the thread is gone)."""
        if self._thread.is_alive() and not self._stopping:
            self._jobs.put(job)
        else:
            self._call(job)

    def stop(self, timeout: float = 120.0) -> None:
        """Finish every queued job, then end the thread."""
        self._stopping = True
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout)
        while not self._jobs.empty():  # never started, or timed out: finish here
            job = self._jobs.get_nowait()
            if job is not None:
                self._call(job)

    def _run(self) -> None:
        next_poll = time.monotonic()
        while True:
            wait = None  # no poll: sleep until a job comes
            if self.poll is not None:
                wait = next_poll - time.monotonic()
                if wait <= 0:
                    if not self._stopping:
                        self._call(self.poll)
                    next_poll = time.monotonic() + self.poll_s
                    continue
            try:
                job = self._jobs.get(timeout=wait)
            except queue.Empty:
                continue
            if job is None:
                return
            self._call(job)

    def _call(self, job: Callable[[], None]) -> None:
        try:
            job()
        except Exception as exc:
            self.guard(exc)
