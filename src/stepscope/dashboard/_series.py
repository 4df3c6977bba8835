"""Chart specs for the job page, built from a node's samples or a rank's steps.

Pure functions over DataFrames: a time window is cut out, downsampled with
:mod:`stepscope.analysis.downsample` (min/max per bucket keeps every spike, means
for stacks and heatmaps) and rounded like the report's specs, so that
``stepscope-charts.js`` draws them unchanged (docs/charts.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.downsample import mean_frame, minmax_frame
from ..analysis.report_data import CORE_RE, GPU_RE, SPLIT, numbered
from ..report._charts import compact, offsets

HEATMAP_BUCKETS = 300

# (chart id, title, unit, y range, {label: column}) for every node.
NODE_CHARTS: list[tuple[str, str, str, list[float] | None, dict[str, str]]] = [
    ("cpu", "CPU utilization", "%", [0, 100],
     {"CPU (all cores)": "cpu", "training processes": "proc_cpu_pct"}),
    ("iowait", "I/O wait", "%", None, {"I/O wait": "cpu_iowait"}),
    ("memory", "Memory", "%", [0, 100],
     {"memory used": "mem_percent", "training processes (RSS)": "proc_rss_pct"}),
    ("disk", "Disk throughput", "B/s", None, {"read": "disk_read_bps", "write": "disk_write_bps"}),
    ("net", "Network throughput", "B/s", None, {"received": "net_rx_bps", "sent": "net_tx_bps"}),
]  # fmt: skip
GPU_CHARTS = [("gpu_util", "GPU utilization", "util"), ("gpu_mem", "GPU memory used", "mem_util")]


def window(frame: pd.DataFrame, col: str, start: float | None, end: float | None) -> pd.DataFrame:
    """Rows of a frame sorted by ``col`` with ``start <= col < end``."""
    if frame.empty:
        return frame
    values = frame[col].to_numpy(np.float64)
    lo = 0 if start is None else int(np.searchsorted(values, start, "left"))
    hi = len(values) if end is None else int(np.searchsorted(values, end, "left"))
    return frame.iloc[lo:hi]


def _spec(kind: str, title: str, unit: str, t0: float, xs: Any, cols: Mapping[str, Any]) -> dict:
    series = [{"label": k, "values": compact(v)} for k, v in cols.items()]
    return {"kind": kind, "title": title, "unit": unit, "t0": t0, "x": offsets(xs, t0),
            "series": series}  # fmt: skip


def timeseries(
    title: str, unit: str, x: Any, cols: Mapping[str, Any], t0: float, buckets: int
) -> dict[str, Any]:
    """A line chart spec, min/max downsampled to ``buckets``."""
    xs, down = minmax_frame(x, cols, buckets)
    return _spec("timeseries", title, unit, t0, xs, down)


def derived(wide: pd.DataFrame, info: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The node's columns as float arrays, plus the training processes as % of the node."""
    cols = {c: wide[c].to_numpy(np.float64) for c in wide.columns if c not in ("node", "time")}
    cores = info.get("cpu_count") or len(numbered(wide.columns, CORE_RE)) or 1
    if "proc_cpu" in cols:
        cols["proc_cpu_pct"] = cols["proc_cpu"] / cores
    if "proc_rss" in cols and info.get("mem_total"):
        cols["proc_rss_pct"] = 100 * cols["proc_rss"] / float(info["mem_total"])
    return cols


def node_charts(
    wide: pd.DataFrame, info: Mapping[str, Any], t0: float, buckets: int
) -> dict[str, dict[str, Any]]:
    """Every chart of one node for the samples in ``wide`` (already windowed)."""
    if wide.empty:
        return {}
    x = wide["time"].to_numpy(np.float64)
    cols = derived(wide.dropna(axis=1, how="all"), info)
    charts: dict[str, dict[str, Any]] = {}
    for chart_id, title, unit, y_range, wanted in NODE_CHARTS:
        series = {label: cols[c] for label, c in wanted.items() if c in cols}
        if series:
            charts[chart_id] = timeseries(title, unit, x, series, t0, buckets)
            if y_range:
                charts[chart_id]["yRange"] = y_range
    for chart_id, title, suffix in GPU_CHARTS:
        names = numbered(cols, GPU_RE, suffix)
        if names:
            series = {f"GPU {c.split('_')[0][3:]}": cols[c] for c in names}
            charts[chart_id] = timeseries(title, "%", x, series, t0, buckets)
            charts[chart_id]["yRange"] = [0, 100]
    cores = numbered(cols, CORE_RE)
    if cores:
        charts["cores"] = heatmap("Utilization per CPU core", x, {c: cols[c] for c in cores}, t0,
                                  min(buckets, HEATMAP_BUCKETS))  # fmt: skip
    return charts


def heatmap(title: str, x: Any, rows: Mapping[str, Any], t0: float, buckets: int) -> dict[str, Any]:
    """Rows over time, bucket means rounded to integers."""
    xs, cols = mean_frame(x, rows, buckets)
    values = [[None if v != v else int(v) for v in np.round(c).tolist()] for c in cols.values()]
    return {"kind": "heatmap", "title": title, "unit": "%", "t0": t0, "x": offsets(xs, t0),
            "rows": list(cols), "values": values}  # fmt: skip


def step_charts(steps: pd.DataFrame, t0: float, buckets: int) -> dict[str, dict[str, Any]]:
    """Step duration (min/max), its split (stacked means) and the split's share."""
    if steps.empty:
        return {}
    x = steps["start"].to_numpy(np.float64)
    duration = {"duration": steps["duration"].to_numpy(np.float64)}
    parts = {p: steps[p].to_numpy(np.float64) for p in SPLIT if p in steps}
    charts = {"step_duration": timeseries("Step duration", "s", x, duration, t0, buckets)}
    xs, means = mean_frame(x, parts, buckets)
    charts["step_split"] = _spec("stacked", "Step split", "s", t0, xs, means)
    totals = [float(np.nansum(v)) for v in parts.values()]
    charts["step_share"] = {
        "kind": "share",
        "title": "Framework breakdown (time in each part)",
        "unit": "s",
        "labels": list(parts),
        "values": compact(totals),
    }
    return charts
