"""The report's efficiency block of a detailed window: its operators' achieved
TFLOP/s and TB/s against the card's peak, compute- or memory-bound
(``Job.window_efficiency``, docs/profiling.md "Efficiency against the hardware").
Rendering only."""

from __future__ import annotations

from stepscope.jobfolder import JsonObject
from stepscope.read import Efficiency, Job, NoEfficiency, OpEfficiency
from stepscope.report._html import fmt_duration, note, table

TOP = 10
DASH = "\u2013"


def efficiency_table(job: Job, record: JsonObject) -> str:
    result = job.window_efficiency(record)
    if result is None:
        return note("This window kept no PyTorch trace.")
    if isinstance(result, NoEfficiency):
        return note(f"Efficiency against the hardware: {result.reason}.")
    return note(_intro(result)) + table(
        [
            *("Operator", "Precision", "Shapes", "Count", "Time", "TFLOP/s", "TB/s"),
            *("FLOP/byte", "Bound", "Of peak"),
        ],
        [_row(op) for op in result.operators[:TOP]],
        cls="num efficiency",
    )


def _intro(result: Efficiency) -> str:
    timed = "the device time of its kernels" if result.timed_on == "device" else "its host time"
    if result.peaks is None:
        card = result.card or "no device (a CPU trace)"
        return f"Each operator over {timed}; {card}: unknown card, no peak to compare with."
    return f"Each operator over {timed}, against the peaks of the {result.peaks}."


def _num(value: float | None, digits: int = 2) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def _row(op: OpEfficiency) -> tuple[object, ...]:
    return (
        op.operator,
        op.precision,
        op.shapes,
        op.count,
        fmt_duration(op.seconds),
        _num(op.tflops, 3),
        _num(op.tbps, 3),
        _num(op.intensity, 1),
        op.bound,
        DASH if op.share_of_peak is None else f"{op.share_of_peak:.0%}",
    )
