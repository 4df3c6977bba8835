"""Chart specs for the job page, built from a reducer over a node's samples or a rank's steps.

A reducer (:mod:`._reduce`) holds the rows of a time window and downsamples them
like :mod:`stepscope.analysis.downsample` (min/max per bucket keeps every spike,
means for stacks and heatmaps); the specs are rounded like the report's, so that
``stepscope-charts.js`` draws them unchanged (docs/charts.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
import numpy.typing as npt

from stepscope.analysis.downsample import FloatArray, compact, offsets
from stepscope.analysis.report_data import CORE_RE, GPU_RE, SPLIT, gpu_label, numbered
from stepscope.dashboard._outliers import (
    LIMIT,
    LIMIT_COLOR,
    OUTLIER_COLOR,
    OUTLIERS,
    Marks,
    on_points,
)
from stepscope.dashboard._reduce import Reducer
from stepscope.jobfolder import JsonObject, NodeInfo

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


def node_columns(names: Iterable[str]) -> list[str]:
    """The columns of a node's samples that its charts draw."""
    used = {c for *_, wanted in NODE_CHARTS for c in wanted.values()} | {"proc_cpu", "proc_rss"}
    names = list(names)
    gpus = [c for _, _, suffix in GPU_CHARTS for c in numbered(names, GPU_RE, suffix)]
    return [c for c in names if c in used] + gpus + numbered(names, CORE_RE)


#: How the step duration chart draws its outlier marks: the report's colours.
MARK_STYLES: dict[str, JsonObject] = {
    LIMIT: {"color": LIMIT_COLOR},
    OUTLIERS: {"points": True, "color": OUTLIER_COLOR},
}


def _spec(
    kind: str, title: str, unit: str, t0: float, xs: npt.ArrayLike, cols: Mapping[str, FloatArray]
) -> JsonObject:
    series: list[JsonObject] = [
        {"label": k, "values": compact(v), **MARK_STYLES.get(k, {})} for k, v in cols.items()
    ]
    return {"kind": kind, "title": title, "unit": unit, "t0": t0, "x": offsets(xs, t0),
            "series": series}  # fmt: skip


#: Derived column -> (the column it scales, the scale), applied after downsampling.
Scales = dict[str, tuple[str, Callable[[FloatArray], FloatArray]]]
Plan = list[tuple[str, str, str, list[float] | None, dict[str, str]]]


def derived(present: list[str], info: NodeInfo) -> Scales:
    """The training processes as % of the node: (column, scale), applied after downsampling.

    Both scales are positive factors, so the extremes and means of the scaled
    column are those of the column, scaled.
    """
    cores = info.get("cpu_count") or len(numbered(present, CORE_RE)) or 1
    out: Scales = {}
    if "proc_cpu" in present:
        out["proc_cpu_pct"] = ("proc_cpu", lambda v: v / cores)
    if "proc_rss" in present and info.get("mem_total"):
        total = float(info["mem_total"])
        out["proc_rss_pct"] = ("proc_rss", lambda v: 100 * v / total)
    return out


def _plan(present: list[str], scales: Scales, info: NodeInfo) -> Plan:
    """The line charts a node's columns allow: (id, title, unit, y range, {label: column})."""
    plan: Plan = []
    for chart_id, title, unit, y_range, wanted in NODE_CHARTS:
        series = {label: c for label, c in wanted.items() if c in present or c in scales}
        if series:
            plan.append((chart_id, title, unit, y_range, series))
    for chart_id, title, suffix in GPU_CHARTS:
        names = numbered(present, GPU_RE, suffix)
        if names:
            series = {gpu_label(info, c): c for c in names}  # memory: with the card's GB
            plan.append((chart_id, title, "%", [0, 100], series))
    return plan


def node_charts(data: Reducer, info: NodeInfo, t0: float, buckets: int) -> dict[str, JsonObject]:
    """Every chart of one node for the samples of ``data`` (already windowed).

    The line charts' columns are downsampled together: one pass over the data.
    """
    if not data.rows:
        return {}
    present = data.present()
    scales = derived(present, info)
    plan = _plan(present, scales, info)
    source = {c: scales.get(c, (c, None)) for *_, series in plan for c in series.values()}
    xs, down = data.minmax(list(dict.fromkeys(c for c, _ in source.values())), buckets)
    values = {c: f(down[col]) if f else down[col] for c, (col, f) in source.items()}
    charts: dict[str, JsonObject] = {}
    for chart_id, title, unit, y_range, series in plan:
        cols = {label: values[c] for label, c in series.items()}
        charts[chart_id] = _spec("timeseries", title, unit, t0, xs, cols)
        if y_range:
            charts[chart_id]["yRange"] = y_range
    cores = numbered(present, CORE_RE)
    if cores:
        charts["cores"] = heatmap("Utilization per CPU core", data, cores, t0,
                                  min(buckets, HEATMAP_BUCKETS))  # fmt: skip
    return charts


def heatmap(title: str, data: Reducer, rows: list[str], t0: float, buckets: int) -> JsonObject:
    """Columns ``rows`` over time, bucket means rounded to integers."""
    xs, cols = data.mean(rows, buckets)
    values = [[None if v != v else int(v) for v in np.round(c).tolist()] for c in cols.values()]
    return {"kind": "heatmap", "title": title, "unit": "%", "t0": t0, "x": offsets(xs, t0),
            "rows": list(cols), "values": values}  # fmt: skip


def step_charts(
    data: Reducer, t0: float, buckets: int, found: Marks | None = None
) -> dict[str, JsonObject]:
    """Step duration (min/max) with its outliers and their limit as the report marks
    them (``found``, from :func:`._outliers.marks`), its split (stacked means) and
    the split's share."""
    if not data.rows:
        return {}
    xs, down = data.minmax(["duration"], buckets)
    if found is not None:
        down.update(on_points(xs, found[0], found[1], buckets))
    charts = {"step_duration": _spec("timeseries", "Step duration", "s", t0, xs, down)}
    parts = [p for p in SPLIT if p in data.names]
    xs, means = data.mean(parts, buckets)
    charts["step_split"] = _spec("stacked", "Step split", "s", t0, xs, means)
    totals = data.totals(parts)
    charts["step_share"] = {
        "kind": "share",
        "title": "Framework breakdown (time in each part)",
        "unit": "s",
        "labels": parts,
        "values": compact(list(totals.values())),
    }
    return charts
