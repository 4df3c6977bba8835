"""The words of the diagnosis (short names of problems, durations, shares) and its JSON.

The JSON shapes are those of ``stepscope show --json`` (``diagnosis``,
``diagnosis_checks``) and of the dashboard's ``/api/jobs/{job}/rules``
(docs/rules.md, "Diagnosis").
"""

from __future__ import annotations

import re
from typing import TypedDict

# What each built-in rule's finding is, in a few words; other rules get their name
# in words (LossNotDecreasing: "loss not decreasing").
LABELS = {
    "DataLoading": "waiting for data",
    "StepOutlier": "slow steps",
    "MaxInitializationTime": "slow start",
    "Straggler": "a straggler rank",
    "CPUBottleneck": "CPU bottleneck",
    "IOBottleneck": "I/O bottleneck",
    "LowGPUUtilization": "GPU underused",
    "BatchSize": "batch too small",
    "GPUIdleBetweenSteps": "GPU idle between steps",
    "GPUMemoryIncrease": "GPU memory growing",
    "CUDAMemory": "CUDA memory leaking, fragmenting or near full",
    "LoadBalancing": "unbalanced load",
}
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def label(rule: str) -> str:
    """A few words for what ``rule`` found."""
    if rule in LABELS:
        return LABELS[rule]
    words = _WORDS.findall(rule)
    return " ".join(w if len(w) > 1 and w.isupper() else w.lower() for w in words) or rule


def duration_text(seconds: float | None) -> str:
    """``0.35 s``, ``24 s``, ``4.0 min``, ``1.5 h``: digits enough to compare."""
    if seconds is None:
        return "?"
    s = abs(seconds)
    if s < 0.01:
        return "<0.01 s"
    if s < 1:
        return f"{seconds:.2f} s"
    if s < 10:
        return f"{seconds:.1f} s"
    if s < 120:
        return f"{seconds:.0f} s"
    if s < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def cpu_text(percent: float, cores: float | None, digits: int = 1, unit: str = "%") -> str:
    """CPU in the one unit of every message: % of the node, the cores in brackets
    (``25.0% (0.50 core)``, of a 2-core node); without the core count, the %."""
    text = f"{percent:.{digits}f}{unit}"
    if not cores:
        return text
    used = percent / 100.0 * cores
    return f"{text} ({used:.2f} core{'' if used <= 1 else 's'})"


def percent_text(share: float | None) -> str:
    """A share (0-1) in percent: ``23%``, ``0.4%``, ``<0.1%``."""
    if share is None:
        return "?"
    p = 100.0 * share
    if p < 0.05:
        return "<0.1%"
    return f"{p:.1f}%" if p < 1 else f"{p:.0f}%"


class EvidenceJson(TypedDict):
    """Where to look: the report's anchor, the findings, the worst one's place."""

    anchor: str
    findings: int
    steps: list[int] | None
    start: float | None
    end: float | None
    node: str | None
    rank: int | None


class EntryJson(TypedDict):
    """One problem of the diagnosis (an element of ``show --json``'s ``diagnosis``)."""

    rule: str
    status: str
    cost_seconds: float | None
    cost_share: float | None
    saving_seconds: float | None
    severity: float
    message: str
    recommendation: str
    evidence: EvidenceJson
    also: list[str]


class CheckJson(TypedDict):
    """A rule that judged the job (``reason`` null) or could not (why)."""

    rule: str
    datapoints: int
    reason: str | None


class ChecksJson(TypedDict):
    """The summary line, the number of problems, what was and was not checked, and the
    notes the summary ends with (what the samples show that no rule could judge)."""

    summary: str
    problems: int
    checked: list[CheckJson]
    not_checked: list[CheckJson]
    notes: list[str]
