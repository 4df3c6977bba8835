"""Profiling windows: an open window and the rules of a window's timing.

Pure decisions for the :class:`~._windows.WindowScheduler`, which applies them at
the step boundaries: when a planned window is due or missed, when an open one has
ended, where a deep-profiling chunk continues, what keeps a window from opening,
and the record written when one closes. ``nxt`` is the step about to start,
``now`` the monotonic time of the boundary. See docs/profiling.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from stepscope.agent.profilers import JSON, Export, WindowProfiler, no_cuda
from stepscope.config import ProfilingWindow
from stepscope.jobfolder import Planned, describe


@dataclass
class Active:
    """An open window."""

    planned: Planned
    profiler: WindowProfiler
    first_step: int
    opened: float  # wall time
    steps: int = 0  # training steps ended since it opened


def resolve(p: Planned, nxt: int, now: float) -> Planned:
    """A window asked to start "now" starts at this boundary: step ``nxt`` (plus its
    offset) or time ``now``; it is judged from then, never "already over"."""
    if not p.from_now:
        return p
    if p.window.is_time_window:
        window = dataclasses.replace(p.window, start_unix_time=now)
    else:
        window = dataclasses.replace(p.window, start_step=nxt + p.offset)
    return dataclasses.replace(p, window=window)


def past(w: ProfilingWindow, nxt: int, now: float) -> bool:
    """True if window ``w`` is already over at this boundary."""
    if not w.is_time_window:
        return (w.end_step or 0) <= nxt
    return w.duration is not None and (w.start_unix_time or now) + w.duration <= now


def refusal(windows: list[Planned], nxt: int, now: float) -> str | None:
    """Why a live request's resolved ``windows`` are refused at this boundary (None:
    applied): one is already over, or a memory window asks a process without CUDA
    (said now, in the answer, rather than only in the record of a window with no file)."""
    late = [p for p in windows if past(p.window, nxt, now)]
    if late:
        return (
            f"{describe(late[0])} is already over: the job is at step {nxt}. Leave the "
            "start blank for the next step, or give a later step or time."
        )
    memory = [p for p in windows if p.window.kind == "memory"]
    why = no_cuda() if memory else None
    if why is None:
        return None
    return (
        f"{describe(memory[0])} cannot run: {why}. A memory window records the CUDA "
        "caching allocator: ask for one on a job that uses a GPU, and for the other "
        "kinds without memory (nothing of this request was applied)."
    )


def missed_or_due(w: ProfilingWindow, nxt: int, now: float) -> tuple[bool, bool]:
    """Whether a planned window has passed unopened, and whether it is due to open."""
    if w.is_time_window:
        start = w.start_unix_time
        missed = start is not None and w.duration is not None and now >= start + w.duration
        due = start is None or now >= start
    else:
        lo = (w.start_step or 0) - (1 if w.include_prestep else 0)
        missed, due = nxt >= (w.end_step or 0), nxt >= lo
    return missed, due


def ended(a: Active, nxt: int, now: float) -> bool:
    """True if the open window ``a`` closes at this boundary."""
    w = a.planned.window
    if a.planned.rotate_s is not None and now - a.opened >= a.planned.rotate_s:
        return True
    if not w.is_time_window:
        return nxt >= (w.end_step or 0)
    if w.duration is None:
        return a.steps >= 1
    return now >= (w.start_unix_time or a.opened) + w.duration


def next_chunk(a: Active, now: float) -> Planned | None:
    """Deep profiling: the next chunk starts where the last one ended (None: no more)."""
    p, w = a.planned, a.planned.window
    if p.rotate_s is not None and w.duration is not None:
        end = (w.start_unix_time or a.opened) + w.duration
        if now < end:
            start = w.start_unix_time or a.opened
            return dataclasses.replace(p, window=dataclasses.replace(w, start_unix_time=start))
    return None


def conflict(p: Planned, active: list[Active], disabled: bool) -> str | None:
    """Why ``p`` may not open beside the ``active`` windows (None: it may).

    ``disabled``: the artifact sink gave up after too many failed writes.
    """
    if disabled:
        return "profiling is off: too many artifact writes failed (file_open_fail_threshold)"
    kinds = {a.planned.window.kind for a in active}
    if p.window.kind in kinds:
        return f"a {p.window.kind} window is already open"
    stack = any(a.planned.window.with_stack for a in active) or p.window.with_stack
    if stack and {"python", "detailed"} <= kinds | {p.window.kind}:
        return "with_stack tracing and Python profiling share the interpreter's profile hook"
    return None


@dataclass(frozen=True)
class WindowRecord:
    """The record of a closed window, before its export adds its files (docs/format.md)."""

    kind: str  # the artifacts' kind: the window's kind, or "deep"
    rank: int
    start_step: int
    end_step: int
    start_time: float
    end_time: float
    window: dict[str, JSON]  # ProfilingWindow.to_dict()
    request: str | None  # the live request that asked for it

    def to_dict(self, export: Export) -> dict[str, JSON]:
        """``<base>.window.json`` and the ``profiling_window`` event: these fields, in
        this order, then the export's."""
        return {**dataclasses.asdict(self), **export.to_dict()}


def window_record(a: Active, rank: int, last: int, end_time: float) -> WindowRecord:
    """The record of the window ``a``, closed at ``end_time`` after step ``last``."""
    p = a.planned
    return WindowRecord(
        p.label, rank, a.first_step, last, a.opened, end_time, p.window.to_dict(), p.request
    )
