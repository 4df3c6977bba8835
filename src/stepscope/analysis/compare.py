"""``stepscope compare``: is B faster or slower than A, by how much for sure, and why.

Each side (A, the baseline, and B) is one run or several runs of the same setup. Per
phase, each run's steady steps (:mod:`.compare_steps`) are compared:

* **one run a side**: the steps pooled, by their medians, with a 95% block-bootstrap
  interval (:mod:`.compare_stats`), blind to the spread between runs (the verdict says);
* **several runs on a side** (one or more on the other): each run's medians, with a
  95% t interval that carries the spread between runs (:mod:`.compare_runs`).

The verdict (:mod:`.compare_verdict`) calls a change only when the step time's interval
excludes 1, or (spread known) a part's change is beyond its own noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from stepscope.analysis.compare_contention import Contention, contention_of, judged_steps
from stepscope.analysis.compare_lacks import (
    MissingPart,
    MissingPhase,
    lacking_parts,
    lacking_phases,
    recorded,
)
from stepscope.analysis.compare_runs import RunSpread, between_runs, beyond_noise, spread_of
from stepscope.analysis.compare_setup import Setup, SetupDiff, diff_setups, read_setup
from stepscope.analysis.compare_stats import Interval, bootstrap
from stepscope.analysis.compare_steps import (
    HOST_PARTS,
    LeftOut,
    Run,
    pool_runs,
    steady_steps,
    step_quantiles,
    total_left_out,
)
from stepscope.analysis.compare_verdict import DEVICE_PARTS, verdict_of

if TYPE_CHECKING:
    from typing import TypeAlias

    import pandas as pd

    from stepscope.analysis.downsample import FloatArray
    from stepscope.read import Job

    Side: TypeAlias = Job | Sequence[Job]  # a side of a comparison: one job, or its runs

__all__ = [
    "Comparison",
    "LeftOut",
    "PartChange",
    "PhaseComparison",
    "compare",
    "compare_jobs",
    "compare_sides",
    "runs_of",
    "steady_steps",
]

MIN_STEPS = 10  # fewer steady steps in a run: too few to say anything about its noise
PARTS = (*HOST_PARTS, *DEVICE_PARTS)


@dataclass(frozen=True)
class PartChange:
    """One part of the step: median seconds per step and share of the median step in
    each side; ``change`` is B - A (seconds) with its 95% interval. With several runs a
    side, ``family`` is its family-wise interval and ``beyond_noise`` whether the
    change is past the spread between runs (:mod:`.compare_runs`)."""

    part: str
    base_s: float
    new_s: float
    base_share: float
    new_share: float
    change: Interval
    family: Interval | None = None
    beyond_noise: bool = False


@dataclass(frozen=True)
class PhaseComparison:
    """One phase of B against A; ``ratio`` is B's median step time over A's."""

    phase: str
    base_left_out: LeftOut
    new_left_out: LeftOut
    base_median: float
    new_median: float
    base_p90: float
    new_p90: float
    ratio: Interval | None
    parts: list[PartChange]
    direction: str  # "slower", "faster", "same", or "unknown" (too few steps)
    mostly: str | None
    verdict: str
    basis: str = "step time"  # or "uncontended steps", "own time" (compare_contention)
    contention: tuple[Contention, Contention] | None = None
    missing_parts: list[MissingPart] = field(default_factory=list)  # compare_lacks
    runs: RunSpread | None = None  # each run's median step, the spread between runs

    @property
    def throughput(self) -> tuple[float, float]:
        """Steps per second of A and B (of the median steady step)."""
        return 1 / self.base_median, 1 / self.new_median

    @property
    def slower_low_pct(self) -> float | None:
        """The lower bound of the slowdown, % (negative: it may be faster)."""
        return None if self.ratio is None else 100 * (self.ratio.low - 1)


@dataclass(frozen=True)
class Comparison:
    """B (``new``) against the baseline A (``base``); a side of several runs is named
    by its runs' names joined with commas (``base_runs``, ``new_runs``: each run)."""

    base: str
    new: str
    phases: list[PhaseComparison]
    setup: SetupDiff
    base_setup: Setup = field(repr=False)
    new_setup: Setup = field(repr=False)
    missing_phases: list[MissingPhase] = field(default_factory=list)  # compare_lacks
    base_runs: list[str] = field(default_factory=list)
    new_runs: list[str] = field(default_factory=list)

    def samples_per_s(self, phase: PhaseComparison) -> tuple[float | None, float | None]:
        """Samples per second of A and B: steps per second times the batch size of the
        first DataLoader, where the agent recorded one (None where not)."""
        out = []
        for setup, rate in zip((self.base_setup, self.new_setup), phase.throughput, strict=True):
            size = setup.facts.get("dataloader0.batch_size", "")
            out.append(rate * int(size) if size.isdigit() else None)
        return out[0], out[1]


