"""The profilers of framework profiling windows (docs/profiling.md).

Every profiler has ``start()`` and ``stop()``, both called on the training
thread at a step boundary; ``stop()`` returns the rest of the work (export,
compression, writing) as a ``finish(sink, base)`` callable that the agent's
background thread runs, so that a window costs training as little as possible.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from stepscope.agent.profilers._dataloader import DataloaderProfiler
from stepscope.agent.profilers._detailed import DetailedProfiler
from stepscope.agent.profilers._memory import MemoryProfiler, no_cuda
from stepscope.agent.profilers._python import python_profiler
from stepscope.agent.profilers._sink import JSON, ArtifactSink, Export, FileBounds, Finish
from stepscope.config import ProfilingWindow
from stepscope.errors import ProfileHookBusy

if TYPE_CHECKING:
    from stepscope.agent._recorder import StepRecorder


class WindowProfiler(Protocol):
    """What the window scheduler drives."""

    kind: str

    def start(self) -> None: ...

    def stop(self) -> Finish: ...


def make_profiler(
    window: ProfilingWindow,
    recorder: StepRecorder,
    wall: Callable[[float], float],
    sink: ArtifactSink,
) -> WindowProfiler:
    """The profiler of ``window``'s kind; a detailed or dataloader window of a TensorFlow
    job (TensorFlow imported, torch not) runs TensorFlow's profiler."""
    tensorflow = "tensorflow" in sys.modules and "torch" not in sys.modules
    if window.kind == "detailed":
        if tensorflow:
            from stepscope.agent.profilers._tf_detailed import TFDetailedProfiler

            return TFDetailedProfiler(window, sink)
        return DetailedProfiler(window, sink)
    if window.kind == "dataloader":
        if tensorflow:
            from stepscope.agent.profilers._tf_dataloader import TFDataloaderProfiler

            return TFDataloaderProfiler(window, recorder, wall, sink)
        return DataloaderProfiler(window, recorder, wall)
    if window.kind == "memory":
        return MemoryProfiler(window)
    return python_profiler(window)


__all__ = [
    "JSON",
    "ArtifactSink",
    "Export",
    "FileBounds",
    "Finish",
    "ProfileHookBusy",
    "WindowProfiler",
    "make_profiler",
    "no_cuda",
]
