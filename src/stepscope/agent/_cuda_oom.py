"""Out of CUDA memory: the fault record a rank leaves when its training dies of it.

The rank's excepthook (agent/_rank_exit.py) hands every uncaught exception here
first. An out-of-memory error (``torch.cuda.OutOfMemoryError``, or an older
build's ``RuntimeError: CUDA out of memory``) is recorded as
``faults/cuda-oom-<node>-<pid>.json`` with what the allocator said last: the last
per-step readings (agent/_cuda_memory.py) and its counters at the failure. The
exception itself goes on to the interpreter unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from stepscope.agent._cuda_memory import MemoryReading

if TYPE_CHECKING:
    from stepscope.agent._agent import Agent

COMPONENT = "cuda-oom"
OOM_TEXT = "CUDA out of memory"

# (figure, the allocator's counter, its pool, its statistic), as memory_summary() shows
FIGURES = (
    ("allocated_bytes", "allocated_bytes", "all", "current"),
    ("allocated_peak_bytes", "allocated_bytes", "all", "peak"),
    ("reserved_bytes", "reserved_bytes", "all", "current"),
    ("reserved_peak_bytes", "reserved_bytes", "all", "peak"),
    ("inactive_split_bytes", "inactive_split_bytes", "all", "current"),
    ("segments", "segment", "all", "current"),
)
COUNTS = ("num_ooms", "num_alloc_retries")


def is_cuda_oom(exc: BaseException) -> bool:
    """Whether ``exc`` says the device ran out of memory (never imports torch)."""
    torch = sys.modules.get("torch")
    kind = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if isinstance(kind, type) and isinstance(exc, kind):
        return True
    return isinstance(exc, RuntimeError) and OOM_TEXT in str(exc)


def memory_figures(stats: Mapping[str, object]) -> dict[str, int]:
    """The summary's figures from ``memory_stats_as_nested_dict()`` (those it has)."""
    out: dict[str, int] = {}
    for figure, name, pool, stat in FIGURES:
        pools = stats.get(name)
        every = pools.get(pool) if isinstance(pools, Mapping) else None
        value = every.get(stat) if isinstance(every, Mapping) else None
        if isinstance(value, int):
            out[figure] = value
    out.update({k: v for k in COUNTS if isinstance(v := stats.get(k), int)})
    return out


def reading_doc(reading: MemoryReading, after_steps: int) -> dict[str, int]:
    """One per-step reading as the fault record lists it."""
    return {
        "after_steps": after_steps,
        "cuda_allocated": reading.allocated,
        "cuda_reserved": reading.reserved,
        "cuda_peak": reading.peak,
    }


def record_oom(agent: Agent, exc: BaseException) -> None:
    """Record ``exc`` as a ``cuda-oom`` fault if it is one; never raises."""
    try:
        if not is_cuda_oom(exc):
            return
        recent = _recent_readings(agent)
        stats: dict[str, int] = {}
        cuda = getattr(sys.modules.get("torch"), "cuda", None)
        if cuda is not None:
            try:  # a broken allocator must not cost the record
                stats = memory_figures(cuda.memory_stats_as_nested_dict())
            except Exception:
                stats = {}
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        agent.faults.log.record(COMPONENT, error, memory_readings=recent, memory_stats=stats)
    except Exception as fault:  # the training's own error goes on regardless
        agent.faults.record("cuda-oom-record", fault)


def _recent_readings(agent: Agent) -> list[dict[str, int]]:
    torch = agent.framework("torch")
    hooks = getattr(torch, "hooks", None)
    reader = getattr(hooks, "memory", None)
    recent = getattr(reader, "recent", ())
    return [reading_doc(r, n) for n, r in recent]
