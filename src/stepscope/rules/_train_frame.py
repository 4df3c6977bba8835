"""The node's training steps, one frame that the step rules judging an input share.

A day-long node has 10^5-10^6 steps. DataLoaderWorkers, DataLoading, PythonOverhead and
CPUBoundThreads each filtered a copy of its training steps (about 55 MB each for the
576,000 steps of a 24-hour imported node, BENCHMARKS.md "SageMaker import"); now
:func:`train_frame` filters them once per input (``RuleInput.cache``, through
:func:`~stepscope.rules._windows.shared`), and each rule selects its own steps by
position (:func:`typical_rows`) and copies only the columns it reduces, of one rank at
a time. The frame is read-only: a rule that needs a changed column builds its own.
The evaluation judges the rules that read it first and drops it after them
(``rules._evaluate``), so it never sits under another rule's copies.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.rules._device import DATA_WAIT_INPUT, DEVICE_PARTS, waited_on
from stepscope.rules._input import RuleInput
from stepscope.rules._windows import shared

TRAIN_KEY = "train_steps"
# The step columns the rules that share the frame read (a recorded job's cuda_* and an
# import's source_* columns are left out).
TRAIN_INPUT = (*DATA_WAIT_INPUT, "pid", "other", "profiled")
STALL_FACTOR = 3.0  # a step over 3x its rank's median is a stall (StepOutlier's), not typical


def train_frame(data: RuleInput) -> pd.DataFrame:
    """The training steps of ``data.steps`` (the columns of :data:`TRAIN_INPUT` it has),
    made once for the rules judging ``data``; ``data.steps`` itself (its columns, no
    copy) when every step is a training step."""
    return shared(data, TRAIN_KEY, data.steps, lambda: _train(data.steps))


def _train(steps: pd.DataFrame) -> pd.DataFrame:
    columns = steps[[c for c in TRAIN_INPUT if c in steps]]
    if not len(steps):
        return columns
    train = (steps["phase"] == "train").to_numpy(dtype=bool, na_value=False)
    return columns if train.all() else columns.iloc[np.flatnonzero(train)]


def train_rows(steps: pd.DataFrame, skip: int) -> np.ndarray:
    """The positions of the training steps after the first ``skip`` of each rank."""
    phase = (steps["phase"] == "train").to_numpy(dtype=bool, na_value=False)
    return np.flatnonzero(phase & (steps["step"].to_numpy() >= skip))


def typical_rows(
    steps: pd.DataFrame, skip: int, then: pd.Series | np.ndarray | None = None
) -> np.ndarray:
    """The positions of the training steps after the first ``skip`` of each rank, stalls
    left out (over :data:`STALL_FACTOR` times their rank's median), then those where
    ``then`` (a mask over ``steps``) holds."""
    rows = train_rows(steps, skip) if len(steps) else np.zeros(0, np.int64)
    if not len(rows):
        return rows
    duration = steps["duration"].iloc[rows]  # one column: the rank medians' input
    typical = duration.groupby(steps["rank"].iloc[rows].to_numpy()).transform("median")
    keep = (duration <= typical * STALL_FACTOR).to_numpy()
    if then is not None:
        keep = keep & np.asarray(then, dtype=bool)[rows]
    return np.asarray(rows[keep])


def timed(steps: pd.DataFrame) -> bool:
    """Whether any step has a device part (a GPU job with the device timer on)."""
    return all(c in steps for c in DEVICE_PARTS) and bool(
        steps[list(DEVICE_PARTS)].notna().any().any()
    )


def rows_with_waited(
    frame: pd.DataFrame, rows: np.ndarray, columns: Sequence[str], waited: str
) -> pd.DataFrame:
    """``columns`` of ``frame`` at ``rows`` (one copy of those only), ``waited`` replaced
    by what the device waited for of it (``rules._device.with_waited``, in its dtype)."""
    out = frame[[c for c in columns if c in frame]].iloc[rows]
    if not len(out) or not timed(frame):
        return out  # no device view: the host's, as with_waited leaves it
    device = frame[[c for c in DATA_WAIT_INPUT if c in frame]].iloc[rows]
    values: FloatArray = waited_on(device, (waited,))
    return out.assign(**{waited: values.astype(out[waited].dtype)})
