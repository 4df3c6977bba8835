"""What the kernel rules read: the PyTorch traces of a job's detailed windows, parsed
once per window (:class:`JobTraces`), as :class:`TraceWindow` objects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from stepscope.read import Trace

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


class JobTraces:
    """The traces of ``job``'s windows, each parsed once: the live runner calls this at
    every scan, and a new window joins when its record appears."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._parsed: dict[str, Trace | None] = {}  # path -> trace (None: unreadable)

    def __call__(self) -> list[TraceWindow]:
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
                out.append(TraceWindow(rank, first, last, trace))
        return out
