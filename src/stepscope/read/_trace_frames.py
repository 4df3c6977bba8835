"""The frames read from the PyTorch traces of a job's profiling windows, the methods of
:class:`stepscope.read.Job` that give them:

* :class:`KernelViews`: the kernel breakdown, ``kernels`` and ``window_kernels``
  (docs/profiling.md, "Kernel breakdown");
* :class:`EfficiencyViews`: efficiency against the hardware, ``efficiency`` and
  ``window_efficiency`` (docs/profiling.md, "Efficiency against the hardware").
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from stepscope.errors import ConfigError
from stepscope.jobfolder import JsonObject
from stepscope.read._efficiency import Efficiency, NoEfficiency, efficiency
from stepscope.read._kernel_cache import cache_key, load_cached, save_cached
from stepscope.read._kernels import KernelBreakdown, NoKernels, breakdown
from stepscope.read._trace_views import (
    TRACE_ENDINGS,
    WINDOW_COLUMNS,
    TraceViews,
    check_top,
    window_of,
)

if TYPE_CHECKING:
    import pandas as pd

BY = ("kind", "kernel", "device")
_EFFICIENCY_WINDOW = (*WINDOW_COLUMNS, "card", "timed_on")
_EFFICIENCY_OWN = (
    *("operator", "kind", "precision", "shapes", "count", "seconds", "flops", "bytes"),
    *("tflops", "tbps", "intensity", "ridge", "bound", "peak_tflops", "peak_tbps"),
    "share_of_peak",
)


class KernelViews(TraceViews):
    """The kernel breakdown of the windows that kept a PyTorch profiler trace."""

    def window_kernels(
        self, record: JsonObject, top: int = 10
    ) -> KernelBreakdown | NoKernels | None:
        """The breakdown of one window record (``profiling_artifacts()``) with its ``top``
        kernels; None for a window without a PyTorch trace (python, dataloader,
        TensorFlow). A trace that cannot be read: :class:`NoKernels` saying why (and the
        file joins ``warnings``)."""
        path = record.get("path")
        if not isinstance(path, str) or not path.endswith(TRACE_ENDINGS):
            return None
        result = self._all_kernels(path)
        if isinstance(result, KernelBreakdown) and len(result.top) > top:
            return replace(result, top=result.top[:top])
        return result

    def kept_kernels(self, record: JsonObject) -> KernelBreakdown | NoKernels | None:
        """The breakdown kept beside one window record's trace (read/_kernel_cache.py)
        where it is current, with every kernel; None: none is; nothing is parsed or
        written (the kernel rules read it so: judging a job writes nothing)."""
        path = record.get("path")
        if not isinstance(path, str) or not path.endswith(TRACE_ENDINGS):
            return None
        keyed = cache_key(self.store, path)
        return None if keyed is None else load_cached(self.store, *keyed)

    def _all_kernels(self, path: str) -> KernelBreakdown | NoKernels:
        """The breakdown of one trace with every kernel: from the file beside it
        (read/_kernel_cache.py) where it is current, else made from the parsed trace
        (:meth:`trace_at`) and kept there."""
        keyed = cache_key(self.store, path)
        if keyed is not None and (cached := load_cached(self.store, *keyed)) is not None:
            return cached
        trace = self.trace_at(path)
        if isinstance(trace, str):
            return NoKernels(trace)  # not kept: a trace still being written may heal
        result = breakdown(trace, top=None)
        if keyed is not None:
            save_cached(self.store, *keyed, result)
        return result

    def kernels(
        self, by: str = "kind", top: int | None = 10, rank: int | None = None
    ) -> pd.DataFrame:
        """The kernel breakdown of every window with a PyTorch trace, as a DataFrame.

        ``by="kind"``: one row per window, rank and kind (``count``, ``seconds``,
        ``share`` of the window's device time; copies add ``bytes``, ``gbps``,
        ``pageable``). ``by="kernel"``: one row per window, rank and kernel name, the
        ``top`` by total time (None: all), with the host ``operator`` that launched it.
        ``by="device"``: one row per window, rank and device: ``busy_share`` of its
        active span, ``idle_seconds``, ``gaps``, the longest gap and the host operator
        running in its middle. A window without device activity is one row whose
        ``not_applicable`` says why, its numbers left empty (never zeros).
        """
        import pandas as pd

        if by not in BY:
            raise ConfigError(f"Unknown kernels(by={by!r}); choose one of {', '.join(BY)}.")
        check_top("kernels", top)

        def rows(record: JsonObject) -> list[dict[str, object]]:
            result = self.window_kernels(record, top or 1_000_000_000)
            return [] if result is None else _rows(window_of(record), result, by)

        return pd.DataFrame(self.window_rows(rank, rows), columns=_columns(by))


class EfficiencyViews(TraceViews):
    """The efficiency of the operators of the windows that kept a PyTorch trace."""

    def window_efficiency(self, record: JsonObject) -> Efficiency | NoEfficiency | None:
        """The efficiency of one window record's operators (None: no PyTorch trace);
        a trace recorded without shapes: :class:`NoEfficiency` saying so."""
        trace = self.window_trace(record)
        if trace is None or isinstance(trace, str):
            return None if trace is None else NoEfficiency(trace)
        return efficiency(trace)

    def efficiency(self, top: int | None = 20, rank: int | None = None) -> pd.DataFrame:
        """Per window, rank and operator (name, precision, input shapes): its device
        time (host time on a trace without device activity), ``flops``, ``bytes``,
        achieved ``tflops`` and ``tbps``, arithmetic ``intensity`` against the card's
        ``ridge``, ``bound`` (compute, memory, or why unknown: "unknown card") and
        ``share_of_peak``; the ``top`` operators by time per window (None: all). A
        window recorded without shapes is one row whose ``not_applicable`` says so."""
        import pandas as pd

        check_top("efficiency", top)

        def rows(record: JsonObject) -> list[dict[str, object]]:
            result = self.window_efficiency(record)
            if result is None:
                return []
            window = window_of(record)
            if isinstance(result, NoEfficiency):
                return [{**window, "not_applicable": result.reason}]
            window.update(card=result.card, timed_on=result.timed_on)
            return [{**window, **vars(op)} for op in result.operators[:top]]

        return pd.DataFrame(
            self.window_rows(rank, rows),
            columns=[*_EFFICIENCY_WINDOW, *_EFFICIENCY_OWN, "not_applicable"],
        )


def _rows(
    window: dict[str, object], result: KernelBreakdown | NoKernels, by: str
) -> list[dict[str, object]]:
    if isinstance(result, NoKernels):
        return [{**window, "not_applicable": result.reason}]
    if by == "kernel":
        return [{**window, **vars(k)} for k in result.top]
    if by == "device":
        return [{**window, **vars(d)} for d in result.devices]
    total = sum(k.seconds for k in result.kinds)
    return [
        {**window, **vars(k), "share": k.seconds / total if total else None} for k in result.kinds
    ]


def _columns(by: str) -> list[str]:
    own = {
        "kind": ["kind", "count", "seconds", "share", "bytes", "gbps", "pageable"],
        "kernel": ["name", "kind", "count", "seconds", "operator"],
        "device": [
            "device",
            "span_seconds",
            "busy_seconds",
            "busy_share",
            "idle_seconds",
            "gaps",
            "longest_gap_seconds",
            "longest_gap_operator",
        ],
    }[by]
    return [*WINDOW_COLUMNS, *own, "not_applicable"]
