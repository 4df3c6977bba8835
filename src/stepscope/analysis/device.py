"""The device's view of a GPU step, from the steps' CUDA-event columns (docs/gpu.md).

On a GPU, a step's ``forward``, ``backward`` and ``optimizer`` are host times: the
host launches kernels and moves on, and blocks wherever the launch queue is full,
so its parts say where it waited, not where the GPU worked. ``gpu_forward``,
``gpu_backward`` and ``gpu_optimizer`` (docs/format.md) are the device's time in
each part. :func:`device_split` turns them into what ``show``, the report and the
dashboard lead with; it takes numpy columns (no pandas: ``show`` must answer at
once), so any reader can call it on the rows it chose (one rank, one phase).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.pagescale import percent_text

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "DEVICE_COLUMNS",
    "DEVICE_INPUTS",
    "DEVICE_PARTS",
    "RAN_AHEAD",
    "DevicePart",
    "DeviceSplit",
    "busy_text",
    "device_parts",
    "device_split",
    "ran_ahead_text",
    "split_text",
]

#: The parts the device times, and the step column that holds each.
DEVICE_PARTS = ("forward", "backward", "optimizer")
DEVICE_COLUMNS = {part: f"gpu_{part}" for part in DEVICE_PARTS}
#: The step columns :func:`device_split` reads.
DEVICE_INPUTS = ("duration", *DEVICE_COLUMNS.values())
#: The host ran ahead when its median step is shorter than this share of the device's
#: median work per step: a step cannot end before its work unless that work finished
#: during later steps. A GPU-bound loop whose queue is full steps at the GPU's pace
#: (host/device near 1), so 0.8 leaves room for noise on both sides.
RAN_AHEAD = 0.8


class DevicePart(TypedDict):
    """One part of the device split: its median seconds per step, and its share of the
    parts' medians (so the shares add up to 1 and read the same as the seconds)."""

    seconds: float
    share: float


class DeviceSplit(TypedDict):
    """Where the device's time went in a set of steps (one rank's phase).

    ``steps``: steps whose measured parts all have a device time (the timed steps: the
    agent times one per 50 ms of training); the device figures are theirs. A part
    never measured (``gpu_backward`` in eval) is None.
    ``step_seconds``: median device time per step (the measured parts' sum).
    ``host_step_seconds``: median host ``duration`` of all the steps.
    ``busy_share``: device time over host step time, summed over all the steps (the
    timed steps' median device time standing for each untimed one), at most 1 (the GPU-busy share of
    step time; sums, because a step's work may finish during the next ones while the
    host runs ahead). ``ran_ahead``: see :data:`RAN_AHEAD`.
    """

    steps: int
    forward: DevicePart | None
    backward: DevicePart | None
    optimizer: DevicePart | None
    step_seconds: float
    host_step_seconds: float | None
    busy_share: float | None
    ran_ahead: bool


def _round(x: float) -> float:
    return round(float(x), 6)


def device_split(columns: Mapping[str, FloatArray]) -> DeviceSplit | None:
    """The device split of the steps in ``columns`` (``duration`` and the ``gpu_*``
    columns of the same rows, NaN for null); None when no step has a device time
    (a CPU job, or an imported one)."""
    measured = [
        p
        for p in DEVICE_PARTS
        if DEVICE_COLUMNS[p] in columns and not np.isnan(columns[DEVICE_COLUMNS[p]]).all()
    ]
    if not measured:
        return None
    values = np.stack([np.asarray(columns[DEVICE_COLUMNS[p]], np.float64) for p in measured])
    count = values.shape[1]
    rows: npt.NDArray[np.bool_] = np.asarray(~np.isnan(values).any(axis=0), dtype=bool)
    if not rows.any():
        return None
    values = values[:, rows]
    per_step = values.sum(axis=0)
    medians = np.median(values, axis=1)
    total = float(medians.sum()) or 1.0
    parts: dict[str, DevicePart | None] = dict.fromkeys(DEVICE_PARTS)
    for part, median in zip(measured, medians, strict=True):
        parts[part] = {"seconds": _round(median), "share": _round(median / total)}
    step_seconds = float(np.median(per_step))
    # The host's figures are over every row: the agent times one step per 50 ms of
    # training (agent/_cuda.py). In the busy share a timed step counts its own device
    # time and an untimed one the timed steps' median (robust to a slow first step).
    host = np.asarray(columns.get("duration", np.full(count, np.nan)), np.float64)
    known = ~np.isnan(host)
    host_p50 = float(np.median(host[known])) if known.any() else None
    host_sum = float(host[known].sum()) if known.any() else 0.0
    timed = known & rows
    untimed = int(np.count_nonzero(known & ~rows))
    device_sum = float(per_step[timed[rows]].sum()) + step_seconds * untimed
    busy = min(device_sum / host_sum, 1.0) if host_sum > 0 else None
    return {
        "steps": int(rows.sum()),
        "forward": parts["forward"],
        "backward": parts["backward"],
        "optimizer": parts["optimizer"],
        "step_seconds": _round(step_seconds),
        "host_step_seconds": None if host_p50 is None else _round(host_p50),
        "busy_share": None if busy is None else _round(busy),
        "ran_ahead": host_p50 is not None and host_p50 < RAN_AHEAD * step_seconds,
    }


def device_parts(split: DeviceSplit) -> list[tuple[str, DevicePart]]:
    """The measured parts of ``split`` in step order: (name, part)."""
    parts = (split["forward"], split["backward"], split["optimizer"])
    return [(n, p) for n, p in zip(DEVICE_PARTS, parts, strict=True) if p is not None]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def split_text(split: DeviceSplit) -> str:
    """``forward 2.90 ms (32.4%), backward 5.63 ms (62.8%), optimizer 0.43 ms (4.8%)``."""
    return ", ".join(
        f"{name} {_ms(part['seconds'])} ({percent_text(part['share'])})"
        for name, part in device_parts(split)
    )


def busy_text(split: DeviceSplit) -> str:
    """``8.96 ms a step; GPU busy 75.7% of step time``."""
    busy = split["busy_share"]
    share = "" if busy is None else f"; GPU busy {percent_text(busy)} of step time"
    return f"{_ms(split['step_seconds'])} a step{share}"


def ran_ahead_text(split: DeviceSplit | None) -> str | None:
    """The one line ``show``, the report and the dashboard say when the host ran ahead
    of the GPU; None when it did not (or without device times)."""
    if split is None or not split["ran_ahead"] or split["host_step_seconds"] is None:
        return None
    return (
        "the host runs ahead of the GPU: host times show where it waited for the launch "
        f"queue, not where the GPU worked (host step p50 {_ms(split['host_step_seconds'])}, "
        f"device {_ms(split['step_seconds'])})"
    )
