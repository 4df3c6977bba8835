"""What the CPU rules share: the ranks' thread and DataLoader facts, typical steps,
and medians of samples.

The facts come from the agent's ``threads`` and ``dataloader`` events (docs/format.md);
a job without them (an older agent, a loop without torch) leaves the rules that need
them ``NotApplicable``. Ranks run side by side, so the job time a problem costs is the
largest cost among ranks and nodes, not their sum.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from stepscope.rules._device import waited_on
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._train_frame import typical_rows

COMPUTE = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class RankFacts:
    """The CPU facts of one rank: ``None`` where its events do not say."""

    threads: int | None = None  # torch's intra-op threads
    affinity: int | None = None  # cores the process may run on
    cpu_count: int | None = None
    workers: int | None = None  # the most num_workers of its DataLoaders


def _details(rows: pd.DataFrame) -> list[dict[str, object]]:
    out = []
    for text in rows["detail"]:
        try:
            value = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            value = None
        out.append(value if isinstance(value, dict) else {})
    return out


def _count(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def rank_facts(events: pd.DataFrame) -> dict[int, RankFacts]:
    """Rank -> its facts, from the last ``threads`` event and every ``dataloader`` event."""
    out: dict[int, RankFacts] = {}
    if not len(events):
        return out
    for kind in ("threads", "dataloader"):
        rows = events[events["kind"] == kind].sort_values("time")
        for rank, detail in zip(rows["rank"], _details(rows), strict=True):
            facts = out.get(int(rank), RankFacts())
            if kind == "threads":
                facts = replace(
                    facts,
                    threads=_count(detail.get("intra_op")),
                    affinity=_count(detail.get("affinity")),
                    cpu_count=_count(detail.get("cpu_count")),
                )
            else:
                n = _count(detail.get("num_workers"))
                if n is not None:
                    facts = replace(facts, workers=max(n, facts.workers or 0))
            out[int(rank)] = facts
    return out


def train_steps(
    steps: pd.DataFrame,
    skip: int,
    then: pd.Series | np.ndarray | None = None,
    columns: tuple[str, ...] | None = None,
) -> pd.DataFrame:
    """The rows of :func:`~stepscope.rules._train_frame.typical_rows` (training steps
    after the first ``skip`` of each rank, stalls left out, then where ``then`` holds):
    one copy kept (of ``columns`` only, those of them ``steps`` has, if given)."""
    if not len(steps):
        return steps
    rows = typical_rows(steps, skip, then)
    if columns is not None:
        steps = steps[[c for c in columns if c in steps]]
    return steps.iloc[rows]


def median_share(steps: pd.DataFrame, columns: tuple[str, ...]) -> float:
    """The median over steps of the share of their time in ``columns``, %: on a GPU,
    of the time in ``columns`` the device waited for (:func:`.waited_on`)."""
    part = waited_on(steps, columns)
    total = steps["duration"].to_numpy(np.float64)
    share = np.divide(part, total, out=np.zeros_like(part), where=total > 0)
    return float(np.median(share) * 100.0)


def sample_median(system: pd.DataFrame, column: str, start: float, end: float) -> float | None:
    """The median of ``column`` over the samples in ``[start, end]``; None without any."""
    if column not in system or not len(system):
        return None
    t = system["time"]
    inside = system[column][(t >= start) & (t <= end)].dropna()  # one column's copy only
    return float(inside.median()) if len(inside) else None


def node_cores(data: RuleInput, facts: dict[int, RankFacts]) -> int | None:
    """The node's cores: ``nodes/<node>.json``, else what a rank's ``threads`` event says."""
    if count := _count(data.cores()):
        return count
    return next((f.cpu_count for f in facts.values() if f.cpu_count), None)


def skip_steps(default: int) -> Param:
    return Param("skip_steps", default, "first training steps of each rank ignored", int)


def min_steps(default: int = 20) -> Param:
    return Param("min_steps", default, "fewest typical training steps to judge", int, minimum=1)
