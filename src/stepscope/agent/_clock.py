"""The agent's clock: the job's timeline, aligned to the job's reference clock.

Every time the agent writes (steps, events, tensor rows, fault records, its rank's
record) comes from :class:`Clock`: the job's timeline on this node (the launcher's
``JobClock``: the wall clock read once when the job started plus the monotonic time
since, job.json's ``monotonic_offset_s``), plus the node's offset to the reference
clock. A step of the wall clock (an NTP correction) during the job, even between the
launcher's start and the agent's, moves no row (docs/format.md, "One clock").
"""

from __future__ import annotations

import time


class Clock:
    """Times on the job's timeline, from a monotonic clock: never jumps.

    ``timeline_s`` is the job clock's monotonic offset on this node (the launcher's,
    or ``init()``'s job.json); None, for an agent without one, reads the wall clock
    once, now. ``offset_s`` is the node's measured correction against the job's
    reference clock (docs/distributed.md). ``skew_s`` exists for tests only: it makes
    this node's clock wrong by a known amount (the launcher measures the same skewed
    clock, so the offset cancels it).
    """

    def __init__(
        self, offset_s: float = 0.0, skew_s: float = 0.0, timeline_s: float | None = None
    ) -> None:
        self.offset_s, self.skew_s = offset_s, skew_s
        self.perf0 = time.perf_counter()  # CLOCK_MONOTONIC, as the job clock's
        local = time.monotonic() + timeline_s if timeline_s is not None else time.time()
        self.wall0 = local + skew_s + offset_s

    def wall(self, perf: float) -> float:
        """A ``time.perf_counter()`` reading on the job's timeline."""
        return self.wall0 + (perf - self.perf0)

    def now(self) -> float:
        """The current time on the job's timeline (the reference clock)."""
        return self.wall(time.perf_counter())

    def aligned(self, local_wall: float) -> float:
        """A time read from this node's wall clock (``time.time()``, a process's start
        time) on the job's timeline: less the wall clock's difference to it now, so a
        reading taken after a step of the wall clock lands where it happened."""
        return local_wall + (self.now() - time.time())
