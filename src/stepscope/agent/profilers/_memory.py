"""CUDA memory windows: the caching allocator's history, for PyTorch's memory viewer.

At the window's start ``torch.cuda.memory._record_memory_history(max_entries=N)``
asks the allocator to keep every allocation and free with its stack; at its end
``torch.cuda.memory._snapshot()`` takes the segments and the trace, and recording
is switched off again (``enabled=None``). The snapshot is pickled as it is: the file
pytorch.org/memory_viz opens (docs/profiling.md, "CUDA memory windows"). A process
that never used CUDA records a note instead of a file: stepscope never initialises
CUDA itself.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Mapping
from typing import Any

from stepscope.agent.profilers._sink import JSON, ArtifactSink, Export, Finish
from stepscope.config import ProfilingWindow

NO_CUDA_WHY = "no CUDA device (the process has not initialised CUDA)"
NO_CUDA = f"not recorded: {NO_CUDA_WHY}"


def _cuda() -> Any | None:
    """``torch.cuda`` where the process uses CUDA (initialised, or a device present)."""
    import torch

    cuda: Any = torch.cuda  # its memory calls are private and untyped
    return cuda if cuda.is_initialized() or cuda.is_available() else None


def no_cuda() -> str | None:
    """Why this process can keep no memory snapshot (None: it can). A process that has
    not imported torch has no CUDA either, and is not made to import it here."""
    if "torch" not in sys.modules:
        return NO_CUDA_WHY
    return None if _cuda() is not None else NO_CUDA_WHY


class MemoryProfiler:
    """One window of allocator history; ``stop()`` takes the snapshot."""

    kind = "memory"

    def __init__(self, window: ProfilingWindow) -> None:
        self.max_entries = window.max_entries
        self._cuda: Any | None = None

    def start(self) -> None:
        self._cuda = _cuda()
        if self._cuda is not None:
            self._cuda.memory._record_memory_history(max_entries=self.max_entries)

    def stop(self) -> Finish:
        cuda, self._cuda = self._cuda, None
        if cuda is None:
            return lambda sink, base: Export(None, [], {"note": NO_CUDA})
        try:
            snapshot = cuda.memory._snapshot()  # on the training thread: a consistent copy
        finally:
            cuda.memory._record_memory_history(enabled=None)
        entries = self.max_entries
        return lambda sink, base: _export(snapshot, entries, sink, base)


def _export(snapshot: Mapping[str, Any], max_entries: int, sink: ArtifactSink, base: str) -> Export:
    path = sink.write(f"{base}.memory.pickle", pickle.dumps(snapshot))
    return Export(path, [path] if path else [], summary(snapshot, max_entries))


def summary(snapshot: Mapping[str, Any], max_entries: int) -> dict[str, JSON]:
    """The record's figures of a snapshot: segments, their bytes, trace events kept."""
    segments = snapshot.get("segments") or []
    traces = snapshot.get("device_traces") or []
    events = sum(len(t) for t in traces)
    return {
        "segments": len(segments),
        "reserved_bytes": sum(int(s.get("total_size", 0)) for s in segments),
        "allocated_bytes": sum(int(s.get("allocated_size", 0)) for s in segments),
        "trace_events": events,
        "max_entries": max_entries,
        # full: the oldest events were dropped to keep max_entries
        "history_full": any(len(t) >= max_entries for t in traces),
    }
