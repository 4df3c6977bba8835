"""The CUDA caching allocator's own counters, read when a timed step ends
(docs/format.md: ``cuda_allocated``, ``cuda_reserved``, ``cuda_peak``).

``torch.cuda.memory_stats_as_nested_dict()`` copies the allocator's counters under
its lock: no device synchronisation, no kernel, no driver call. It is read on the
steps the device timer times (agent/_cuda.py: every step of 50 ms or more, else one
step per 50 ms), never on the others, which keep the hooks' C path. The nested dict,
not ``memory_allocated()``/``memory_stats()``: those flatten every counter (about a
hundred) into a new dict in Python at each call, three times for three values.

The peak is the allocator's since the process started (or since the user last reset
it): stepscope never calls ``torch.cuda.reset_peak_memory_stats``, which would change
what the training script's own ``max_memory_allocated()`` reports. A step whose
peak is above the previous reading's raised it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

# (the allocator's counter, its statistic) per column: the names torch's flat
# ``memory_stats()`` joins with dots ("allocated_bytes.all.current")
COUNTERS = {
    "cuda_allocated": ("allocated_bytes", "current"),
    "cuda_reserved": ("reserved_bytes", "current"),
    "cuda_peak": ("allocated_bytes", "peak"),
}


class MemoryReading(NamedTuple):
    """Bytes of the caching allocator on the current device when a step ended."""

    allocated: int
    reserved: int
    peak: int


class AllocatorStats(Protocol):
    """``torch.cuda``, as far as the memory reading uses it (tests use a stand-in)."""

    def memory_stats_as_nested_dict(self) -> Mapping[str, object]: ...


def read_memory(cuda: AllocatorStats) -> MemoryReading | None:
    """The allocator's counters now; None when it does not keep them (an allocator
    backend without statistics, or one not started: an empty dict)."""
    stats = cuda.memory_stats_as_nested_dict()
    values = [_counter(stats, name, stat) for name, stat in COUNTERS.values()]
    if any(v is None for v in values):
        return None
    allocated, reserved, peak = (int(v or 0) for v in values)
    return MemoryReading(allocated, reserved, peak)


def _counter(stats: Mapping[str, object], name: str, stat: str) -> int | None:
    pools = stats.get(name)
    every = pools.get("all") if isinstance(pools, Mapping) else None
    value = every.get(stat) if isinstance(every, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


#: The readings an out-of-memory fault record lists (agent/_cuda_oom.py).
RECENT = 5


class MemoryReader:
    """Reads the counters at a step's end; a failure is recorded once (``on_fault``)
    and turns the reading off, so the steps go on without these columns. The last
    readings stay in ``recent``, with the training steps done by then (``steps``)."""

    def __init__(
        self,
        cuda: AllocatorStats,
        on_fault: Callable[[str, BaseException], None],
        steps: Callable[[], int] = lambda: 0,
    ) -> None:
        self.cuda: AllocatorStats | None = cuda
        self.on_fault, self.steps = on_fault, steps
        self.recent: deque[tuple[int, MemoryReading]] = deque(maxlen=RECENT)

    def __call__(self) -> MemoryReading | None:
        if self.cuda is None:
            return None
        try:
            reading = read_memory(self.cuda)
            if reading is not None:
                self.recent.append((self.steps(), reading))
            return reading
        except Exception as exc:  # a torch build without the call, a broken allocator
            self.cuda = None
            self.on_fault("cuda-memory", exc)
            return None


def memory_columns(readings: list[MemoryReading | None]) -> dict[str, list[int | None]]:
    """The three step columns of the rows whose readings are ``readings``."""
    return {
        column: [None if r is None else r[i] for r in readings] for i, column in enumerate(COUNTERS)
    }
