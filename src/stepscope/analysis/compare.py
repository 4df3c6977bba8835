"""``stepscope compare``: is B faster or slower than A, by how much for sure, and why.

Per phase, each job's **steady steps**: the steps StepOutlier judges (from its
``skip_steps`` on, not profiled as :mod:`.profiled` caps the flag) that are not its
outliers (:func:`.outliers.judge_steps`, with the job's own StepOutlier parameters).
What was left out is counted. A step of several ranks counts once, each column the
median over its ranks. The step time and each part of the step (seconds per step)
are compared by their medians, with a 95% block-bootstrap interval
(:mod:`.compare_stats`). The verdict calls a change only when the interval of the
ratio of medians excludes 1. Pure functions: nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from stepscope.analysis._plain import read_rules
from stepscope.analysis.compare_contention import (
    WAIT,
    Contention,
    contention_of,
    judged_steps,
    with_core_wait,
)
from stepscope.analysis.compare_lacks import (
    MissingPart,
    MissingPhase,
    lacking_parts,
    lacking_phases,
    recorded,
)
from stepscope.analysis.compare_setup import Setup, SetupDiff, diff_setups, read_setup
from stepscope.analysis.compare_stats import Interval, bootstrap
from stepscope.analysis.compare_verdict import (
    DEVICE_PARTS,
    basis_text,
    mostly_part,
    verdict_text,
)
from stepscope.analysis.outliers import Definition, judge_steps
from stepscope.analysis.profiled import KINDS, cap_profiled

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.read import Job

__all__ = ["Comparison", "LeftOut", "PartChange", "PhaseComparison", "compare", "compare_jobs"]

HOST_PARTS = ("data_wait", "forward", "backward", "optimizer", "other")
MIN_STEPS = 10  # fewer steady steps in a run: too few to say anything about its noise


@dataclass(frozen=True)
class LeftOut:
    """A run's steps of one phase (per step number) and those left out of the comparison."""

    total: int
    warmup: int
    profiled: int
    outliers: int

    @property
    def kept(self) -> int:
        return self.total - self.warmup - self.profiled - self.outliers


@dataclass(frozen=True)
class PartChange:
    """One part of the step: median seconds per step and share of the median step in
    each run; ``change`` is B - A (seconds) with its interval."""

    part: str
    base_s: float
    new_s: float
    base_share: float
    new_share: float
    change: Interval


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
    """Job B (``new``) against the baseline A (``base``)."""

    base: str
    new: str
    phases: list[PhaseComparison]
    setup: SetupDiff
    base_setup: Setup = field(repr=False)
    new_setup: Setup = field(repr=False)
    missing_phases: list[MissingPhase] = field(default_factory=list)  # compare_lacks

    def samples_per_s(self, phase: PhaseComparison) -> tuple[float | None, float | None]:
        """Samples per second of A and B: steps per second times the batch size of the
        first DataLoader, where the agent recorded one (None where not)."""
        out = []
        for setup, rate in zip((self.base_setup, self.new_setup), phase.throughput, strict=True):
            size = setup.facts.get("dataloader0.batch_size", "")
            out.append(rate * int(size) if size.isdigit() else None)
        return out[0], out[1]


def steady_steps(job: Job, phase: str) -> tuple[pd.DataFrame, LeftOut]:
    """The steady steps of ``phase`` (one row per step number, in order) and the count
    of what was left out (module docstring)."""
    steps = job.steps(phase=phase)
    if not len(steps):
        return steps, LeftOut(0, 0, 0, 0)
    steps = cap_profiled(steps, job.events(kinds=list(KINDS)))
    definition = Definition.of_job(read_rules(job))
    judged = judge_steps(steps, definition)
    kept = with_core_wait(job, judged[~judged["outlier"].to_numpy(dtype=bool)])
    per_step = _per_step(kept)
    total = int(steps["step"].nunique())
    warmup = int(steps.loc[steps["step"] < definition.skip_steps, "step"].nunique())
    late = steps[steps["step"] >= definition.skip_steps]
    profiled = int(late.loc[late["profiled"].fillna(False).astype(bool), "step"].nunique())
    outliers = max(0, total - warmup - profiled - len(per_step))
    return per_step, LeftOut(total, warmup, profiled, outliers)


