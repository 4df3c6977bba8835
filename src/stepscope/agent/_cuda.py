"""Device time of each step part, from CUDA events: never a device synchronize.

The training thread only records events on the current stream (microseconds,
asynchronous). The writer thread resolves them later: by then the events have
usually completed; if not, waiting on one event blocks only the writer thread
(torch releases the GIL in ``Event.synchronize``), never the training loop.
"""

from __future__ import annotations

from typing import Protocol, Self


class DeviceEvent(Protocol):
    """What the timer uses of ``torch.cuda.Event`` (tests use a stand-in)."""

    def record(self) -> None: ...
    def synchronize(self) -> None: ...
    def elapsed_time(self, end_event: Self, /) -> float: ...


class EventSource(Protocol):
    """``torch.cuda``, as far as the timer uses it: a source of timing events."""

    def Event(self, enable_timing: bool = ...) -> DeviceEvent: ...


Mark = tuple[str, DeviceEvent, DeviceEvent]  # (part, start event, end event)
PARTS = ("forward", "backward", "optimizer")


class DeviceTimer:
    """Pairs of CUDA events per step part, collected per step."""

    def __init__(self, cuda: EventSource) -> None:
        self.cuda = cuda
        self._open: dict[str, DeviceEvent] = {}
        self._marks: list[Mark] = []

    def _event(self) -> DeviceEvent:
        ev = self.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def start(self, part: str) -> None:
        self._open[part] = self._event()

    def end(self, part: str) -> None:
        start = self._open.pop(part, None)
        if start is not None:
            self._marks.append((part, start, self._event()))

    def take(self) -> list[Mark]:
        """The marks of the step that just ended (handed to the writer)."""
        marks, self._marks = self._marks, []
        return marks


def resolve(marks: list[Mark] | None) -> dict[str, float | None]:
    """Seconds of device time per part (None for parts without marks)."""
    totals: dict[str, float | None] = dict.fromkeys(PARTS)
    for part, start, end in marks or ():
        end.synchronize()  # writer thread only; a no-op once the event completed
        totals[part] = (totals[part] or 0.0) + start.elapsed_time(end) / 1000.0
    return totals
