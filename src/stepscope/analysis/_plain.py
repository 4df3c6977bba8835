"""What ``stepscope show`` needs of the analysis without numpy or pandas: the job's
verdicts as written, and missing or NaN values as None. :mod:`.report_data`
re-exports both for the report and the dashboard."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, SupportsFloat

from stepscope.jobfolder import RuleVerdict, as_rule_verdict, verdict_problem

if TYPE_CHECKING:
    from stepscope.read import Job


def finite(x: SupportsFloat | None) -> float | None:
    """A float, or None for missing and NaN values."""
    if x is None:
        return None
    f = float(x)
    return None if math.isnan(f) else f


def read_rules(job: Job) -> list[RuleVerdict]:
    """The rule results under ``rules/*.json``; unreadable or damaged files are
    skipped and named in ``job.warnings``."""
    results: list[RuleVerdict] = []
    for key in job.store.list("rules", suffix=".json"):
        try:
            data = job.store.read_json(key)
        except (OSError, ValueError):
            continue  # being rewritten, or damaged: the check below names the damage
        problem = verdict_problem(data)
        if problem is not None:
            job.note_skipped(key, problem)
        elif isinstance(data, dict):
            data.setdefault("rule", key.rsplit("/", 1)[-1][: -len(".json")])
            results.append(as_rule_verdict(data, key))
    return results
