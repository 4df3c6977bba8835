"""Detailed profiling: the PyTorch profiler over a window.

``start`` and ``stop`` run on the training thread at step boundaries, and so
does the read-out of the results (Kineto is not thread-safe); compression, the
size bound and the writes are the returned ``finish``, on the background thread.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from stepscope.agent.profilers._sink import ArtifactSink, Finish
from stepscope.agent.profilers._trace import bound_trace
from stepscope.config import ProfilingWindow

TOP_OPERATORS = 50


def _activities(torch: Any) -> list[Any]:
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU]
    # Never initialise CUDA ourselves: trace kernels only if the process already uses it.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        acts.append(ProfilerActivity.CUDA)
    return acts


class DetailedProfiler:
    """``torch.profiler.profile`` with the window's shapes/memory/stack options."""

    kind = "detailed"

    def __init__(self, window: ProfilingWindow, sink: ArtifactSink) -> None:
        self.window, self.sink = window, sink
        self._prof: Any = None

    def start(self) -> None:
        import torch
        from torch.profiler import profile

        w = self.window
        self._prof = profile(
            activities=_activities(torch),
            record_shapes=w.record_shapes,
            profile_memory=w.profile_memory,
            with_stack=w.with_stack,
        )
        self._prof.start()

    def stop(self) -> Finish:
        """Stop, and read the results out of the profiler here, on the training thread.

        Kineto is not thread-safe: an export on another thread while the next window
        (or the next deep-profiling chunk) starts a profiler crashed the process in
        testing. So the trace export and the operator table happen here (the step is
        marked); compression, the size bound and the writes run in the background.
        """
        prof, self._prof = self._prof, None
        prof.stop()
        staging = self.sink.staging_file(f"detailed-{id(prof)}.json")
        try:
            prof.export_chrome_trace(staging)
            with open(staging, "rb") as f:
                raw = f.read()
        finally:
            with contextlib.suppress(OSError):
                os.remove(staging)
        ops = top_operators(prof)
        return lambda sink, base: _export(raw, ops, sink, base)


def _export(raw: bytes, ops: list[dict[str, Any]], sink: ArtifactSink, base: str) -> dict[str, Any]:
    data, cut = bound_trace(raw, sink.bounds.file_max_size)
    trace = sink.write(f"{base}.pt.trace.json.gz", data)
    table = sink.write_json(f"{base}.operators.json", {"operators": ops})
    return {
        "path": trace,
        "files": [k for k in (trace, table) if k],
        "truncated": cut,
        "trace_bytes": len(data),
        "top": ops[:5],
    }


def top_operators(prof: Any, n: int = TOP_OPERATORS) -> list[dict[str, Any]]:
    """The ``n`` operators with the most self time on the host (microseconds)."""
    rows = []
    for avg in prof.key_averages():
        rows.append(
            {
                "name": avg.key,
                "count": int(avg.count),
                "self_cpu_us": float(avg.self_cpu_time_total),
                "cpu_total_us": float(avg.cpu_time_total),
                "self_device_us": float(getattr(avg, "self_device_time_total", 0.0) or 0.0),
            }
        )
    rows.sort(key=lambda r: r["self_cpu_us"], reverse=True)
    return rows[:n]
