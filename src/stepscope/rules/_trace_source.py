"""What the kernel rules read: the PyTorch traces of a job's detailed windows, parsed
once per window (:class:`JobTraces`, through ``Job.window_trace``: the parse the
job's kernel and efficiency views share), as :class:`TraceWindow` objects."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeAlias

from stepscope.read import KernelBreakdown, NoKernels, Trace, breakdown

if TYPE_CHECKING:
    from stepscope.read import Job


@dataclass(frozen=True)
class TraceWindow:
    """One window's parsed trace: its rank, steps (inclusive) and the card name the
    trace gives its devices (None: not said, e.g. a CPU trace)."""

    rank: int | None
    start_step: int | None
    end_step: int | None
    trace: Trace
    #: the window's kernel breakdown as the reader keeps it beside the trace
    #: (``Job.kept_kernels``); None, or none kept: made from ``trace``
    kept: Callable[[], KernelBreakdown | NoKernels | None] | None = field(
        default=None, compare=False, repr=False
    )

    def kernels(self) -> KernelBreakdown | NoKernels:
        """The window's kernel breakdown (its devices; the top list may be cut)."""
        found = self.kept() if self.kept is not None else None
        return found if found is not None else breakdown(self.trace, top=1)

    @property
    def steps(self) -> int:
        """How many steps the window covers (1 when it does not say)."""
        if self.start_step is None or self.end_step is None:
            return 1
        return max(1, self.end_step - self.start_step + 1)

    @property
    def label(self) -> str:
        """``rank 0, steps 100-102``."""
        where = f"rank {self.rank}" if self.rank is not None else "a rank"
        return f"{where}, steps {self.start_step}-{self.end_step}"


#: The rules' view of a job's traces: a call that lists its windows' parsed traces.
TraceSource: TypeAlias = Callable[[], list[TraceWindow]]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


#: Seconds between two listings of the job's windows (each kernel rule asks at every
#: live scan; an object store bills each listing).
RELIST_S = 10.0


class JobTraces:
    """The traces of ``job``'s windows, each parsed once: the live runner calls this at
    every scan, and a new window joins when its record appears (the windows are listed
    again at most every :data:`RELIST_S` seconds of ``clock``)."""

    def __init__(self, job: Job, clock: Callable[[], float] = time.monotonic) -> None:
        self.job, self.clock = job, clock
        self._parsed: dict[str, Trace | None] = {}  # path -> trace (None: unreadable)
        self._listed: tuple[float, list[TraceWindow]] | None = None

    def __call__(self) -> list[TraceWindow]:
        now = self.clock()
        if self._listed is None or now - self._listed[0] >= RELIST_S:
            self._listed = (now, self._windows())
        return list(self._listed[1])

    def _windows(self) -> list[TraceWindow]:
        out = []
        for record in self.job.profiling_artifacts():
            path = str(record.get("path"))
            if path not in self._parsed:
                found = self.job.window_trace(record)
                self._parsed[path] = found if isinstance(found, Trace) else None
            trace = self._parsed[path]
            if trace is not None:
                rank, first, last = (
                    _int(record.get(k)) for k in ("rank", "start_step", "end_step")
                )
                kept = partial(self.job.kept_kernels, record)
                out.append(TraceWindow(rank, first, last, trace, kept))
        return out
