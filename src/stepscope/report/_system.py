"""System usage per node: quantiles of every metric, time series and heatmaps."""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from stepscope.analysis.report_data import (
    CORE_RE,
    GPU_RE,
    MetricRow,
    gpu_label,
    metric_table,
    numbered,
)
from stepscope.jobfolder import GpuFacts, NodeInfo
from stepscope.report._context import Context, Progress
from stepscope.report._html import chart, esc, fmt_value, note, section, table

# (title, unit, {label: column}, y range): the time series drawn for every node.
_PLAIN_CHARTS: list[tuple[str, str, dict[str, str], list[float] | None]] = [
    (
        "Memory",
        "%",
        {"memory used": "mem_percent", "training processes (RSS)": "proc_rss_pct"},
        [0, 100],
    ),
    ("Disk throughput", "B/s", {"read": "disk_read_bps", "write": "disk_write_bps"}, None),
    ("Network throughput", "B/s", {"received": "net_rx_bps", "sent": "net_tx_bps"}, None),
]
_GPU_CHARTS = [
    ("GPU utilization", "util", "%", [0, 100]),
    ("GPU memory used", "mem_util", "%", [0, 100]),
    ("GPU power", "power_w", "W", None),
]


def node_anchor(node: str) -> str:
    return "node-" + "".join(c if c.isalnum() else "-" for c in node)


def _derived(wide: pd.DataFrame, info: NodeInfo) -> pd.DataFrame:
    """Training-process CPU and memory as % of the node, to share an axis with the totals."""
    out = wide.copy()
    cores = info.get("cpu_count") or len(numbered(wide.columns, CORE_RE)) or 1
    if "proc_cpu" in out:
        out["proc_cpu_pct"] = out["proc_cpu"] / cores
    if "proc_rss" in out and info.get("mem_total"):
        out["proc_rss_pct"] = 100 * out["proc_rss"] / float(info["mem_total"])
    return out


def _series(wide: pd.DataFrame, columns: dict[str, str]) -> dict[str, npt.NDArray[np.float64]]:
    return {label: wide[col].to_numpy(np.float64) for label, col in columns.items() if col in wide}


def _cpu_chart(ctx: Context, wide: pd.DataFrame, node: str) -> str:
    cols = {
        "CPU (all cores)": "cpu",
        "I/O wait": "cpu_iowait",
        "training processes": "proc_cpu_pct",
    }
    chart_id = ctx.charts.add_timeseries(
        f"CPU utilization, {node}",
        wide["time"],
        _series(wide, cols),
        "%",
        yRange=[0, 100],
        node=node,
        metrics=[c for c in cols.values() if c in wide],
    )
    return chart(chart_id, "Training processes: their CPU time as % of all the node's cores.")


def _plain_charts(ctx: Context, wide: pd.DataFrame, node: str) -> str:
    out = []
    for title, unit, cols, y_range in _PLAIN_CHARTS:
        series = _series(wide, cols)
        if series:
            extra: dict[str, object] = {"yRange": y_range} if y_range else {}
            metrics = [c for c in cols.values() if c in wide]
            out.append(
                chart(
                    ctx.charts.add_timeseries(
                        f"{title}, {node}",
                        wide["time"],
                        series,
                        unit,
                        node=node,
                        metrics=metrics,
                        **extra,
                    )
                )
            )
    return "".join(out)


def _gpu_charts(ctx: Context, wide: pd.DataFrame, node: str, info: NodeInfo) -> str:
    out = []
    for title, suffix, unit, y_range in _GPU_CHARTS:
        cols = numbered(wide.columns, GPU_RE, suffix)
        if not cols:
            continue
        series = {gpu_label(info, c): wide[c].to_numpy(np.float64) for c in cols}
        extra: dict[str, object] = {"yRange": y_range} if y_range else {}
        chart_id = ctx.charts.add_timeseries(
            f"{title}, {node}", wide["time"], series, unit, node=node, metrics=cols, **extra
        )
        out.append(chart(chart_id))
    return "".join(out)


