"""The steps ``stepscope compare`` judges: each run's steady steps of a phase.

Per phase, a run's **steady steps** are the steps StepOutlier judges (from its
``skip_steps`` on, not profiled as :mod:`.profiled` caps the flag) that are not its
outliers (:func:`.outliers.judge_steps`, with the job's own StepOutlier parameters).
What was left out is counted (:class:`LeftOut`; a side of several runs adds its runs'
counts). A step of several ranks counts once, each column the median over its ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from stepscope.analysis._plain import read_rules
from stepscope.analysis.compare_contention import WAIT, with_core_wait
from stepscope.analysis.compare_verdict import DEVICE_PARTS
from stepscope.analysis.outliers import Definition, judge_steps
from stepscope.analysis.profiled import KINDS, cap_profiled

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.read import Job

__all__ = [
    "HOST_PARTS",
    "LeftOut",
    "Run",
    "pool_runs",
    "steady_steps",
    "step_quantiles",
    "total_left_out",
]

HOST_PARTS = ("data_wait", "forward", "backward", "optimizer", "other")


@dataclass(frozen=True)
class LeftOut:
    """A run's steps of one phase (per step number) and those left out of the comparison."""

    total: int
    warmup: int
    profiled: int
    outliers: int

    @property
    def kept(self) -> int:
        return self.total - self.warmup - self.profiled - self.outliers


#: One run's steady steps of a phase (one row per step number) and what was left out.
Run = tuple["pd.DataFrame", LeftOut]


def total_left_out(runs: list[Run]) -> LeftOut:
    """The counts of a side's runs added up (a side of one run: its own)."""
    outs = [o for _steps, o in runs]
    return LeftOut(*(sum(getattr(o, f) for o in outs) for f in LeftOut.__dataclass_fields__))


def steady_steps(job: Job, phase: str) -> Run:
    """The steady steps of ``phase`` (one row per step number, in order) and the count
    of what was left out (module docstring)."""
    steps = job.steps(phase=phase)
    if not len(steps):
        return steps, LeftOut(0, 0, 0, 0)
    steps = cap_profiled(steps, job.events(kinds=list(KINDS)))
    definition = Definition.of_job(read_rules(job))
    judged = judge_steps(steps, definition)
    kept = with_core_wait(job, judged[~judged["outlier"].to_numpy(dtype=bool)])
    per_step = _per_step(kept)
    total = int(steps["step"].nunique())
    warmup = int(steps.loc[steps["step"] < definition.skip_steps, "step"].nunique())
    late = steps[steps["step"] >= definition.skip_steps]
    profiled = int(late.loc[late["profiled"].fillna(False).astype(bool), "step"].nunique())
    outliers = max(0, total - warmup - profiled - len(per_step))
    return per_step, LeftOut(total, warmup, profiled, outliers)


def _per_step(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per step number: each column the median over the ranks, and the
    device idle within the step where the device parts are known."""
    cols = [c for c in ("duration", *HOST_PARTS, *DEVICE_PARTS[:3], WAIT, "others") if c in rows]
    frame = rows[["step", *cols]].astype({c: np.float64 for c in cols})
    out = frame.groupby("step", sort=True).median().reset_index()
    if all(c in out for c in DEVICE_PARTS[:3]):
        busy = out[list(DEVICE_PARTS[:3])].sum(axis=1, min_count=3)
        out["device_idle"] = np.maximum(out["duration"] - busy, 0.0)
    return out


def pool_runs(runs: list[pd.DataFrame]) -> pd.DataFrame:
    """A side's runs' steps as one frame, run after run."""
    import pandas as pd

    return runs[0] if len(runs) == 1 else pd.concat(runs, ignore_index=True)


def step_quantiles(a: pd.DataFrame, b: pd.DataFrame) -> tuple[float, float, float, float]:
    """The median and p90 step of A's and B's pooled steps (NaN for a side without)."""

    def q(frame: pd.DataFrame, at: float) -> float:
        d = frame["duration"].to_numpy(np.float64) if len(frame) else np.empty(0)
        return float(np.quantile(d, at)) if len(d) else float("nan")

    return q(a, 0.5), q(b, 0.5), q(a, 0.9), q(b, 0.9)
