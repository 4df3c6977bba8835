"""What is true on a GPU: the host's step parts the device waited for, and what the
NVML samples of a training loop show (docs/rules.md, "On a GPU").

On a GPU the host runs ahead: it queues kernels and blocks wherever the launch
queue fills, so a host part (``other``, ``data_wait``, ``forward``) costs the job
time only while the device has nothing to do. A step whose device parts are known
(``gpu_forward``, ``gpu_backward``, ``gpu_optimizer``: CUDA-event spans, seconds)
left the device idle for at most ``duration - (gpu_forward + gpu_backward +
gpu_optimizer)``, floored at 0: the **device idle within the step**. A host part
costs at most that; a step without device parts (a CPU job, an import, the device
timer off) keeps its host view.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.jobfolder import JsonObject
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import Part

DEVICE_PARTS = ("gpu_forward", "gpu_backward", "gpu_optimizer")
HOST_PARTS = ("forward", "backward", "optimizer")  # the host's side of each device part
# The step columns device_idle, waited_on and with_waited read.
DEVICE_INPUT = ("rank", "phase", "duration", *HOST_PARTS, *DEVICE_PARTS)
# The step columns the data-wait rules (DataLoading, DataLoaderWorkers) read: a day-long
# job's copy of its training steps is then about half of its steps' memory.
DATA_WAIT_INPUT = ("node", "step", "start", "end", "data_wait", *DEVICE_INPUT)


def device_idle(steps: pd.DataFrame) -> FloatArray:
    """Per step: the host duration not covered by the device parts, seconds (>= 0).

    A null device part whose host part did not run (0 s: no ``optimizer.step()`` in a
    step of gradient accumulation, no backward in evaluation) took no device time. The
    agent times one step per 50 ms of training (agent/_cuda.py): a step between two
    timed ones of its rank and phase takes the median device time of the nearest
    timed steps (:func:`_sampled_busy`). A rank and phase with no timed step (a CPU
    job, an import, the device timer off) is unknown: NaN, the host's view."""
    if not len(steps) or any(c not in steps for c in DEVICE_PARTS):
        return np.full(len(steps), np.nan)
    device = steps[list(DEVICE_PARTS)].to_numpy(np.float64)
    known = ~np.isnan(device)
    if not known.any():  # no step timed on a device: the host's view, without temporaries
        return np.full(len(steps), np.nan)
    host = steps[list(HOST_PARTS)].to_numpy(np.float64)
    busy = np.where(known, device, np.where(host == 0.0, 0.0, np.nan)).sum(axis=1)
    busy[~known.any(axis=1)] = np.nan
    busy = _sampled_busy(steps, busy)
    return np.asarray(np.maximum(steps["duration"].to_numpy(np.float64) - busy, 0.0), np.float64)


SAMPLE_MEDIAN = 5  # timed steps in the running median that stands for the untimed ones


def _sampled_busy(steps: pd.DataFrame, busy: FloatArray) -> FloatArray:
    """``busy`` with each NaN between timed steps of the same rank and phase replaced
    by the running median of the last :data:`SAMPLE_MEDIAN` timed steps before it (the
    first timed steps' for those before any)."""
    if not np.isnan(busy).any() or np.isnan(busy).all():
        return busy
    keys = [c for c in ("rank", "phase") if c in steps]
    frame = pd.DataFrame({"busy": busy}, index=steps.index)
    groups = [frame["busy"]] if not keys else [g for _, g in frame.groupby(
        [steps[k] for k in keys], sort=False, observed=True)["busy"]]  # fmt: skip
    out = frame["busy"].copy()
    for series in groups:
        timed = series.dropna()
        if not len(timed) or len(timed) == len(series):
            continue
        running = timed.rolling(SAMPLE_MEDIAN, min_periods=1).median()
        out.loc[series.index] = running.reindex(series.index).ffill().bfill()
        out.loc[timed.index] = timed  # a timed step keeps its own
    return np.asarray(out.to_numpy(np.float64), np.float64)


def device_steps(steps: pd.DataFrame) -> int:
    """How many of ``steps`` are judged on the device's view (timed, or between timed
    steps of their rank and phase)."""
    return int(np.count_nonzero(~np.isnan(device_idle(steps))))


def waited_on(steps: pd.DataFrame, columns: tuple[str, ...]) -> FloatArray:
    """Per step: the host time in ``columns`` (summed) that the job waited for: all of
    it without device parts, else at most the device idle within the step."""
    host = steps[list(columns)].to_numpy(np.float64).sum(axis=1)
    idle = device_idle(steps)
    return np.asarray(np.where(np.isnan(idle), host, np.minimum(host, idle)), np.float64)


def with_waited(steps: pd.DataFrame, column: str) -> pd.DataFrame:
    """``steps`` with ``column`` replaced by :func:`waited_on` it, in its own dtype."""
    if not len(steps):
        return steps
    dtype = steps[column].dtype
    return steps.assign(**{column: waited_on(steps, (column,)).astype(dtype)})


def loop_gpus(data: RuleInput, gpus: list[int]) -> list[JsonObject]:
    """Per GPU of one node: what its utilization samples during the training loop
    (first training step's start to the last one's end) show: their count, the
    5th/50th/95th percentiles and the busy share of the loop (their mean: each
    sample is the share of its interval a kernel ran, %). Empty without a loop."""
    steps, system = data.steps, data.system
    train = steps[steps["phase"] == "train"] if len(steps) else steps
    if not len(train) or not len(system) or not gpus:
        return []
    low, high = float(train["start"].min()), float(train["end"].max())
    inside = system[system["time"].between(low, high)]
    node = str(inside["node"].iloc[0]) if len(inside) and "node" in inside else ""
    out: list[JsonObject] = []
    for g in gpus:
        col = f"gpu{g}_util"
        util = inside[col].dropna().to_numpy(np.float64) if col in inside else np.empty(0)
        if not len(util):
            continue
        p5, p50, p95 = np.percentile(util, [5, 50, 95])
        out.append({"node": node, "device": f"gpu{g}", "samples": len(util),
                    "loop_seconds": high - low, "p5": float(p5), "p50": float(p50),
                    "p95": float(p95), "busy": float(util.mean())})  # fmt: skip
    return out


def with_loop_gpus(part: Part, data: RuleInput, gpus: list[int]) -> Part:
    """``part``, when it could not judge (a job too short for the rule's patience),
    with what the loop's samples show in ``details["loop_gpus"]``: the diagnosis says
    it (docs/rules.md, "Short GPU jobs")."""
    if part.na_reason is not None and gpus:
        facts = loop_gpus(data, gpus)
        if facts:
            part.details["loop_gpus"] = list[object](facts)
    return part
