"""The diagnosis of a job from its rule results: one ranked answer to "why is it slow".

``diagnose(evaluate_job(job), facts)`` ranks the problems the rules found by
the job time they cost (:attr:`RuleResult.cost_seconds`), most first, those of
unknown cost after, by severity; with none, it says what was checked and what
could not be. The ranking itself is :func:`stepscope.analysis.diagnosis.
diagnose_verdicts`, over the verdicts as ``rules/*.json`` holds them, so that
``stepscope show``, the report and the dashboard (which read those files) give
the same answer as this function.
"""

from __future__ import annotations

from collections.abc import Sequence

from stepscope.analysis.diagnosis import (
    Check,
    Diagnosis,
    DiagnosisEntry,
    Evidence,
    JobFacts,
    diagnose_verdicts,
    job_facts,
)
from stepscope.rules._types import RuleResult

__all__ = ["Check", "Diagnosis", "DiagnosisEntry", "Evidence", "JobFacts", "diagnose", "job_facts"]


def diagnose(results: Sequence[RuleResult], facts: JobFacts) -> Diagnosis:
    """The diagnosis of a job from its rule ``results`` and its ``facts`` (wall time,
    step time; see :func:`job_facts`). Pure: reads nothing, prints nothing."""
    return diagnose_verdicts([r.to_dict() for r in results], facts)