def _heatmaps(ctx: Context, wide: pd.DataFrame, node: str) -> str:
    out = []
    for title, cols, prefix in (
        ("Utilization per CPU core", numbered(wide.columns, CORE_RE), "cpu"),
        ("Utilization per GPU", numbered(wide.columns, GPU_RE, "util"), "GPU "),
    ):
        if cols:
            rows = {(c if prefix == "cpu" else prefix + c.split("_")[0][3:]): wide[c] for c in cols}
            chart_id = ctx.charts.add_heatmap(f"{title}, {node}", wide["time"], rows)
            ctx.charts.specs[chart_id].update(node=node, metrics=cols)
            out.append(
                chart(
                    chart_id,
                    "Mean per time bucket: white 0 %, blue 50 %, red 100 %; grey: no data.",
                )
            )
    return "".join(out)


_QUANTILES: tuple[Literal["p50", "p95", "p99", "max"], ...] = ("p50", "p95", "p99", "max")


def _quantile_table(wide: pd.DataFrame) -> str:
    rows = metric_table(wide.drop(columns=["proc_cpu_pct", "proc_rss_pct"], errors="ignore"))
    head = ["Metric", "p50", "p95", "p99", "max"]

    by_name = {r["metric"]: r for r in rows}

    def cells(r: MetricRow) -> tuple[str, ...]:
        used = by_name.get(r["metric"].replace("_mem_util", "_mem_used"))
        if r["metric"].endswith("_mem_util") and used is not None:  # a GPU's memory: % and GB
            return (r["metric"], *(f"{fmt_value(r[k], '%')} ({fmt_value(used[k], 'B')})"
                                   for k in _QUANTILES))  # fmt: skip
        return (r["metric"], *(fmt_value(r[k], r["unit"]) for k in _QUANTILES))

    main = [cells(r) for r in rows if not CORE_RE.match(r["metric"])]
    cores = [cells(r) for r in rows if CORE_RE.match(r["metric"])]
    html = table(head, main, cls="num quantiles")
    if cores:
        html += (
            f"<details><summary>Per-core CPU ({len(cores)} cores)</summary>"
            f"{table(head, cores, cls='num quantiles')}</details>"
        )
    return html


def _gpu_fact(gpu: GpuFacts) -> str:
    """``NVIDIA H200 (150.8 GB)``: a GPU's name and memory."""
    total = gpu.get("mem_total")
    return str(gpu.get("name")) + (f" ({fmt_value(float(total), 'B')})" if total else "")


def _facts(info: NodeInfo, node: str, wide: pd.DataFrame) -> str:
    gpus = ", ".join(_gpu_fact(g) for g in info.get("gpus") or []) or "none"
    mem = fmt_value(info.get("mem_total"), "B") if info.get("mem_total") else "?"
    interval = info.get("interval_ms") or (int(wide["interval_ms"].iloc[-1]) if len(wide) else "?")
    text = (
        f"{info.get('hostname', node)}: {info.get('cpu_count', '?')} cores, {mem} memory, "
        f"GPUs: {gpus}; {len(wide)} samples every {interval} ms"
    )
    return f'<p class="facts-line">{esc(text)}</p>'


def node_section(ctx: Context, node: str) -> str:
    """Everything about one node's system metrics."""
    wide = ctx.system(node)
    if wide.empty:
        return section(node_anchor(node), f"Node {node}", note("No system samples."), level=3)
    info = _node_info(ctx, node)
    wide = _derived(wide, info)
    body = (  # the charts first (GPU, then CPU), the facts and percentiles under them
        _gpu_charts(ctx, wide, node, info)
        + _cpu_chart(ctx, wide, node)
        + _plain_charts(ctx, wide, node)
        + _heatmaps(ctx, wide, node)
        + _facts(info, node, wide)
        + _quantile_table(wide)
    )
    return section(node_anchor(node), f"Node {node}", body, level=3)


def _node_info(ctx: Context, node: str) -> NodeInfo:
    try:
        return ctx.job.node_info(node)
    except (OSError, ValueError):
        return {}


def system_section(ctx: Context, progress: Progress | None = None) -> str:
    """System usage of every node."""
    nodes = ctx.job.nodes()
    if not nodes:
        return section("system", "System usage", note("No system metrics were recorded."))
    parts = []
    for i, node in enumerate(nodes):
        if progress:
            progress(f"system {node}", i / len(nodes))
        parts.append(node_section(ctx, node))
    intro = note(
        "Percentiles over the whole job; charts keep every spike (min and max per time bucket)."
    )
    return section("system", "System usage", intro + "".join(parts))
