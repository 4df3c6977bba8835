"""A costly problem never hides (docs/rules.md, "min_cost_share"): a rule's findings
below its count threshold or floor fire it when they cost at least ``min_cost_share``
of the job's step time.

Every cost is also held to the time its evidence spans (:func:`within_evidence`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from stepscope.rules._types import Finding

if TYPE_CHECKING:
    import pandas as pd


def step_seconds(steps: pd.DataFrame) -> float | None:
    """The step time a node's cost is a share of: the slowest rank's sum of step
    durations (the ranks run side by side); None without steps."""
    if not len(steps):
        return None
    total = steps.groupby("rank")["duration"].sum()
    return float(total.max()) if len(total) and total.max() > 0 else None


def on_cost(
    below: str, cost: float, share: tuple[float, float], findings: list[Finding]
) -> tuple[bool, str]:
    """Whether findings ``below`` the count fire on their cost, and the message:
    "4 outlier step(s), within the 10 tolerated, but they cost 2.0 s (42% of step time,
    >= 5%); worst: ..." or "..., costing 0.6 s (1% of step time, < 5%)."."""
    part, least = share
    spent = f"{cost:.1f} s ({part:.0f}% of step time"
    if part < least:
        return False, f"{below}, costing {spent}, < {least:g}%)."
    worst = max(findings, key=lambda f: f.severity)
    return True, f"{below}, but they cost {spent}, >= {least:g}%); worst: {worst.message}"


def evidence_seconds(findings: Iterable[Finding]) -> float | None:
    """The time the findings span: the union of their ``[start, end]``; None when a
    finding has no time (nothing to bound a cost by)."""
    spans = []
    for f in findings:
        if f.start is None or f.end is None:
            return None
        spans.append((f.start, max(f.end, f.start)))
    total, reach = 0.0, -math.inf
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total if spans else None


def within_evidence(cost: float | None, findings: Iterable[Finding]) -> float | None:
    """``cost`` at most the time its findings span (docs/rules.md, "Saving"): a problem
    that lasted 4 s costs at most 4 s, whatever its estimate."""
    span = evidence_seconds(findings)
    return cost if cost is None or span is None else min(cost, span)
