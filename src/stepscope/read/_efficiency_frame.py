"""Efficiency against the hardware of a job's profiling windows: :class:`EfficiencyViews`,
the ``efficiency`` and ``window_efficiency`` methods of :class:`stepscope.read.Job`
(docs/profiling.md, "Efficiency against the hardware")."""

from __future__ import annotations

import gzip
import zlib
from typing import TYPE_CHECKING

from stepscope.errors import ConfigError
from stepscope.jobfolder import JsonObject
from stepscope.read._efficiency import Efficiency, NoEfficiency, efficiency
from stepscope.read._trace import Trace, load_trace
from stepscope.store import Store

if TYPE_CHECKING:
    import pandas as pd

TRACE_ENDINGS = (".pt.trace.json.gz", ".pt.trace.json")
_WINDOW = ("window", "window_kind", "rank", "start_step", "end_step", "card", "timed_on")
_OWN = (
    *("operator", "kind", "precision", "shapes", "count", "seconds", "flops", "bytes"),
    *("tflops", "tbps", "intensity", "ridge", "bound", "peak_tflops", "peak_tbps"),
    "share_of_peak",
)


class EfficiencyViews:
    """The efficiency of the operators of the windows that kept a PyTorch trace."""

    store: Store

    def profiling_artifacts(self) -> list[JsonObject]:
        raise NotImplementedError  # Job lists them

    def note_skipped(self, key: str, why: str) -> None:
        raise NotImplementedError  # Job records them

    def window_trace(self, record: JsonObject) -> Trace | str | None:
        """The parsed trace of one window record; None for a window without a PyTorch
        trace; a trace that cannot be read: why (and the file joins ``warnings``)."""
        path = record.get("path")
        if not isinstance(path, str) or not path.endswith(TRACE_ENDINGS):
            return None
        try:
            return load_trace(self.store.read_bytes(path))
        except (OSError, EOFError, ValueError, zlib.error, gzip.BadGzipFile) as exc:
            why = f"trace unreadable: {type(exc).__name__}: {exc}"
            self.note_skipped(path, why)
            return why

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

        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
            raise ConfigError(
                f"efficiency(top={top!r}) must be a positive integer, or None for all."
            )
        rows: list[dict[str, object]] = []
        for record in self.profiling_artifacts():
            if rank is not None and record.get("rank") != rank:
                continue
            result = self.window_efficiency(record)
            if result is None:
                continue
            window = _window(record)
            if isinstance(result, NoEfficiency):
                rows.append({**window, "not_applicable": result.reason})
                continue
            window.update(card=result.card, timed_on=result.timed_on)
            rows += [{**window, **vars(op)} for op in result.operators[:top]]
        return pd.DataFrame(rows, columns=[*_WINDOW, *_OWN, "not_applicable"])


def _window(record: JsonObject) -> dict[str, object]:
    base = str(record.get("path", "")).rsplit("/", 1)[-1]
    name = next((base[: -len(e)] for e in TRACE_ENDINGS if base.endswith(e)), base)
    return {
        "window": name,
        "window_kind": record.get("kind"),
        "rank": record.get("rank"),
        "start_step": record.get("start_step"),
        "end_step": record.get("end_step"),
    }
