"""What the profiling report shows, as plain data: pure functions over a job's frames.

The report (``stepscope.report``) only renders what these functions return:
the job's lifecycle, quantiles of every system metric, steps aggregated over
ranks with their histograms (outliers: :mod:`.outliers`), and rule results ranked by severity.
The dashboard shows its rules and splits through the same functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypedDict

import numpy as np
import numpy.typing as npt
import pandas as pd

# finite and read_rules live in ._plain (show needs them without numpy or pandas)
from stepscope.analysis._plain import finite as finite
from stepscope.analysis._plain import read_rules as read_rules
from stepscope.jobfolder import STEP_PARTS, JobJson, NodeInfo, RuleVerdict

SPLIT = (*STEP_PARTS, "other")
ID_COLUMNS = ("time", "node", "interval_ms")
# Most severe first: the order of the rules' summary table.
STATUS_ORDER = ("IssuesFound", "Error", "InProgress", "NoIssuesFound", "NotApplicable")

_UNITS = (
    (re.compile(r"_bps$"), "B/s"),
    (re.compile(r"(^mem_used|^proc_rss|_mem_used|_mem_total)$"), "B"),
    (re.compile(r"_power_w$"), "W"),
    (re.compile(r"_temp_c$"), "°C"),
)
CORE_RE = re.compile(r"^cpu(\d+)$")
GPU_RE = re.compile(r"^gpu(\d+)_(.+)$")


class Lifecycle(TypedDict):
    """When a job began, stepped and ended, and its three stages in seconds (or None)."""

    begin: float | None
    first_step: float | None
    last_step_end: float | None
    end: float | None
    init_s: float | None
    loop_s: float | None
    final_s: float | None


class MetricRow(TypedDict):
    """One row of a node's metric table: the metric, its unit and its quantiles."""

    metric: str
    unit: str
    p50: float
    p95: float
    p99: float
    max: float


class Histogram(TypedDict):
    """Bin edges, counts per bin, and how many values were above the last edge."""

    edges: list[float]
    counts: list[int]
    clipped: int


def metric_unit(name: str) -> str:
    """The unit of a system metric column (docs/format.md): ``%``, ``B``, ``B/s``, ``W``, ``°C``."""
    for pattern, unit in _UNITS:
        if pattern.search(name):
            return unit
    return "%"


def lifecycle(meta: JobJson, steps: pd.DataFrame, events: pd.DataFrame) -> Lifecycle:
    """Initialization, training loop and finalization of a job (seconds, or None).

    Initialization is the first step's start minus the earliest ``process_start``
    event (the job's ``start_time`` without one); finalization is the job's
    ``end_time`` minus the last step's end (docs/format.md).
    """
    starts = events.loc[events["kind"] == "process_start", "time"] if len(events) else []
    begin = float(min(starts)) if len(starts) else finite(meta.get("start_time"))
    first = finite(steps["start"].min()) if len(steps) else None
    last = finite(steps["end"].max()) if len(steps) else None
    end = finite(meta.get("end_time"))
    return {
        "begin": begin,
        "first_step": first,
        "last_step_end": last,
        "end": end,
        "init_s": first - begin if first is not None and begin is not None else None,
        "loop_s": last - first if first is not None and last is not None else None,
        "final_s": end - last if end is not None and last is not None else None,
    }


def metric_table(wide: pd.DataFrame) -> list[MetricRow]:
    """p50/p95/p99/max of every metric column of one node's system samples."""
    rows: list[MetricRow] = []
    for col in wide.columns:
        if col in ID_COLUMNS:
            continue
        values = wide[col].dropna().to_numpy(dtype=np.float64)
        if not len(values):
            continue
        p50, p95, p99 = np.quantile(values, [0.5, 0.95, 0.99])
        rows.append(
            {
                "metric": col,
                "unit": metric_unit(col),
                "p50": float(p50),
                "p95": float(p95),
                "p99": float(p99),
                "max": float(values.max()),
            }
        )
    return rows


def numbered(columns: Iterable[str], pattern: re.Pattern[str], suffix: str = "") -> list[str]:
    """Columns such as ``cpu0..cpuN`` or ``gpu0_util..`` in numeric order."""
    found = []
    for col in columns:
        m = pattern.match(col)
        if m and (not suffix or m.group(2) == suffix):
            found.append((int(m.group(1)), col))
    return [col for _, col in sorted(found)]


def gpu_label(info: NodeInfo, column: str) -> str:
    """The series label of a GPU column: ``GPU 0``; of its memory %, with the card's memory
    in GB beside it (``GPU 0 (of 150.8 GB)``, from ``nodes/<node>.json``)."""
    index = column.split("_")[0][3:]
    if not column.endswith("_mem_util"):
        return f"GPU {index}"
    totals = {str(g.get("index")): g.get("mem_total") for g in info.get("gpus") or []}
    total = totals.get(index)
    return f"GPU {index} (of {float(total) / 1e9:.1f} GB)" if total else f"GPU {index}"


def per_step(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per step of one phase, aggregated over ranks, ordered by start.

    ``start`` is the earliest start, ``duration`` the slowest rank's (the one
    that sets the pace), ``median`` the median rank's, and the split columns
    the mean over ranks.
    """
    if steps.empty:
        return pd.DataFrame(columns=["step", "start", "duration", "median", "ranks", *SPLIT])
    g = steps.groupby("step", sort=False)
    out = g.agg(
        start=("start", "min"),
        duration=("duration", "max"),
        median=("duration", "median"),
        ranks=("rank", "nunique"),
    )
    out = out.join(g[list(SPLIT)].mean())
    return out.reset_index().sort_values("start", kind="stable").reset_index(drop=True)


def histogram(values: npt.NDArray[np.float64], bins: int = 40) -> Histogram:
    """Bin edges and counts over [min, p99.9]; larger values are counted in the last bin."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if not len(v):
        return {"edges": [0.0, 1.0], "counts": [0], "clipped": 0}
    lo, hi = float(v.min()), float(np.quantile(v, 0.999))
    hi = hi if hi > lo else lo + max(abs(lo) * 0.01, 1e-6)
    counts, edges = np.histogram(np.minimum(v, hi), bins=bins, range=(lo, hi))
    return {"edges": edges.tolist(), "counts": counts.tolist(), "clipped": int((v > hi).sum())}


def split_totals(steps: pd.DataFrame) -> dict[str, float]:
    """Seconds spent in each part of the split, summed over all steps and ranks; a part
    never measured (null in every step, e.g. an imported job's optimizer) is left out."""
    return {
        p: float(steps[p].fillna(0).sum()) for p in SPLIT if p in steps and steps[p].notna().any()
    }


def _max_severity(result: RuleVerdict) -> float:
    sev = [finite(f.get("severity")) for f in result.get("findings") or []]
    return max((s for s in sev if s is not None), default=0.0)


def rank_rules(results: Iterable[RuleVerdict]) -> list[RuleVerdict]:
    """Rule results most severe first: by status, worst finding, triggers, then name."""

    def key(r: RuleVerdict) -> tuple[int, float, float, str]:
        status = str(r.get("status"))
        order = STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)
        return order, -_max_severity(r), -(finite(r.get("triggers")) or 0), str(r.get("rule"))

    return [r.copy() for r in sorted(results, key=key)]
