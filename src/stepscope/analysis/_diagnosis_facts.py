"""What the diagnosis (:mod:`.diagnosis`) needs of a job besides its verdicts: its
wall time and its first rank's time in training steps (:class:`JobFacts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stepscope.analysis.diagnosis_incomplete import incomplete_reason
from stepscope.jobfolder import JobJson, job_seconds

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class JobFacts:
    """What the diagnosis needs of the job besides its verdicts (None: unknown).

    ``wall_seconds`` is the job's duration so far (end, or now, minus start);
    ``step_seconds`` the time its first rank spent in training steps; ``incomplete``
    why the job's data is incomplete (a rank ended abruptly), None when it is whole.
    """

    wall_seconds: float | None = None
    step_seconds: float | None = None
    incomplete: str | None = None


def wall_seconds(meta: JobJson, now: float) -> float | None:
    """The job's duration so far (``stepscope.jobfolder.job_seconds``: the launcher's
    monotonic measure, else its end, or ``now``, minus its start); None without a start."""
    return job_seconds(meta, now)


def job_facts(meta: JobJson, steps: pd.DataFrame, now: float) -> JobFacts:
    """The facts of a job from its ``job.json`` and its steps frame (any ranks)."""
    wall, incomplete = wall_seconds(meta, now), incomplete_reason(meta)
    train = steps[steps["phase"] == "train"] if len(steps) else steps
    if not len(train):
        return JobFacts(wall, None, incomplete)
    first = train[train["rank"] == train["rank"].min()]
    return JobFacts(wall, float(first["duration"].sum()), incomplete)
