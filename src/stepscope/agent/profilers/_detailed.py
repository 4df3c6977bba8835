"""Detailed profiling: the PyTorch profiler over a window.

``start`` and ``stop`` run on the training thread at step boundaries, and so
does the read-out of the results (Kineto is not thread-safe); compression, the
size bound and the writes are the returned ``finish``, on the background thread.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from stepscope.agent.profilers._sink import ArtifactSink, Export, Finish
from stepscope.agent.profilers._trace import bound_trace
from stepscope.config import ProfilingWindow

if TYPE_CHECKING:
    from torch.profiler import ProfilerActivity, profile

# One row of the operator table: name, count, and host/device microseconds.
Operator = dict[str, str | int | float]

TOP_OPERATORS = 50
# Kineto prints a "USDT: ... profiler_start" and a "profiler_stop" line on the training's
# stderr at every window; its log level 6 prints none (nor its own error lines, the level
# above). Read when the profiler first starts; a level the user set is kept (docs/profiling.md).
KINETO_LOG_LEVEL = ("KINETO_LOG_LEVEL", "6")


def _activities() -> list[ProfilerActivity]:
    import torch
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU]
    # Never initialise CUDA ourselves: trace kernels only if the process already uses it.
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        acts.append(ProfilerActivity.CUDA)
    return acts


class DetailedProfiler:
    """``torch.profiler.profile`` with the window's shapes/memory/stack options."""

    kind = "detailed"

    def __init__(self, window: ProfilingWindow, sink: ArtifactSink) -> None:
        self.window, self.sink = window, sink
        self._prof: profile | None = None

    def start(self) -> None:
        from torch.profiler import profile

        os.environ.setdefault(*KINETO_LOG_LEVEL)
        w = self.window
        prof = profile(
            activities=_activities(),
            record_shapes=w.record_shapes,
            profile_memory=w.profile_memory,
            with_stack=w.with_stack,
        )
        self._prof = prof
        prof.start()

    def stop(self) -> Finish:
        """Stop, and read the results out of the profiler here, on the training thread.

        Kineto is not thread-safe: an export on another thread while the next window
        (or the next deep-profiling chunk) starts a profiler crashed the process in
        testing. So the trace export and the operator table happen here (the step is
        marked); compression, the size bound and the writes run in the background.
        """
        prof, self._prof = self._prof, None
        assert prof is not None  # start() ran: the scheduler pairs them
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


def _export(raw: bytes, ops: list[Operator], sink: ArtifactSink, base: str) -> Export:
    data, cut = bound_trace(raw, sink.bounds.file_max_size)
    trace = sink.write(f"{base}.pt.trace.json.gz", data)
    table = sink.write_json(f"{base}.operators.json", {"operators": ops})
    files = [k for k in (trace, table) if k]
    return Export(trace, files, {"truncated": cut, "trace_bytes": len(data), "top": ops[:5]})


def top_operators(prof: profile, n: int = TOP_OPERATORS) -> list[Operator]:
    """The ``n`` operators with the most self time on the host (microseconds)."""
    rows: list[Operator] = []
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
    rows.sort(key=lambda r: float(r["self_cpu_us"]), reverse=True)
    return rows[:n]
