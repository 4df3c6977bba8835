"""A job's steps as points on a tracker's step axis, and its verdicts as tags and metrics.

Pure functions shared by every tracker export (:mod:`.to_mlflow`, :mod:`.to_wandb`)
and by their live loggers (:mod:`.live`). A point covers one bucket of consecutive
training steps (every rank's rows of those steps) and sits at the bucket's last step:

* ``step_time_s``: the median step duration (robust to the odd slow step);
* ``data_wait_share``: the bucket's data-loading wait over its step time (0-1);
* ``throughput_steps_per_s``: steps finished per second of the bucket's span;
* ``gpu_utilization_pct``: the mean GPU utilization of the system samples taken
  during the bucket (every GPU of every node); left out where none was recorded.

A long job is cut into at most ``MAX_POINTS`` buckets of equal step counts, so a
tracker's chart stays light whatever the job's length.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from stepscope.jobfolder import RuleVerdict

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

    from stepscope.analysis.diagnosis_text import EntryJson

MAX_POINTS = 1000
_GPU_UTIL = re.compile(r"gpu\d+_util")
PREFIX = "stepscope"
PHASE = "train"


@dataclass
class Point:
    """One point of the step axis: the step it sits at, its time, its values."""

    step: int
    time: float  # unix seconds: the bucket's last end
    values: dict[str, float] = field(default_factory=dict)


def _gpu_mean(system: pd.DataFrame | None, start: float, end: float) -> float | None:
    if system is None or not len(system):
        return None
    cols = [c for c in system.columns if _GPU_UTIL.fullmatch(c)]  # not gpu<i>_mem_util
    if not cols:
        return None
    times = system["time"].to_numpy()
    inside = system.loc[(times >= start) & (times <= end), cols].to_numpy(dtype="float64")
    inside = inside[~np.isnan(inside)]
    return float(inside.mean()) if inside.size else None  # none taken: not zero


def bucket_point(rows: pd.DataFrame, system: pd.DataFrame | None) -> Point | None:
    """The point of one bucket of step rows (any ranks); None for an empty bucket."""
    if not len(rows):
        return None
    duration = rows["duration"].to_numpy(dtype="float64")
    start, end = float(rows["start"].min()), float(rows["end"].max())
    values = {"step_time_s": float(np.median(duration))}
    total = float(np.nansum(duration))
    if "data_wait" in rows and total > 0:
        values["data_wait_share"] = float(np.nansum(rows["data_wait"])) / total
    steps = rows["step"].nunique()
    if end > start:
        values["throughput_steps_per_s"] = steps / (end - start)
    gpu = _gpu_mean(system, start, end)
    if gpu is not None:
        values["gpu_utilization_pct"] = gpu
    clean = {k: v for k, v in values.items() if math.isfinite(v)}
    return Point(int(rows["step"].max()), end, clean)


def step_points(
    steps: pd.DataFrame, system: pd.DataFrame | None, max_points: int = MAX_POINTS
) -> list[Point]:
    """The training steps of ``steps`` (``Job.steps()``) as at most ``max_points`` points."""
    rows = steps[steps["phase"] == PHASE] if "phase" in steps else steps
    if not len(rows):
        return []
    numbers = np.unique(rows["step"].to_numpy())
    per = max(1, math.ceil(len(numbers) / max_points))
    bucket = np.searchsorted(numbers, rows["step"].to_numpy()) // per
    points = [bucket_point(part, system) for _, part in rows.groupby(bucket, sort=True)]
    return [p for p in points if p is not None]


def metric_name(name: str, sep: str = ".") -> str:
    """``stepscope.<name>`` (MLflow) or ``stepscope/<name>`` (W&B: its chart sections)."""
    return f"{PREFIX}{sep}{name}"


def verdict_tags(verdicts: list[RuleVerdict], sep: str = ".") -> dict[str, str]:
    """``stepscope.rule.<Rule>`` -> the rule's status (``IssuesFound``, ...)."""
    return {metric_name(f"rule{sep}{v['rule']}", sep): str(v.get("status")) for v in verdicts}


def verdict_costs(verdicts: list[RuleVerdict], sep: str = ".") -> dict[str, float]:
    """``stepscope.rule.<Rule>.cost_s`` -> seconds the rule's problem cost (where known)."""
    costs: dict[str, float] = {}
    for v in verdicts:
        cost = v.get("cost_seconds")
        if isinstance(cost, int | float) and math.isfinite(cost):
            costs[metric_name(f"rule{sep}{v['rule']}{sep}cost_s", sep)] = float(cost)
    return costs


def diagnosis_text(entries: Sequence[EntryJson]) -> str:
    """The diagnosis (``show --json``'s ``diagnosis``) as lines: rule, status, message."""
    lines = [f"{e['rule']} ({e['status']}): {e['message']}" for e in entries]
    return "\n".join(lines) or "no problem found"
