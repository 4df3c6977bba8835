"""Costs of a diagnosis counted once: rules that price the same job seconds.

Two rules may fire on the same time: DataLoading prices a rank's whole data wait,
DataLoaderWorkers the data wait of its typical steps, which the first contains. A
diagnosis that added both would count the wait twice. :func:`counted_costs` keeps,
within each group of :data:`OVERLAPS` (the more specific cause first), each rule's
cost less what the rules before it in the group already counted; then, most costly
first, no cost beyond what the job's wall time leaves: the costs of a diagnosis
never add up to more than the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stepscope.analysis.diagnosis_text import duration_text

# Rules whose costs are the same seconds of the job, the more specific cause first.
OVERLAPS: tuple[tuple[str, ...], ...] = (("DataLoaderWorkers", "DataLoading"),)


@dataclass(frozen=True)
class Counted:
    """A rule's cost as the diagnosis counts it, and what was left out and why."""

    cost: float | None  # seconds counted (None: the rule cannot tell)
    overlap: float = 0.0  # seconds of the rule's own estimate counted under ``under``
    under: tuple[str, ...] = ()  # the rules that counted them
    capped: float = 0.0  # seconds left out as the others' costs fill the job's time


def counted_costs(costs: Mapping[str, float | None], wall: float | None) -> dict[str, Counted]:
    """Per rule of ``costs`` (its own ``cost_seconds``): the cost the diagnosis counts."""
    out = {rule: Counted(cost) for rule, cost in costs.items()}
    for group in OVERLAPS:
        before: list[str] = []
        for rule in (r for r in group if out.get(r, Counted(None)).cost is not None):
            taken = sum(out[r].cost or 0.0 for r in before)
            own = out[rule].cost or 0.0
            kept = max(own - taken, 0.0)
            if before:
                out[rule] = Counted(kept, own - kept, tuple(before))
            before.append(rule)
    return _capped(out, wall) if wall is not None and wall > 0 else out


def _capped(out: dict[str, Counted], wall: float) -> dict[str, Counted]:
    """The costs, most first, each at most what the wall time leaves after the others."""
    left = wall
    for rule in sorted(out, key=lambda r: -(out[r].cost or 0.0)):
        c = out[rule]
        if c.cost is None:
            continue
        kept = max(min(c.cost, left), 0.0)
        if kept < c.cost:
            out[rule] = Counted(kept, c.overlap, c.under, c.cost - kept)
        left -= kept
    return out


def left_out_text(counted: Counted) -> str:
    """What of a rule's own estimate the diagnosis did not count again, and why."""
    text = ""
    if counted.overlap > 0:
        text = f", beyond {duration_text(counted.overlap)} counted under {', '.join(counted.under)}"
    if counted.capped > 0:
        text += f" (less {duration_text(counted.capped)}: the costs above fill the job's time)"
    return text
