"""Kernel breakdown of one PyTorch profiler trace (docs/profiling.md, "Kernel breakdown").

Pure functions of a parsed :class:`~stepscope.read._trace.Trace`: device time by kind,
the top kernels with the host operator that launched them, per device the share of
its active span the device was busy and the idle gaps, and the copies' bandwidth.
A trace without device activity gives :class:`NoKernels`, never zeros.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from itertools import pairwise

from stepscope.read._kernel_kinds import KINDS, kind_of
from stepscope.read._trace import DeviceEvent, HostEvent, Trace

US = 1e-6  # trace times are microseconds; results are seconds
NO_KERNELS = "no kernel events: recorded without CUDA activity"


@dataclass(frozen=True)
class KindTime:
    """Device time of one kind; ``bytes``, ``gbps``, ``pageable`` for copies only
    (None where not known: no copy of the kind said its bytes or its host memory)."""

    kind: str
    count: int
    seconds: float
    bytes: int | None = None
    gbps: float | None = None
    pageable: int | None = None


@dataclass(frozen=True)
class TopKernel:
    """One kernel name's total; ``operator``: the host operator that launched most of
    its time (None when the trace links none)."""

    name: str
    kind: str
    count: int
    seconds: float
    operator: str | None


@dataclass(frozen=True)
class DeviceBusy:
    """One device: its active span (first device event's start to last one's end),
    the union of its events over all streams (busy), and the holes in it (gaps).
    ``busy_seconds + idle_seconds == span_seconds``."""

    device: int
    span_seconds: float
    busy_seconds: float
    busy_share: float | None  # None: the span is empty (only zero-length events)
    idle_seconds: float
    gaps: int
    longest_gap_seconds: float | None
    longest_gap_operator: str | None  # what the host ran in the middle of that gap


@dataclass(frozen=True)
class KernelBreakdown:
    """The breakdown of one trace: ``events`` on the device, of which ``kernels``
    are kernels (the rest copies and memsets)."""

    events: int
    kernels: int
    kinds: list[KindTime]
    top: list[TopKernel]
    devices: list[DeviceBusy]

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class NoKernels:
    """Not applicable: why there is no breakdown."""

    reason: str

    def to_json(self) -> dict[str, object]:
        return {"not_applicable": self.reason}


def breakdown(trace: Trace, top: int | None = 10) -> KernelBreakdown | NoKernels:
    """The kernel breakdown of ``trace``, with its ``top`` kernels by total time
    (None: all of them)."""
    if not trace.device:
        return NoKernels(NO_KERNELS)
    launchers = _launchers(trace)
    kinds = [kind_of(e.cat, e.name) for e in trace.device]
    return KernelBreakdown(
        len(trace.device),
        sum(e.cat == "kernel" for e in trace.device),
        _by_kind(trace.device, kinds),
        _top(trace.device, kinds, launchers, top),
        [_busy(device, trace) for device in sorted({e.device for e in trace.device})],
    )


def _by_kind(events: list[DeviceEvent], kinds: list[str]) -> list[KindTime]:
    groups: dict[str, list[DeviceEvent]] = defaultdict(list)
    for event, kind in zip(events, kinds, strict=True):
        groups[kind].append(event)
    out = [_kind_time(k, groups[k]) for k in KINDS if k in groups]
    return sorted(out, key=lambda k: -k.seconds)


def _kind_time(kind: str, events: list[DeviceEvent]) -> KindTime:
    seconds = sum(e.dur for e in events) * US
    if not kind.startswith("memcpy"):
        return KindTime(kind, len(events), seconds)
    sized = [e for e in events if e.bytes is not None]
    total = sum(e.bytes or 0 for e in sized) if sized else None
    copy_s = sum(e.dur for e in sized) * US
    gbps = total / copy_s / 1e9 if total is not None and copy_s > 0 else None
    said = [e.memory for e in events if e.memory is not None]
    pageable = sum(m == "pageable" for m in said) if said else None
    return KindTime(kind, len(events), seconds, total, gbps, pageable)


def _top(
    events: list[DeviceEvent], kinds: list[str], launchers: dict[int, str], n: int | None
) -> list[TopKernel]:
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    ops: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for e, kind in zip(events, kinds, strict=True):
        key = (e.name, kind)
        totals[key][0] += 1
        totals[key][1] += e.dur
        op = launchers.get(e.correlation) if e.correlation is not None else None
        if op is not None:
            ops[key][op] += e.dur
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0]))[:n]
    return [
        TopKernel(name, kind, int(c), d * US, _most(ops.get((name, kind))))
        for (name, kind), (c, d) in ranked
    ]


def _most(weights: dict[str, float] | None) -> str | None:
    return max(weights, key=lambda k: weights[k]) if weights else None


def _launchers(trace: Trace) -> dict[int, str]:
    """Correlation id -> the innermost host operator around the launch of that id."""
    ops = [h for h in trace.host if not h.is_api]
    wanted = [(c, tid, ts) for c, (tid, ts) in trace.launches.items()]
    out: dict[int, str] = {}
    for tid in {tid for _, tid, _ in wanted}:
        mine = [(c, ts) for c, t, ts in wanted if t == tid]
        found = innermost([h for h in ops if h.tid == tid], [ts for _, ts in mine])
        out.update({c: h.name for (c, _), h in zip(mine, found, strict=True) if h is not None})
    return out


def _busy(device: int, trace: Trace) -> DeviceBusy:
    spans = sorted((e.start, e.start + e.dur) for e in trace.device if e.device == device)
    merged: list[list[float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    gaps = [(a[1], b[0]) for a, b in pairwise(merged)]
    span = merged[-1][1] - merged[0][0]
    busy = sum(b - a for a, b in merged)
    longest = max(gaps, key=lambda g: g[1] - g[0]) if gaps else None
    op = _host_at(trace.host, (longest[0] + longest[1]) / 2) if longest else None
    return DeviceBusy(
        device,
        span * US,
        busy * US,
        busy / span if span > 0 else None,
        (span - busy) * US,
        len(gaps),
        (longest[1] - longest[0]) * US if longest else None,
        op,
    )


def _host_at(host: list[HostEvent], t: float) -> str | None:
    """The innermost host event running at ``t`` on any thread (the latest started)."""
    found = [innermost([h for h in host if h.tid == tid], [t])[0] for tid in {h.tid for h in host}]
    running = [h for h in found if h is not None]
    return max(running, key=lambda h: h.start).name if running else None


def innermost(events: list[HostEvent], times: list[float]) -> list[HostEvent | None]:
    """For each time, the innermost of one thread's (nested) events running then:
    one sweep over events and times, both in time order."""
    events = sorted(events, key=lambda h: (h.start, -h.end))
    out: list[HostEvent | None] = [None] * len(times)
    stack: list[HostEvent] = []
    i = 0
    for q in sorted(range(len(times)), key=times.__getitem__):
        t = times[q]
        while i < len(events) and events[i].start <= t:
            while stack and stack[-1].end < events[i].start:
                stack.pop()
            stack.append(events[i])
            i += 1
        while stack and stack[-1].end < t:
            stack.pop()
        out[q] = stack[-1] if stack else None
    return out
