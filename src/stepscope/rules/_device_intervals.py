"""Time intervals of the device events the kernel rules measure (docs/rules.md,
"Inside the GPU"): their union, what another set covers, and per device the time a
chosen set of events ran alone."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from stepscope.read import DeviceEvent

US = 1e-6  # trace times are microseconds


def merge(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``spans`` as sorted, disjoint intervals."""
    out: list[list[float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


@dataclass(frozen=True)
class Union:
    """Disjoint sorted intervals, with their starts for bisection."""

    spans: list[tuple[float, float]]
    starts: list[float]

    @classmethod
    def of(cls, events: Iterable[DeviceEvent]) -> Union:
        spans = merge((e.start, e.start + e.dur) for e in events)
        return cls(spans, [s for s, _ in spans])

    def covered(self, start: float, end: float) -> float:
        """How much of ``[start, end]`` these intervals cover."""
        i = max(0, bisect_right(self.starts, start) - 1)
        total = 0.0
        while i < len(self.spans) and self.spans[i][0] < end:
            a, b = self.spans[i]
            total += max(0.0, min(b, end) - max(a, start))
            i += 1
        return total

    @property
    def total(self) -> float:
        return sum(b - a for a, b in self.spans)


def exposed(events: list[DeviceEvent], others: list[DeviceEvent]) -> float:
    """Microseconds of ``events`` that no event of ``others`` on another stream covers:
    the part that ran alone (each event judged against the other streams' union)."""
    streams = {e.stream for e in events}
    unions = {s: Union.of(o for o in others if o.stream != s) for s in streams}
    return sum(e.dur - unions[e.stream].covered(e.start, e.start + e.dur) for e in events)


def span(events: Iterable[DeviceEvent]) -> float:
    """Microseconds from the first event's start to the last one's end (0: none)."""
    spans = [(e.start, e.start + e.dur) for e in events]
    return max(b for _, b in spans) - min(a for a, _ in spans) if spans else 0.0


def by_device(events: Iterable[DeviceEvent]) -> dict[int, list[DeviceEvent]]:
    out: dict[int, list[DeviceEvent]] = {}
    for e in events:
        out.setdefault(e.device, []).append(e)
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class Alone:
    """The events of one device that ran alone: ``seconds`` with no other kernel beside
    them on another stream, a ``share`` (%) of the device's active span."""

    device: int
    own: list[DeviceEvent]
    seconds: float
    share: float


def alone_per_device(events: list[DeviceEvent], chosen: list[DeviceEvent]) -> Iterator[Alone]:
    """Per device of ``events`` with some of ``chosen``: the time those ran with no
    kernel outside ``chosen`` on another stream."""
    picked = {id(e) for e in chosen}
    for device, mine in by_device(events).items():
        own = [e for e in chosen if e.device == device]
        if not own:
            continue
        others = [e for e in mine if e.cat == "kernel" and id(e) not in picked]
        alone, active = exposed(own, others) * US, span(mine) * US
        yield Alone(device, own, alone, 100.0 * alone / active if active > 0 else 0.0)
