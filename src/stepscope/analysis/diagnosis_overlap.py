"""Costs of a diagnosis counted once: rules that price the same job seconds.

Two rules may fire on the same time: DataLoading prices a rank's whole data wait,
DataLoaderWorkers the data wait of its typical steps, which the first contains. A
diagnosis that added both would count the wait twice. :func:`counted_costs` keeps,
within each group of :data:`OVERLAPS` (the more specific cause first), each rule's
cost less what the rules before it in the group already counted, and its saving
(what its fix would save) less the savings counted before it, at most that cost.
A later rule left with less than :data:`FOLD_SHARE` of the job (of the cause's cost
when the job's time is unknown) is no problem of its own: it is folded into the
cause's entry (its remainder counted there, its name given once). Then, most costly
first, no cost beyond what the job's wall time leaves: the costs of a diagnosis never
add up to more than the job, and no saving is above its cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from stepscope.analysis.diagnosis_text import duration_text

# Rules whose costs are the same seconds of the job, the more specific cause first.
OVERLAPS: tuple[tuple[str, ...], ...] = (("DataLoaderWorkers", "DataLoading"),)
# What a later rule of a group must still cost to be a problem of its own: the share of
# the job a costly problem has (the rules' min_cost_share default).
FOLD_SHARE = 0.05


@dataclass(frozen=True)
class Counted:
    """A rule's cost as the diagnosis counts it, and what was left out and why."""

    cost: float | None  # seconds counted (None: the rule cannot tell)
    overlap: float = 0.0  # seconds of the rule's own estimate counted under ``under``
    under: tuple[str, ...] = ()  # the rules that counted them
    capped: float = 0.0  # seconds left out as the others' costs fill the job's time
    saving: float | None = None  # seconds its fix would save of ``cost`` (at most it)
    folded: tuple[str, ...] = ()  # rules of its group whose remainder it counts
    into: str | None = None  # the rule whose entry counts this one (no entry of its own)


def counted_costs(
    costs: Mapping[str, float | None],
    wall: float | None,
    savings: Mapping[str, float | None] | None = None,
) -> dict[str, Counted]:
    """Per rule of ``costs`` (its own ``cost_seconds``; ``savings``: its own
    ``saving_seconds``, the whole cost where absent): what the diagnosis counts."""
    out = {rule: Counted(cost, saving=_saving(cost, (savings or {}).get(rule)))
           for rule, cost in costs.items()}  # fmt: skip
    for group in OVERLAPS:
        present = [r for r in group if out.get(r, Counted(None)).cost is not None]
        for i, rule in enumerate(present[1:], 1):
            before = present[:i]
            own, saved = out[rule].cost or 0.0, out[rule].saving or 0.0
            kept = max(own - sum(out[r].cost or 0.0 for r in before), 0.0)
            saving = min(kept, max(saved - sum(out[r].saving or 0.0 for r in before), 0.0))
            out[rule] = Counted(kept, own - kept, tuple(before), saving=saving)
        if len(present) > 1:
            _fold(out, present, wall)
    return _capped(out, wall) if wall is not None and wall > 0 else out


def _saving(cost: float | None, saving: float | None) -> float | None:
    return cost if saving is None or cost is None else max(min(saving, cost), 0.0)


def _fold(out: dict[str, Counted], group: list[str], wall: float | None) -> None:
    """The group's later rules that cost next to nothing beyond the cause, into it."""
    cause = out[group[0]]
    least = FOLD_SHARE * (wall if wall else cause.cost or 0.0)
    for rule in group[1:]:
        c = out[rule]
        if (c.cost or 0.0) >= least:
            continue
        cause = replace(
            cause,
            cost=(cause.cost or 0.0) + (c.cost or 0.0),
            saving=(cause.saving or 0.0) + (c.saving or 0.0),
            folded=(*cause.folded, rule),
        )
        out[rule] = replace(c, into=group[0])
    out[group[0]] = cause


def _capped(out: dict[str, Counted], wall: float) -> dict[str, Counted]:
    """The costs, most first, each at most what the wall time leaves after the others
    (a folded rule's cost is its cause's)."""
    left = wall
    for rule in sorted(out, key=lambda r: -(out[r].cost or 0.0)):
        c = out[rule]
        if c.cost is None or c.into is not None:
            continue
        kept = max(min(c.cost, left), 0.0)
        if kept < c.cost:
            saving = None if c.saving is None else min(c.saving, kept)
            out[rule] = replace(c, cost=kept, capped=c.cost - kept, saving=saving)
        left -= kept
    return out


def left_out_text(counted: Counted) -> str:
    """What of a rule's own estimate the diagnosis did not count again, and why; the
    rules it counts the same time for."""
    text = ""
    if counted.folded:
        text = f", {' and '.join(counted.folded)}'s finding of the same time included"
    if counted.overlap > 0:
        text += (
            f", beyond {duration_text(counted.overlap)} counted under {', '.join(counted.under)}"
        )
    if counted.capped > 0:
        text += f" (less {duration_text(counted.capped)}: the costs above fill the job's time)"
    return text
