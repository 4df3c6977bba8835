"""Windows shared by the rules: patience, aligned tumbling windows, runs of hits.

Windows are aligned to the job's start (``RuleInput.start()``): window ``k`` of
width ``w`` is ``[origin + k*w, origin + (k+1)*w)``, half-open, so a sample on
an edge belongs to exactly one window, and a window means the same span in a
live scan and in the final evaluation. A problem that starts late is judged in
its own windows, never diluted by hours of healthy data before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.rules._input import RuleInput
from stepscope.rules._types import Finding

GPU_UTIL = re.compile(r"^gpu(\d+)_util$")
T = TypeVar("T")


def severity(value: float, threshold: float, worst: float) -> float:
    """0.3 at the threshold, rising linearly to 1.0 at ``worst`` (either direction)."""
    span = worst - threshold
    if span == 0:
        return 1.0
    return float(0.3 + 0.7 * min(1.0, max(0.0, (value - threshold) / span)))


def share_finding(
    message: str,
    recommendation: str,
    rows: pd.DataFrame,
    rank: int,
    steps: tuple[int, int],
    share: float,
    threshold: float,
) -> Finding:
    """A finding on a span of one rank's steps (``rows``, with ``node``, ``start``,
    ``end``) whose measure is a share in % compared with ``threshold``."""
    return Finding(
        message,
        recommendation,
        severity(share, threshold, 100.0),
        node=str(rows["node"].iloc[0]),
        rank=rank,
        start=float(rows["start"].min()),
        end=float(rows["end"].max()),
        steps=steps,
        value=share,
        threshold=threshold,
    )


def run_finding(
    message: str,
    recommendation: str,
    run: list[Hit],
    value: float,
    threshold: float,
    worst: float,
    *,
    node: str | None,
    device: str | None = None,
    rank: int | None = None,
) -> Finding:
    """A finding on a run of windows (from its first window's start to its last's end)
    whose measure ``value`` is compared with ``threshold``; ``worst`` is where the
    severity reaches 1 (see :func:`severity`)."""
    return Finding(
        message,
        recommendation,
        severity(value, threshold, worst),
        node=node,
        device=device,
        rank=rank,
        start=run[0].start,
        end=run[-1].end,
        value=value,
        threshold=threshold,
    )


def gpu_indices(system: pd.DataFrame) -> list[int]:
    """The GPUs (``gpu<i>_util`` columns) with at least one value."""
    cols = {c: int(m.group(1)) for c in system.columns if (m := GPU_UTIL.match(str(c)))}
    if not cols or not len(system):
        return []
    seen = system[list(cols)].notna().to_numpy().any(axis=0)
    return sorted(g for g, ok in zip(cols.values(), seen, strict=True) if ok)


# Entries ``data.cache`` keeps: the node's GPUs and the last framing (or the training
# steps, ``_train_frame``). A framing of a day of samples is tens of MB, and the rules
# that share one are judged one after another (ProfilerReport's: CPUBottleneck,
# GPUIdleBetweenSteps, GPUMemoryIncrease): keeping every framing held 150 MB more, the
# last two 35 MB more than the last (a day-long node's evaluation: 382 -> 351 MB).
SHARED_ENTRIES = 2


def shared(data: RuleInput, key: Hashable, frame: object, make: Callable[[], T]) -> T:
    """``make()``, computed once per input for the rules that judge the same ``frame``
    (``data.cache`` entries hold the frame they were computed from, checked by identity;
    the :data:`SHARED_ENTRIES` used last are kept).

    Every ``key`` is made by one ``make`` only, so its entry holds a ``T``.
    """
    hit = data.cache.pop(key, None)
    if hit is None or hit[0] is not frame:
        hit = (frame, make())
    data.cache[key] = hit  # the newest last: the first entry is the least recently used
    while len(data.cache) > SHARED_ENTRIES:
        del data.cache[next(iter(data.cache))]
    return cast(T, hit[1])


def node_gpus(data: RuleInput) -> list[int]:
    """:func:`gpu_indices` of ``data.system``, found once per input."""
    return shared(data, "gpus", data.system, lambda: gpu_indices(data.system))


def no_gpu_reason(data: RuleInput) -> str:
    nodes = ", ".join(data.node_names()) or "this job"
    return f"no GPU metrics on {nodes} (CPU-only): this rule judges GPUs"


def patience_begin(data: RuleInput, patience: int) -> float | None:
    """The first time judged after the first ``patience`` sampling intervals of the
    job; None when every sample of ``data.system`` is past it."""
    system = data.system
    if not len(system):
        return None
    node = str(system["node"].iloc[0]) if "node" in system else None
    begin = data.start() + patience * data.interval_s(node)
    return None if system["time"].min() >= begin else begin


def patience_reason(patience: int, total: int) -> str:
    return (
        f"not enough data yet: all {total} samples fall in the patience of {patience} "
        "samples at the start of the job"
    )


def window_width(data: RuleInput, node: str | None, window: int) -> float:
    """The duration of ``window`` samples on ``node``, seconds."""
    return window * data.interval_s(node)


def window_index(
    times: pd.Series | FloatArray, origin: float, width: float
) -> npt.NDArray[np.int64]:
    """The aligned window of each time: ``floor((t - origin) / width)``."""
    return np.floor((np.asarray(times, dtype=np.float64) - origin) / width).astype(np.int64)


def with_windows(data: RuleInput, frame: pd.DataFrame, window: int) -> pd.DataFrame:
    """``frame`` with a ``win`` column: its aligned window of ``window`` samples."""
    node = str(frame["node"].iloc[0]) if len(frame) and "node" in frame else None
    width = window_width(data, node, window)
    return frame.assign(win=window_index(frame["time"], data.start(), width))


@dataclass(frozen=True)
class Hit:
    """The condition of a rule held for ``key`` (a device, a pair) in window ``win``."""

    key: str
    win: int
    start: float
    end: float
    value: float


def runs(hits: Iterable[Hit]) -> list[list[Hit]]:
    """Hits grouped into runs of consecutive windows of one key (one finding each)."""
    out: list[list[Hit]] = []
    last: dict[str, list[Hit]] = {}
    for hit in sorted(hits, key=lambda h: (h.key, h.win)):
        run = last.get(hit.key)
        if run is not None and hit.win == run[-1].win + 1:
            run.append(hit)
            continue
        run = [hit]
        last[hit.key] = run
        out.append(run)
    return out


def worst_of(run: list[Hit], higher_is_worse: bool = True) -> float:
    values = [h.value for h in run]
    return max(values) if higher_is_worse else min(values)