def compare_phase(phase: str, base: list[Run], new: list[Run], name: str) -> PhaseComparison:
    """B's runs of ``phase`` against A's (``name``: B's, for the verdict)."""
    a_out, b_out = total_left_out(base), total_left_out(new)
    a_runs, b_runs = [f for f, _ in base], [f for f, _ in new]
    fewest = min(len(f) for f in a_runs), min(len(f) for f in b_runs)
    if min(fewest) < MIN_STEPS:
        a, b = pool_runs(a_runs), pool_runs(b_runs)
        text = f"too few steady {phase} steps to compare ({fewest[0]} and {fewest[1]}"
        text += f"{' in a run' if len(base) + len(new) > 2 else ''}; {MIN_STEPS} needed)"
        return PhaseComparison(phase, a_out, b_out, *step_quantiles(a, b), None, [], "unknown",
                               None, text, missing_parts=lacking_parts(a, b, PARTS))  # fmt: skip
    contention = contention_of(pool_runs(a_runs)), contention_of(pool_runs(b_runs))
    a_runs, b_runs, basis = judged_steps(a_runs, b_runs, contention)
    a, b = pool_runs(a_runs), pool_runs(b_runs)
    parts = [p for p in PARTS if recorded(a, p) and recorded(b, p)]
    cols = ["duration", *parts]
    arrays = (
        [f[cols].to_numpy(np.float64) for f in a_runs],
        [f[cols].to_numpy(np.float64) for f in b_runs],
    )
    quantiles = step_quantiles(a, b)
    spread = spread_of(*(np.array([np.median(r[:, 0]) for r in side]) for side in arrays))
    if spread.known:
        ratio, changes, medians = _between(*arrays, parts)
        quantiles = (*medians, *quantiles[2:])
    else:
        ratio, changes = _within(a[cols], b[cols], parts)
    direction, mostly, text = verdict_of(name, ratio, changes, basis, contention, spread)
    return PhaseComparison(phase, a_out, b_out, *quantiles, ratio, changes, direction, mostly,
                           text, basis, contention, lacking_parts(a, b, PARTS), spread)  # fmt: skip


def _within(
    a: pd.DataFrame, b: pd.DataFrame, parts: list[str]
) -> tuple[Interval, list[PartChange]]:
    """One run on a side: the block bootstrap over the pooled steps of each side."""
    boot = bootstrap(a.to_numpy(np.float64), b.to_numpy(np.float64))
    changes = [
        PartChange(part, float(boot.base[i]), float(boot.new[i]),
                   float(boot.base[i] / boot.base[0]), float(boot.new[i] / boot.new[0]),
                   boot.difference(i))
        for i, part in enumerate(parts, start=1)
    ]  # fmt: skip
    return boot.ratio(0), changes


def _between(
    a: list[FloatArray], b: list[FloatArray], parts: list[str]
) -> tuple[Interval, list[PartChange], tuple[float, float]]:
    """Several runs a side: the t intervals on run medians, the parts of the verdict's
    pool (the device's on a GPU job, as for ``mostly``) judged as one family; with one
    run on a side, none (a part of one process swings past the others' spread)."""
    pool = ([p for p in parts if p in DEVICE_PARTS] or parts) if min(len(a), len(b)) > 1 else []
    stats = between_runs(a, b, family_size=max(1, len(pool)))
    base, new = stats.base, stats.new
    changes = [
        PartChange(part, float(base[i]), float(new[i]), float(base[i] / base[0]),
                   float(new[i] / new[0]), stats.changes[i - 1],
                   stats.family[i - 1] if part in pool else None,
                   part in pool and beyond_noise(stats.family[i - 1], float(base[0])) != 0)
        for i, part in enumerate(parts, start=1)
    ]  # fmt: skip
    return stats.ratio, changes, (float(base[0]), float(new[0]))


def _phases(job: Job) -> list[str]:
    """The phases ``job`` recorded."""
    return [str(p) for p in job.sql("SELECT DISTINCT phase FROM steps")["phase"].dropna()]


def compare_sides(base: list[Job], new: list[Job]) -> Comparison:
    """B's runs (``new``) against the baseline A's (``base``), one run a side or more:
    the phases every run recorded, training first; those only one side recorded in
    all its runs are named (``missing_phases``). The setups compared are each side's
    first run's."""
    if not base or not new:
        raise ValueError("compare_sides needs one run a side or more")
    of_a = sorted(set.intersection(*(set(_phases(j)) for j in base)))
    of_b = sorted(set.intersection(*(set(_phases(j)) for j in new)))
    common = sorted(set(of_a) & set(of_b), key=lambda p: (p != "train", p))
    name = ",".join(j.name for j in new)
    phases = [compare_phase(p, [steady_steps(j, p) for j in base],
                            [steady_steps(j, p) for j in new], name) for p in common]  # fmt: skip
    a, b = read_setup(base[0]), read_setup(new[0])
    missing = lacking_phases(of_a, of_b)
    return Comparison(",".join(j.name for j in base), name, phases, diff_setups(a, b), a, b,
                      missing, [j.name for j in base], [j.name for j in new])  # fmt: skip


def runs_of(side: Side) -> list[Job]:
    """A side's runs: one job, or several (a sequence of jobs)."""
    return list(side) if isinstance(side, Sequence) else [side]


def compare(base: Side, new: Side) -> Comparison:
    """B (``new``) against the baseline A (``base``), each side one job or a sequence of
    runs of one setup (:func:`compare_sides`)."""
    return compare_sides(runs_of(base), runs_of(new))


def compare_jobs(jobs: list[Job]) -> list[Comparison]:
    """Each job after the first against the first (the baseline)."""
    return [compare(jobs[0], job) for job in jobs[1:]]
