"""Host contention in ``stepscope compare``: what each step waited for a core.

On a shared host the same script runs 25-50% slower from one run to the next when other
processes take the cores (BENCHMARKS.md, "compare"): a run's wall-clock steps then say
more about its neighbours than about its code, and an interval built from the steps of
two runs cannot see a whole-run offset. The sampler measures what the job's threads
waited, runnable, for a core (``proc_thread_run_wait``, docs/format.md), and
:func:`stepscope.analysis.host.run_wait_in` cuts it at each step's ends.

A step is taken **under contention** when it waited at least :data:`CONTENDED` of its
time for a core while the node's other processes used at least :data:`OTHERS` % of it
(both), and a run is **contended** when at least :data:`STEPS` of its steps were. Both
measures, so that a job whose own threads oversubscribe the cores (its own problem,
which a comparison must show) is not excused. A side of several runs is judged on its
runs' steps together. When either side is contended, compare
judges (:func:`judged_steps`), and says so:

1. the **uncontended steps** of both runs (other processes under :data:`OTHERS` %)
   where each run has at least :data:`MIN_CALM` of them;
2. else the steps' **own time**: the step time less its wait for a core.

Otherwise the step time. A run without the wait measured (an older or imported job) is
judged on its step time. Neither basis sees what a busy neighbour does without taking
a core (a shared cache, memory bandwidth, a sibling hyperthread): BENCHMARKS.md
("compare") measures how often that still moves a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from stepscope.analysis.host import others_during, run_wait_in

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.read import Job

CONTENDED = 0.05  # share of a median step spent waiting for a core
OTHERS = 10.0  # other processes' median CPU during the steps, % of the node
WAIT = "core_wait"  # the per-step column added to a run's steps
STEPS = 0.10  # share of a run's steps under contention that makes the run contended
MIN_CALM = 30  # uncontended steps each run needs to be judged on them alone


@dataclass(frozen=True)
class Contention:
    """A run's host contention during its steady steps: the median share of a step spent
    waiting for a core, other processes' median CPU (% of the node) and the share of
    its steps taken under contention (both thresholds met); None: unknown."""

    wait_share: float | None
    others: float | None
    steps_share: float = 0.0

    @property
    def contended(self) -> bool:
        return self.steps_share >= STEPS

    def text(self) -> str:
        if self.wait_share is None:
            return "wait for a core unknown"
        others = "" if self.others is None else f", others at {self.others:.0f}% of the node"
        under = f", {100 * self.steps_share:.0f}% of the steps under contention"
        return f"waited for a core {100 * self.wait_share:.0f}% of the step{others}{under}"


def with_core_wait(job: Job, steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with :data:`WAIT` (seconds waited for a core in each step, NaN where not
    measured) and ``others`` (other processes' CPU during it), node by node."""
    out = steps.copy()
    out[WAIT], out["others"] = np.nan, np.nan
    if not len(steps):
        return out
    nodes = out.get("node")
    for node in sorted(set(nodes.dropna())) if nodes is not None else [None]:
        rows = (nodes == node).to_numpy() if nodes is not None else np.ones(len(out), bool)
        system = job.system(nodes=[node] if node is not None else None)
        if not len(system):
            continue
        starts = out.loc[rows, "start"].to_numpy(np.float64)
        ends = out.loc[rows, "end"].to_numpy(np.float64)
        # the node's ranks share the sum of their processes' waits (as the rules do)
        ranks = max(1, int(out.loc[rows, "rank"].nunique())) if "rank" in out else 1
        out.loc[rows, WAIT] = run_wait_in(system, starts, ends) / ranks
        out.loc[rows, "others"] = others_during(system, starts, ends)
    return out


def contention_of(steps: pd.DataFrame) -> Contention:
    """A run's :class:`Contention` from its per-step rows (:func:`with_core_wait`)."""
    if WAIT not in steps or not steps[WAIT].notna().any():
        return Contention(None, None)
    with np.errstate(all="ignore"):
        share = (steps[WAIT] / steps["duration"]).to_numpy(np.float64)
    others = steps["others"].to_numpy(np.float64) if "others" in steps else np.empty(0)
    known = others[np.isfinite(others)]
    under = (share >= CONTENDED) & (others >= OTHERS) if len(others) else share < 0
    return Contention(
        float(np.nanmedian(share)) if np.isfinite(share).any() else None,
        float(np.median(known)) if len(known) else None,
        float(np.mean(under)) if len(under) else 0.0,
    )


def own_time(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with ``duration`` replaced by its own time: less the wait for a core
    (never below 0; a step whose wait is unknown keeps its duration)."""
    out = steps.copy()
    wait = out[WAIT].fillna(0.0).to_numpy(np.float64)
    out["duration"] = np.maximum(out["duration"].to_numpy(np.float64) - wait, 0.0)
    return out


def judged_steps(
    a: list[pd.DataFrame], b: list[pd.DataFrame], contention: tuple[Contention, Contention]
) -> tuple[list[pd.DataFrame], list[pd.DataFrame], str]:
    """The steps of A's and B's runs to judge and their basis: "step time",
    "uncontended steps" (where every run has :data:`MIN_CALM` of them) or "own time"
    (module docstring); ``contention``: each side's, of its runs' steps together."""
    if not any(c.contended for c in contention):
        return a, b, "step time"
    calm = [[f[f["others"] < OTHERS] if "others" in f else f[:0] for f in side] for side in (a, b)]
    if all(len(c) >= MIN_CALM for side in calm for c in side):
        return calm[0], calm[1], "uncontended steps"
    return [own_time(f) for f in a], [own_time(f) for f in b], "own time"
