"""A finished (or imported) job into an experiment tracker: MLflow or W&B.

``export_job(tracker, job)`` logs the job's step points, its verdicts and diagnosis,
and its HTML report (:mod:`stepscope.report`) through a :class:`Tracker`:
:class:`~stepscope.export.to_mlflow.MlflowTracker` or
:class:`~stepscope.export.to_wandb.WandbTracker`.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from stepscope.export._points import (
    MAX_POINTS,
    Point,
    diagnosis_text,
    step_points,
    verdict_costs,
    verdict_tags,
)

if TYPE_CHECKING:
    from stepscope.read import Job

__all__ = ["MAX_POINTS", "ExportedRun", "Tracker", "export_job", "job_points"]


class Tracker(Protocol):
    """What stepscope needs of an experiment tracker's run."""

    sep: str  # between the parts of a name: "." (MLflow), "/" (W&B's chart sections)

    @property
    def where(self) -> str: ...
    def log_points(self, points: list[Point]) -> int: ...
    def log_end(self, tags: dict[str, str], costs: dict[str, float], diagnosis: str) -> None: ...
    def log_report(self, path: str) -> None: ...
    def close(self, finished: bool) -> None: ...


@dataclass
class ExportedRun:
    """What an export logged."""

    where: str
    points: int
    metrics: int
    rules: int


def job_points(job: Job, max_points: int = MAX_POINTS) -> list[Point]:
    """The job's training steps as at most ``max_points`` points (every rank)."""
    return step_points(job.steps(phase="train"), job.system(), max_points)


def export_job(tracker: Tracker, job: Job, report: bool = True) -> ExportedRun:
    """Log ``job`` into ``tracker``'s run; the run is closed whatever happens."""
    from stepscope.analysis.report_data import read_rules
    from stepscope.analysis.summary import summarize

    finished = False
    try:
        points = job_points(job)
        metrics = tracker.log_points(points)
        verdicts = read_rules(job)
        sep = tracker.sep
        diagnosis = diagnosis_text(summarize(job)["diagnosis"])
        tracker.log_end(verdict_tags(verdicts, sep), verdict_costs(verdicts, sep), diagnosis)
        if report:
            _log_report(tracker, job)
        finished = True
    finally:
        tracker.close(finished)
    return ExportedRun(tracker.where, len(points), metrics, len(verdicts))


def _log_report(tracker: Tracker, job: Job) -> None:
    from stepscope.report import REPORT_NAME, write_report

    with tempfile.TemporaryDirectory(prefix="stepscope-report-") as tmp:
        tracker.log_report(write_report(job, os.path.join(tmp, REPORT_NAME)))
