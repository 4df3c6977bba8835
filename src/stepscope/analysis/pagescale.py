"""What the job page's charts share: the warm-up steps left above a step chart's y-range,
the one rounding of a share, and the words a legend uses for a metric column.

The report and the dashboard draw the same numbers from here, so a bar and the table
under it print one percentage, and a slow first step does not flatten the steady state.
"""

from __future__ import annotations

import re
from typing import TypedDict

import numpy as np
import numpy.typing as npt

__all__ = [
    "WARMUP_FACTOR",
    "WARMUP_MAX",
    "OffScale",
    "StepScale",
    "column_label",
    "percent",
    "percent_text",
    "step_scale",
    "warmup_count",
]

#: A leading step slower than this many times the median step is a warm-up step
#: (compilation, allocator and cuDNN set-up, the first batch's workers starting).
WARMUP_FACTOR = 2.0
#: At most this many leading steps are warm-up: a job slow from start to end is slow.
WARMUP_MAX = 5
#: Headroom above the highest step drawn, so its point is not cut by the frame.
HEADROOM = 1.08


class OffScale(TypedDict):
    """A warm-up step above the y-range: where it starts (unix s) and how long it took."""

    x: float
    value: float
    step: int


class StepScale(TypedDict):
    """A step chart's y-range top (None: fit every step) and the steps above it."""

    top: float | None
    off_scale: list[OffScale]


def warmup_count(durations: npt.ArrayLike) -> int:
    """How many leading steps (in start order) are warm-up steps: each slower than
    :data:`WARMUP_FACTOR` times the median step, at most :data:`WARMUP_MAX`."""
    d = np.asarray(durations, dtype=np.float64)
    known = d[~np.isnan(d)]
    if len(known) < 2 * WARMUP_MAX:  # too few steps to tell a warm-up from the pace
        return 0
    limit = WARMUP_FACTOR * float(np.median(known))
    n = 0
    while n < WARMUP_MAX and n < len(d) and not np.isnan(d[n]) and d[n] > limit:
        n += 1
    return n


def step_scale(x: npt.ArrayLike, durations: npt.ArrayLike, steps: npt.ArrayLike) -> StepScale:
    """The y-range top of a step chart whose leading warm-up steps are left above it:
    the highest other step with some headroom. A stall later in the job stays in range:
    only the leading steps are warm-up. (Lines drawn for reference, such as the outlier
    limit, may leave the range too: the steps are what the range is for.)"""
    d = np.asarray(durations, dtype=np.float64)
    n = warmup_count(d)
    rest = d[n:]
    if n == 0 or np.isnan(rest).all():
        return {"top": None, "off_scale": []}
    top = float(np.nanmax(rest)) * HEADROOM
    xs, st = np.asarray(x, dtype=np.float64), np.asarray(steps)
    off: list[OffScale] = [
        {"x": float(xs[i]), "value": float(d[i]), "step": int(st[i])}
        for i in range(n)
        if d[i] > top
    ]
    return {"top": top if off else None, "off_scale": off}


def percent(share: float) -> float:
    """A share (0..1) as the percentage every bar, legend and table prints: one decimal."""
    return round(100.0 * share, 1)


def percent_text(share: float) -> str:
    """``96.2%``: :func:`percent` written out (the page's script writes ``toFixed(1)``)."""
    return f"{percent(share):.1f}%"


_GPU = re.compile(r"^gpu(\d+)_(.+)$")
_WORDS = {
    "cpu": "CPU (all cores)",
    "cpu_iowait": "I/O wait",
    "proc_io_wait": "training processes' I/O wait",
    "mem_percent": "memory used",
    "proc_cpu_pct": "training processes' CPU",
    "proc_rss_pct": "training processes' memory",
    "duration": "step time",
    "data_wait": "waiting for data",
}
_GPU_WORDS = {"util": "utilization", "mem_util": "memory used", "power_w": "power"}


def column_label(column: str) -> str:
    """The words a legend shows for a metric column (``GPU 0 utilization``, not
    ``gpu0_util``); a column without words keeps its name, underscores as spaces."""
    if column in _WORDS:
        return _WORDS[column]
    m = _GPU.match(column)
    if m:
        return f"GPU {m.group(1)} {_GPU_WORDS.get(m.group(2), m.group(2).replace('_', ' '))}"
    return column.replace("_", " ")
