"""The chart answers of :class:`._data.Source`: one node's samples and one rank's steps
in a time window, reduced to at most ``buckets`` points per series, as plain data.

:class:`._data.Source` finds the parts, caches the answers and encodes them; these
functions compute an answer from the parts it found.
"""

from __future__ import annotations

import numpy as np

from stepscope.analysis.device import (
    DEVICE_INPUTS,
    busy_text,
    device_parts,
    device_split,
    ran_ahead_text,
    split_text,
)
from stepscope.analysis.outliers import Definition
from stepscope.analysis.pagescale import StepScale, percent
from stepscope.analysis.profiled import Spans
from stepscope.analysis.report_data import SPLIT
from stepscope.dashboard._cache import Sized
from stepscope.dashboard._outliers import marks, warmup
from stepscope.dashboard._reduce import Cut, columns, cut, last_value, reducer
from stepscope.dashboard._series import node_charts, node_columns, step_charts
from stepscope.dashboard._streams import Part
from stepscope.errors import StepscopeError
from stepscope.jobfolder import JsonObject, NodeInfo
from stepscope.read import Job

#: The job's start time (the charts' zero) and the window ``[start, end)`` asked for.
Window = tuple[float, float | None, float | None]


def node_answer(job: Job, node: str, parts: tuple[Part, ...], window: Window, buckets: int,
                summaries: Sized) -> JsonObject:  # fmt: skip
    """Chart specs of one node's samples in the window (``Source.system``)."""
    t0, start, end = window
    cuts = cut(parts, start, end)
    data = reducer(cuts, node_columns(columns(parts)), buckets, summaries)
    info: NodeInfo
    try:
        info = job.node_info(node)
    except (OSError, ValueError, StepscopeError):
        info = {}
    interval = last_value(cuts, "interval_ms")
    return {
        "node": node,
        "t0": t0,
        "samples": data.rows,
        "first": min(float(c.x[0]) for c in cuts) if cuts else None,
        "last": max(float(c.x[-1]) for c in cuts) if cuts else None,
        "interval_ms": int(interval) if interval is not None else None,
        "gpus": gpu_memory(info, cuts),
        "charts": node_charts(data, info, t0, buckets),
    }


def gpu_memory(info: NodeInfo, cuts: list[Cut]) -> list[JsonObject]:
    """Each GPU of the node: its name, memory, and the memory used at the window's latest
    sample, in bytes and % (the page writes the GB beside the %)."""
    out: list[JsonObject] = []
    for gpu in info.get("gpus") or []:
        prefix = f"gpu{gpu.get('index')}_"  # a column no sample has reads NaN: null
        out.append({
            "index": gpu.get("index"),
            "name": gpu.get("name"),
            "mem_total": gpu.get("mem_total"),
            "mem_used": last_value(cuts, prefix + "mem_used"),
            "mem_util": last_value(cuts, prefix + "mem_util"),
        })  # fmt: skip
    return out


def device_answer(cuts: list[Cut]) -> JsonObject | None:
    """The device split of the window's steps, with the words ``show`` and the report
    use (docs/gpu.md); None without device times (a CPU job)."""
    columns = {n: np.concatenate([c.column(n) for c in cuts]).astype(np.float64)
               for n in DEVICE_INPUTS} if cuts else {}  # fmt: skip
    split = device_split(columns)
    if split is None:
        return None
    line = f"{split_text(split)}: {busy_text(split)}"
    parts = device_parts(split)
    chart: JsonObject = {  # the report's bar: the same seconds and percentages
        "kind": "share",
        "title": "GPU time per step (median step)",
        "unit": "s",
        "labels": [p for p, _ in parts],
        "values": [v["seconds"] for _, v in parts],
        "percents": [percent(v["share"]) for _, v in parts],
    }
    return {"split": dict(split), "text": line, "ran_ahead": ran_ahead_text(split), "chart": chart}


def steps_answer(parts: tuple[Part, ...], rank: int, phase: str, window: Window, buckets: int,
                 summaries: Sized, definition: Definition,
                 spans: Spans | None = None) -> JsonObject:  # fmt: skip
    """Chart specs of one rank's steps of ``phase`` that began in the window
    (``Source.steps``), with the outliers ``definition`` marks (leaving out the steps
    that the windows of ``spans`` could have slowed)."""
    t0, start, end = window
    phased = [p.only("phase", phase) for p in parts]
    cuts = cut(phased, start, end)
    have = columns(parts)
    names = [c for c in ("duration", *SPLIT) if c in have]
    data = reducer(cuts, names, buckets, summaries)
    found = marks(phased, cuts, rank, phase, definition, spans)
    charts = step_charts(data, t0, buckets, found)
    if "step_duration" in charts:  # both step charts over time: the split stacks to the step
        scale = warmup(phased, rank, phase)
        for chart in ("step_duration", "step_split"):
            off_scale(charts[chart], scale, t0, cuts)
    last = last_value(cuts, "step")
    return {
        "rank": rank,
        "phase": phase,
        "t0": t0,
        "count": data.rows,
        "last_step": int(last) if last is not None else None,
        "device": device_answer(cuts),
        "charts": charts,
    }


def off_scale(spec: JsonObject, scale: StepScale, t0: float, cuts: list[Cut]) -> None:
    """Set the step chart's y top where warm-up steps of the window stand above it."""
    lo, hi = min(float(c.x[0]) for c in cuts), max(float(c.x[-1]) for c in cuts)
    shown = [o for o in scale["off_scale"] if lo <= o["x"] <= hi]
    if scale["top"] is None or not shown:
        return
    spec["yMax"] = scale["top"]
    spec["offScale"] = [
        {"x": round(o["x"] - t0, 3), "value": o["value"], "step": o["step"]} for o in shown
    ]