def _per_step(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per step number: each column the median over the ranks, and the
    device idle within the step where the device parts are known."""
    cols = [c for c in ("duration", *HOST_PARTS, *DEVICE_PARTS[:3], WAIT, "others") if c in rows]
    frame = rows[["step", *cols]].astype({c: np.float64 for c in cols})
    out = frame.groupby("step", sort=True).median().reset_index()
    if all(c in out for c in DEVICE_PARTS[:3]):
        busy = out[list(DEVICE_PARTS[:3])].sum(axis=1, min_count=3)
        out["device_idle"] = np.maximum(out["duration"] - busy, 0.0)
    return out


def compare_phase(
    phase: str, base: tuple[pd.DataFrame, LeftOut], new: tuple[pd.DataFrame, LeftOut], name: str
) -> PhaseComparison:
    """B's steady steps of ``phase`` against A's (``name``: B's, for the verdict)."""
    (a, a_out), (b, b_out) = base, new
    if len(a) < MIN_STEPS or len(b) < MIN_STEPS:
        text = (
            f"too few steady {phase} steps to compare ({len(a)} and {len(b)}; {MIN_STEPS} needed)"
        )
        p, missing = _quantiles(a, b), lacking_parts(a, b, (*HOST_PARTS, *DEVICE_PARTS))
        return PhaseComparison(phase, a_out, b_out, *p, None, [], "unknown", None, text,
                               missing_parts=missing)  # fmt: skip
    contention = contention_of(a), contention_of(b)
    a, b, basis = judged_steps(a, b, contention)
    parts = [p for p in (*HOST_PARTS, *DEVICE_PARTS) if recorded(a, p) and recorded(b, p)]
    cols = ["duration", *parts]
    boot = bootstrap(a[cols].to_numpy(np.float64), b[cols].to_numpy(np.float64))
    ratio = boot.ratio(0)
    changes = [
        PartChange(part, float(boot.base[i]), float(boot.new[i]),
                   float(boot.base[i] / boot.base[0]), float(boot.new[i] / boot.new[0]),
                   boot.difference(i))
        for i, part in enumerate(cols) if i
    ]  # fmt: skip
    direction = "slower" if ratio.low > 1 else "faster" if ratio.high < 1 else "same"
    mostly = mostly_part(changes, direction)
    text = verdict_text(name, ratio, direction, mostly) + basis_text(basis, contention)
    return PhaseComparison(phase, a_out, b_out, *_quantiles(a, b), ratio, changes, direction,
                           mostly, text, basis, contention,
                           lacking_parts(a, b, (*HOST_PARTS, *DEVICE_PARTS)))  # fmt: skip


def _quantiles(a: pd.DataFrame, b: pd.DataFrame) -> tuple[float, float, float, float]:
    def q(frame: pd.DataFrame, at: float) -> float:
        d = frame["duration"].to_numpy(np.float64) if len(frame) else np.empty(0)
        return float(np.quantile(d, at)) if len(d) else float("nan")

    return q(a, 0.5), q(b, 0.5), q(a, 0.9), q(b, 0.9)


def _phases(job: Job) -> list[str]:
    """The phases ``job`` recorded."""
    return [str(p) for p in job.sql("SELECT DISTINCT phase FROM steps")["phase"].dropna()]


def compare(base: Job, new: Job) -> Comparison:
    """Job ``new`` (B) against the baseline ``base`` (A): the phases both recorded,
    training first; those only one recorded are named (``missing_phases``)."""
    of_a, of_b = _phases(base), _phases(new)
    common = sorted(set(of_a) & set(of_b), key=lambda p: (p != "train", p))
    phases = [
        compare_phase(p, steady_steps(base, p), steady_steps(new, p), new.name) for p in common
    ]
    a, b = read_setup(base), read_setup(new)
    missing = lacking_phases(of_a, of_b)
    return Comparison(base.name, new.name, phases, diff_setups(a, b), a, b, missing)


def compare_jobs(jobs: list[Job]) -> list[Comparison]:
    """Each job after the first against the first (the baseline)."""
    return [compare(jobs[0], job) for job in jobs[1:]]
