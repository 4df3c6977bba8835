"""Device time of each step part, from CUDA events: never a device synchronize.

The training thread only records events on the current stream (microseconds,
asynchronous). The writer thread resolves them later: by then the events have
usually completed; if not, waiting on one event blocks only the writer thread
(torch releases the GIL in ``Event.synchronize``), never the training loop.

Not every step is timed: the :class:`DeviceSampler` times one step per
``SAMPLE_PERIOD_S`` of training (every step when steps are longer). A timed step
sends every hook through Python and records six events; on a launch-bound step of
0.8 ms that cost 13% when every step was timed (issue 29, H200). The other steps
run the hooks' C path and have null device columns (docs/format.md); the device
split is a median over the timed steps, which a few hundred give as well as all.
Resolved events go back to a pool (creating a CUDA event is a driver call).
A timed step also takes a reading of the caching allocator's counters when it ends
(agent/_cuda_memory.py), handed to the writer with the step's marks.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, Self

from stepscope.agent._cuda_memory import MemoryReading

if TYPE_CHECKING:
    from stepscope.agent._recorder import StepRecorder


class DeviceEvent(Protocol):
    """What the timer uses of ``torch.cuda.Event`` (tests use a stand-in)."""

    def record(self) -> None: ...
    def synchronize(self) -> None: ...
    def elapsed_time(self, end_event: Self, /) -> float: ...


class EventSource(Protocol):
    """``torch.cuda``, as far as the timer uses it: a source of timing events."""

    def Event(self, enable_timing: bool = ...) -> DeviceEvent: ...


Mark = tuple[str, DeviceEvent, DeviceEvent]  # (part, start event, end event)
Timed = Mark | MemoryReading  # what a timed step hands the writer: its marks, a reading
PARTS = ("forward", "backward", "optimizer")
SAMPLE_PERIOD_S = 0.05  # at most one timed step per 50 ms of training (docs/gpu.md)
NO_EVAL = 1 << 62  # the sampler never asks for evaluation boundaries
# Events the writer resolved, for the timers to record again, one pool per kind of
# event (torch's, a test's stand-in); appends and pops from two threads: a deque's are
# atomic. Bounded: six a timed step, a few steps pending.
_FREE: dict[type, deque[DeviceEvent]] = {}


def _pool(kind: type) -> deque[DeviceEvent]:
    return _FREE.setdefault(kind, deque(maxlen=256))


class DeviceTimer:
    """Pairs of CUDA events per step part, collected per step."""

    def __init__(
        self, cuda: EventSource, memory: Callable[[], MemoryReading | None] | None = None
    ) -> None:
        self.cuda = cuda
        self.memory = memory  # the allocator's counters at the step's end (None: not read)
        self._open: dict[str, DeviceEvent] = {}
        self._marks: list[Timed] = []
        self._pool: deque[DeviceEvent] | None = None  # known once an event was made

    def _event(self) -> DeviceEvent:
        pool = self._pool
        if pool:
            ev = pool.pop()
            try:
                ev.record()
                return ev
            except RuntimeError:  # made on another device than the current one
                pool.clear()
        ev = self.cuda.Event(enable_timing=True)
        ev.record()
        if pool is None:
            self._pool = _pool(type(ev))
        return ev

    def start(self, part: str) -> None:
        self._open[part] = self._event()

    def end(self, part: str) -> None:
        start = self._open.pop(part, None)
        if start is not None:
            self._marks.append((part, start, self._event()))

    def take(self) -> list[Timed]:
        """The marks of the step that just ended and the allocator's counters now
        (handed to the writer)."""
        marks, self._marks = self._marks, []
        reading = self.memory() if self.memory is not None else None
        if reading is not None:
            marks.append(reading)
        return marks


def memory_of(marks: list[Timed] | None) -> MemoryReading | None:
    """The allocator reading among a step's marks (None: not read at that step)."""
    return next((m for m in marks or () if isinstance(m, MemoryReading)), None)


def resolve(marks: list[Timed] | None) -> dict[str, float | None]:
    """Seconds of device time per part (None for parts without marks); the events
    go back to the pool."""
    totals: dict[str, float | None] = dict.fromkeys(PARTS)
    for mark in marks or ():
        if isinstance(mark, MemoryReading):
            continue
        part, start, end = mark
        end.synchronize()  # writer thread only; a no-op once the event completed
        totals[part] = (totals[part] or 0.0) + start.elapsed_time(end) / 1000.0
        _pool(type(start)).extend((start, end))
    return totals


class DeviceSampler:
    """A recorder listener that lends the recorder its timer for one step in every
    ``period_s`` of training, and takes it back after that step.

    Called at train boundaries only when due (the recorder compares step numbers
    in C), so the untimed steps between cost nothing. The stride, in steps, comes
    from the host's step time measured between two calls.
    """

    def __init__(self, rec: StepRecorder, timer: DeviceTimer, period_s: float | None = None):
        self.rec, self.timer = rec, timer
        # SAMPLE_PERIOD_S read here, not as a default: benchmarks set it
        self.period_s = SAMPLE_PERIOD_S if period_s is None else period_s
        self._due = 0  # the train step from which it wants to be called again
        self._anchor: tuple[int, float] | None = None  # (step, perf time): last timed end

    def attach(self) -> None:
        """Time the step under way, and be called at its end."""
        self.rec.device = self.timer
        self.rec.listen(self)

    def detach(self) -> None:
        self.rec.unlisten(self)
        if self.rec.device is self.timer:
            self.rec.device = None

    def __call__(self, phase: str, step: int, t: float) -> tuple[int, int]:
        nxt = step + 1
        if phase != "train" or nxt < self._due:  # another listener's boundary
            return self._due, NO_EVAL
        if self.rec.device is not self.timer:  # the step about to start is timed
            self.rec.device = self.timer
            self._due = nxt + 1
            return self._due, NO_EVAL
        stride = self._stride(step, t)  # a timed step ended
        if stride > 1:
            self.rec.device = None
            self._due = nxt + stride - 1  # called before step ``step + stride``
        else:
            self._due = nxt + 1
        return self._due, NO_EVAL

    def _stride(self, step: int, t: float) -> int:
        """Steps per period, from the host's time since the last timed step ended
        (1 until known)."""
        anchor, self._anchor = self._anchor, (step, t)
        if anchor is None or step <= anchor[0] or t <= anchor[1]:
            return 1
        per_step = (t - anchor[1]) / (step - anchor[0])
        # (1 - 1e-9): a period of exactly k steps is k steps, whatever the rounding
        return max(1, min(100_000, math.ceil(self.period_s / per_step * (1 - 1e-9))))
