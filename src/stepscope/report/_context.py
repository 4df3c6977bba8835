"""What every section of one report reads: the job's frames, loaded once."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from stepscope.analysis.profiled import cap_profiled
from stepscope.analysis.report_data import read_rules
from stepscope.jobfolder import JobJson, RuleVerdict
from stepscope.read import Job
from stepscope.report._charts import REPORT_BUCKETS, Charts

Progress = Callable[[str, float], None]
"""Called with a stage name and the fraction of the report done (0..1)."""


def no_progress(stage: str, fraction: float) -> None:
    """The default progress callback: report nothing."""


@dataclass
class Context:
    """The job's metadata and frames, and the charts of the page being built."""

    job: Job
    meta: JobJson
    steps: pd.DataFrame
    events: pd.DataFrame
    rules: list[RuleVerdict]
    charts: Charts
    now: float
    _system: dict[str, pd.DataFrame] = field(default_factory=dict)

    @classmethod
    def load(cls, job: Job, now: float | None = None, buckets: int = REPORT_BUCKETS) -> Context:
        """Read everything but the system samples (read per node, on first use);
        ``buckets`` caps the points of the time series (see :class:`Charts`)."""
        meta = job.meta
        events = job.events()
        # The steps a window could have slowed keep their mark, no others (older agents').
        steps = cap_profiled(job.steps(), events)
        t0 = _first_time(meta, steps, events)
        now = time.time() if now is None else now
        return cls(job, meta, steps, events, read_rules(job), Charts(t0, buckets), now)

    def system(self, node: str) -> pd.DataFrame:
        """One node's system samples (wide), with the columns no sample has dropped."""
        if node not in self._system:
            frame = self.job.system(nodes=[node])
            self._system[node] = frame.dropna(axis=1, how="all")
        return self._system[node]

    @property
    def end_time(self) -> float:
        """The job's end, or now for a job that still runs."""
        end = self.meta.get("end_time")
        return float(end) if end is not None else self.now


def _first_time(meta: JobJson, steps: pd.DataFrame, events: pd.DataFrame) -> float:
    candidates = [meta.get("start_time")]
    if len(events):
        candidates.append(float(events["time"].min()))
    if len(steps):
        candidates.append(float(steps["start"].min()))
    known = [float(c) for c in candidates if c is not None]
    return min(known) if known else 0.0
