"""The job's one clock: the wall clock read once at the start, then a monotonic clock.

A wall clock can step (an NTP correction, a hand-set date) while a job runs; a
monotonic clock cannot. Every time the launcher records (``start_time``,
``end_time``, its schedules, "after N s") is on the job's timeline: the wall clock
at the start plus the monotonic time elapsed since, as the agent's and the
sampler's times already are (docs/format.md, "Parquet"). A step of the wall clock
during the run then changes no duration; :meth:`JobClock.step` notices one so that
it is recorded (``faults/clock-step-<node>-<pid>.json``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

#: A change of the wall clock against the monotonic one larger than this is a step
#: (recorded as a fault); smaller ones are the drift NTP slews away.
STEP_FAULT_S = 5.0


class JobClock:
    """The job's timeline on this node: ``monotonic() + offset_s``.

    ``offset_s`` (``monotonic_offset_s`` in job.json) is the wall clock minus the
    monotonic clock at the start; ``wall`` and ``mono`` are injectable for tests.
    """

    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self._wall, self._mono = wall, mono
        self.mono0 = mono()
        self.start = wall()
        self.offset_s = self.start - self.mono0
        self.skew_s = 0.0  # the wall clock's steps noticed so far, summed

    def now(self) -> float:
        """The current time on the job's timeline (unix seconds, never steps)."""
        return self._mono() + self.offset_s

    def elapsed(self) -> float:
        """Seconds since the start, from the monotonic clock."""
        return self._mono() - self.mono0

    def step(self) -> float | None:
        """The wall clock's step since the last one noticed (seconds, signed), or None
        when it moved with the monotonic clock (within :data:`STEP_FAULT_S`)."""
        skew = self._wall() - self.now()
        change = skew - self.skew_s
        if abs(change) <= STEP_FAULT_S:
            return None
        self.skew_s = skew
        return change


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def job_seconds(meta: Mapping[str, object], now: float) -> float | None:
    """How long a job ran (so far): its ``duration_s`` (measured on a monotonic clock
    by the launcher), else its end (or ``now``) minus its start; never negative (a
    running job's ``now`` is the reader's wall clock, which may have stepped back)."""
    if (measured := _finite(meta.get("duration_s"))) is not None:
        return max(0.0, measured)
    start, end = _finite(meta.get("start_time")), _finite(meta.get("end_time"))
    if start is None:
        return None
    return max(0.0, (end if end is not None else now) - start)


def job_timeline(meta: Mapping[str, object]) -> Callable[[], float]:
    """A clock on the job's timeline for a process on the launcher's node: the
    monotonic clock plus job.json's ``monotonic_offset_s``; the wall clock for a
    job that did not record one (older, imported)."""
    offset = _finite(meta.get("monotonic_offset_s"))
    if offset is None:
        return time.time
    return lambda: time.monotonic() + offset
