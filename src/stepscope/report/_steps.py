"""Steps: duration over time and as a histogram per phase, outliers, and the split."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.outliers import Definition, judge_steps
from stepscope.analysis.pagescale import percent_text, step_scale
from stepscope.analysis.report_data import SPLIT, histogram, per_step, split_totals
from stepscope.jobfolder import JsonObject
from stepscope.report._context import Context
from stepscope.report._device import device_block, phase_device
from stepscope.report._html import chart, fmt_duration, fmt_time, note, section, table

TOP_OUTLIERS = 10
LIMIT = "outlier limit"


def _marks(agg: pd.DataFrame, judged: pd.DataFrame) -> tuple[FloatArray, FloatArray]:
    """Per aggregated step: whether a rank's step is an outlier, and the highest rank
    limit (a slow outlier of the slowest rank lies above it). NaN: not judged."""
    by_step = judged.groupby("step").agg(outlier=("outlier", "any"), limit=("limit", "max"))
    found = by_step.reindex(agg["step"].to_numpy())
    return found["outlier"].to_numpy(np.float64), found["limit"].to_numpy(np.float64)


def _duration_chart(ctx: Context, agg: pd.DataFrame, phase: str, judged: pd.DataFrame) -> str:
    dur = agg["duration"].to_numpy(np.float64)
    multi = int(agg["ranks"].max()) > 1
    series = {"slowest rank" if multi else "duration": dur}
    if multi:
        series["median rank"] = agg["median"].to_numpy(np.float64)
    outlier, limit = _marks(agg, judged)
    series[LIMIT] = limit
    # Outliers as their own point series: min/max downsampling keeps their exact values.
    series["outliers"] = np.where(outlier == 1.0, dur, np.nan)
    chart_id = ctx.charts.add_timeseries(
        f"{phase} step duration", agg["start"], series, "s", phase=phase
    )
    spec = ctx.charts.specs[chart_id]
    series_specs = spec["series"]  # the list _ts wrote, outliers last
    if isinstance(series_specs, list):
        series_specs[-2].update(color="#999999")
        series_specs[-1].update(points=True, color="#d62728")
    caption = (
        "Each point is a step at its start time; red dots: outliers (StepOutlier's "
        "definition), grey: the outlier limit of the slowest rank."
    )
    return chart(chart_id, caption + _off_scale(ctx, spec, agg))


def _off_scale(ctx: Context, spec: JsonObject, agg: pd.DataFrame) -> str:
    """Leave the warm-up steps above the y-range (the steady state fills the chart);
    the chart marks them and the caption says so."""
    scale = step_scale(agg["start"], agg["duration"], agg["step"])
    if scale["top"] is None:
        return ""
    spec["yMax"] = scale["top"]
    spec["offScale"] = [
        {"x": round(o["x"] - ctx.charts.t0, 3), "value": o["value"], "step": o["step"]}
        for o in scale["off_scale"]
    ]
    steps = ", ".join(f"step {o['step']} ({fmt_duration(o['value'])})" for o in scale["off_scale"])
    return f" Warm-up above the scale (a triangle at the top): {steps}."


def _histogram_chart(ctx: Context, agg: pd.DataFrame, phase: str) -> str:
    hist = histogram(agg["duration"].to_numpy(np.float64))
    extra: dict[str, object] = {"phase": phase}
    chart_id = ctx.charts.add_histogram(f"{phase} step duration histogram", hist, "s", **extra)
    n = hist["clipped"]
    clipped = f" {n} slower step{'s are' if n > 1 else ' is'} counted in the last bar." if n else ""
    return chart(chart_id, "Number of steps per duration." + clipped)


def _split_charts(ctx: Context, agg: pd.DataFrame, rows: pd.DataFrame, phase: str) -> str:
    parts = [p for p in SPLIT if p in agg and agg[p].notna().any()]
    if not parts:
        return ""
    cols = {p: agg[p].to_numpy(np.float64) for p in parts}
    stacked = ctx.charts.add_stacked(f"{phase} step split over time", agg["start"], cols, "s")
    ctx.charts.specs[stacked]["phase"] = phase
    totals = split_totals(rows)
    total = sum(totals.values()) or 1.0
    shares = [v / total for v in totals.values()]  # the bar and the table print these
    share = ctx.charts.add_share(
        f"{phase} step split in total", list(totals), list(totals.values()), shares
    )
    trows = [
        (p, fmt_duration(v), percent_text(s))
        for (p, v), s in zip(totals.items(), shares, strict=True)
    ]
    trows += [(p, "unknown", "unknown") for p in SPLIT if p not in totals]  # never measured
    # on a GPU these are host times: where the host launched work or waited for the queue
    host = " (host times)" if phase_device(rows) is not None else ""
    return (
        f"<h4>Split of a step{host}</h4>"
        + chart(
            stacked,
            "Mean over ranks per step (mean per time bucket on long jobs)."
            + _off_scale(ctx, ctx.charts.specs[stacked], agg),
        )
        + chart(share, "Total over all steps and ranks.")
        + table(["Part", "Time", "Share"], trows, cls="num split")
    )


def _outlier_table(judged: pd.DataFrame, definition: Definition) -> str:
    if not len(judged):
        return note("Too few steps to look for outliers.")
    found = judged[judged["outlier"].to_numpy()]
    how = (
        f"more than {definition.stddev:g} robust standard deviations and "
        f"{fmt_duration(definition.min_excess_s)} from the median of the steps around it"
    )
    if found.empty:
        return note(f"No outliers: no step of {len(judged)} judged took {how}.")
    top = found.reindex(found["excess"].abs().sort_values(ascending=False).index)[:TOP_OUTLIERS]
    body = [
        (
            int(r.step),
            int(r.rank),
            fmt_duration(r.duration),
            fmt_duration(r.baseline),
            fmt_duration(r.excess),
            fmt_time(r.start),
        )
        for r in top.itertuples()
    ]
    title = (
        f"<p>{len(found)} outlier steps of {len(judged)} judged took {how}; "
        f"the {len(top)} furthest:</p>"
    )
    head = ["Step", "Rank", "Duration", "Around it", "Excess", "Started"]
    return title + table(head, body, cls="num outliers")


def _stats_table(rows: pd.DataFrame) -> str:
    d = rows["duration"].to_numpy(np.float64)
    q = np.quantile(d, [0.5, 0.95, 0.99]) if len(d) else [math.nan] * 3
    cells = [(len(rows), *(fmt_duration(float(v)) for v in (d.mean(), *q, d.max())))]
    return table(["Steps (all ranks)", "mean", "p50", "p95", "p99", "max"], cells, cls="num")


def phase_section(ctx: Context, phase: str, rows: pd.DataFrame) -> str:
    """One phase (train or eval): statistics, outliers and charts."""
    agg = per_step(rows)
    definition = Definition.of_job(ctx.rules)
    judged = judge_steps(rows, definition)
    body = (
        _duration_chart(ctx, agg, phase, judged)  # the page's first chart
        + device_block(ctx, rows, phase)  # a GPU job's step: the device's view next
        + _stats_table(rows)
        + _histogram_chart(ctx, agg, phase)
        + _outlier_table(judged, definition)
        + _split_charts(ctx, agg, rows, phase)
    )
    return section(f"steps-{phase}", f"{phase.capitalize()} steps", body, level=3)


def steps_section(ctx: Context) -> str:
    """Every phase that has steps, training first."""
    if ctx.steps.empty:
        return section("steps", "Steps", note("No steps were recorded."))
    phases = sorted(ctx.steps["phase"].unique(), key=lambda p: (p != "train", p))
    parts = [phase_section(ctx, str(p), ctx.steps[ctx.steps["phase"] == p]) for p in phases]
    intro = note(
        "With several ranks, a step's duration is the slowest rank's. Outliers are "
        "StepOutlier's, with the job's parameters: a step further from the median of "
        "the steps around it, of its rank, than the limit (docs/rules.md)."
    )
    return section("steps", "Steps", intro + "".join(parts))
