"""Efficiency against the hardware of a job's profiling windows: :class:`EfficiencyViews`,
the ``efficiency`` and ``window_efficiency`` methods of :class:`stepscope.read.Job`
(docs/profiling.md, "Efficiency against the hardware")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stepscope.jobfolder import JsonObject
from stepscope.read._efficiency import Efficiency, NoEfficiency, efficiency
from stepscope.read._trace_views import WINDOW_COLUMNS, TraceViews, check_top, window_of

if TYPE_CHECKING:
    import pandas as pd

_WINDOW = (*WINDOW_COLUMNS, "card", "timed_on")
_OWN = (
    *("operator", "kind", "precision", "shapes", "count", "seconds", "flops", "bytes"),
    *("tflops", "tbps", "intensity", "ridge", "bound", "peak_tflops", "peak_tbps"),
    "share_of_peak",
)


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
            self.window_rows(rank, rows), columns=[*_WINDOW, *_OWN, "not_applicable"]
        )
