"""The base of the host rules (HostContention, MemoryPressure): flagged samples, the
windows they fire, and what the job's steps lost in those windows.

A host rule flags each sample of a node (:meth:`HostRule.flags`); a window fires when
the share of flagged samples exceeds ``threshold`` (a share, not a mean: one burst
does not fire a window, nor does one quiet sample silence it). Steps are then split
by the window their middle falls in: fired windows, and judged windows that did not
fire. Per rank, the cost of the problem is the number of steps taken in fired windows
times the excess of their median duration over the median of the others; the
node's cost is its slowest rank's, the job's its slowest node's (ranks and nodes run
in parallel). A rule that measures what the problem took during the steps
(:meth:`HostRule.measured`: HostContention, the time the job's threads waited for a
core, beyond their usual wait in the quiet steps) is costed by that measure, which
needs no baseline (contention over the whole job) and is not misled by a few odd
steps in a quiet window; others are costed by the step times, and without steps
outside fired windows (no baseline) have no cost.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from stepscope.jobfolder import JsonObject
from stepscope.rules._cost import within_evidence
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import Part
from stepscope.rules._reduce import Windows
from stepscope.rules._system_base import SystemRule
from stepscope.rules._types import Finding, RuleResult
from stepscope.rules._windows import Hit, patience_reason, runs, window_index, window_width


@dataclass(frozen=True)
class StepEffect:
    """The job's steps in fired windows against those in quiet ones (medians, seconds)."""

    hit: float | None = None
    quiet: float | None = None
    n_hit: int = 0
    n_quiet: int = 0
    cost: float | None = None  # seconds the slowest rank lost, None without a baseline
    # seconds measured during the steps in fired windows (the slowest rank's): for
    # HostContention the job's threads' run-queue wait; None where not measured
    measured: float | None = None
    measured_as: str = "{}"  # what ``measured`` is, for the message ({} takes it)
    estimate: float | None = None  # the cost before it was held to the time it lasted

    def held(self, lasted: float) -> StepEffect:
        """The effect with its cost at most ``lasted`` seconds (the fired windows' time):
        a problem costs no more time than it lasted."""
        if self.cost is None or self.cost <= lasted:
            return self
        return replace(self, cost=lasted, estimate=self.cost)

    def _lost(self) -> str:
        lost = f"about {self.cost or 0.0:.3g} s lost"
        if self.estimate is None:
            return lost
        return f"{lost} (estimated {self.estimate:.3g} s, held to the time it lasted)"

    def text(self) -> str:
        """For a finding's message: how step time varies with the problem."""
        if not self.n_hit or self.hit is None:
            return "no step was taken during it"
        if self.measured is not None:
            waited = self.measured_as.format(f"{self.measured:.3g} s")
            if self.quiet is None:
                steps = (
                    f"median step {self.hit:.3g} s during it ({self.n_hit} steps, none outside it)"
                )
            else:
                ratio = self.hit / self.quiet if self.quiet > 0 else float("inf")
                steps = (
                    f"median step {self.hit:.3g} s during it vs {self.quiet:.3g} s otherwise "
                    f"({ratio:.2g}x; {self.n_hit} and {self.n_quiet} steps)"
                )
            return f"{steps}; {waited}: {self._lost()}"
        if self.quiet is None:
            return f"median step {self.hit:.3g} s during it, none outside it to compare with"
        ratio = self.hit / self.quiet if self.quiet > 0 else float("inf")
        return (
            f"median step {self.hit:.3g} s during it vs {self.quiet:.3g} s otherwise "
            f"({ratio:.2g}x; {self.n_hit} and {self.n_quiet} steps), {self._lost()}"
        )


def step_effect(
    steps: pd.DataFrame, win: npt.NDArray[np.int64], fired: set[int], judged: set[int]
) -> StepEffect:
    """:class:`StepEffect` of ``steps`` whose windows are ``win`` (one per step)."""
    hit = np.isin(win, list(fired))
    quiet = np.isin(win, list(judged - fired))
    d = steps["duration"].to_numpy(np.float64)
    ranks = steps["rank"].to_numpy()
    costs: list[float] = []
    for rank in np.unique(ranks[hit]):
        mine = ranks == rank
        if (mine & quiet).any():
            excess = np.median(d[mine & hit]) - np.median(d[mine & quiet])
            costs.append(int((mine & hit).sum()) * max(float(excess), 0.0))
    return StepEffect(
        float(np.median(d[hit])) if hit.any() else None,
        float(np.median(d[quiet])) if quiet.any() else None,
        int(hit.sum()),
        int(quiet.sum()),
        max(costs) if costs else None,
    )


class HostRule(SystemRule):
    """A node rule over flagged samples, with the cost of the windows that fire."""

    needs_gpu = False
    #: Columns without which the rule cannot judge a node (absent in older jobs).
    required: ClassVar[tuple[str, ...]] = ()

    def flags(self, framed: pd.DataFrame, w: Windows, data: RuleInput) -> npt.NDArray[np.bool_]:
        """Per sample (in window order): the problem holds."""
        raise NotImplementedError

    def level(self, framed: pd.DataFrame, w: Windows, data: RuleInput) -> npt.NDArray[np.float64]:
        """Per sample (in window order): the figure a window's median reports."""
        raise NotImplementedError

    def describe(
        self, node: str, run: list[Hit], framed: pd.DataFrame, data: RuleInput, effect: StepEffect
    ) -> Finding:
        """The finding of one run of fired windows (``framed``: the judged samples)."""
        raise NotImplementedError

    def check(self, data: RuleInput) -> Part:
        node = data.node_names()[0] if data.node_names() else "this node"
        if (reason := self._missing(data, node) or self.unjudged(data)) is not None:
            return Part(na_reason=reason)
        framed = self.framed(data, [])
        if not len(framed):
            return Part(na_reason=patience_reason(self.p_int("patience"), len(data.system)))
        w = self.windows_of(framed)
        fired = w.share(self.flags(framed, w, data)) > self.p_float("threshold")
        medians = w.quantiles(self.level(framed, w, data)[:, None], [0.5])[:, 0, 0]
        found = runs(w.hits("", medians, fired))
        effect = self._effect(data, node, {int(i) for i in w.ids[fired]}, {int(i) for i in w.ids})
        effect = effect.held(sum(run[-1].end - run[0].start for run in found))
        findings = [self.describe(node, run, framed, data, effect) for run in found]
        mine: JsonObject = {"windows": len(w.ids), "fired": int(fired.sum())}
        mine |= {"cost_seconds": effect.cost if findings else None, **self.more_details(data)}
        return Part(findings, sum(len(r) for r in found), len(framed), {node: mine})

    def _missing(self, data: RuleInput, node: str) -> str | None:
        """What the node's samples lack to be judged (older jobs lack the new columns)."""
        system = data.system
        missing = [c for c in self.required if c not in system or not system[c].notna().any()]
        if not len(system):
            return f"no system samples on {node}"
        if not missing:
            return None
        return (
            f"no {', '.join(missing)} on {node}: absent or null in all {len(system)} "
            "samples (not recorded for this job: an older or imported job)"
        )

    def unjudged(self, data: RuleInput) -> str | None:
        """Why the node cannot be judged although its samples have the columns."""
        return None

    def more_details(self, data: RuleInput) -> JsonObject:
        """Rule-specific figures of the node for the result's ``details``."""
        return {}

    def measured(
        self, data: RuleInput, hit: pd.DataFrame, quiet: pd.DataFrame
    ) -> StepEffect | None:
        """What the problem measurably took during the ``hit`` steps (those in fired
        windows), against the ``quiet`` ones (in judged windows that did not fire;
        maybe none): a :class:`StepEffect` with ``cost``, ``measured`` and
        ``measured_as``; None where the rule measures nothing (the step times then
        cost it, and a job without a baseline has no cost)."""
        return None

    def _effect(self, data: RuleInput, node: str, fired: set[int], judged: set[int]) -> StepEffect:
        steps = data.steps
        if not len(steps) or not fired:
            return StepEffect()
        if (steps["phase"] == "train").any():
            steps = steps[steps["phase"] == "train"]
        width = window_width(data, node, self.p_int("window"))
        mid = (steps["start"].to_numpy(np.float64) + steps["end"].to_numpy(np.float64)) / 2
        win = window_index(mid, data.start(), width)
        effect = step_effect(steps, win, fired, judged)
        hit, quiet = np.isin(win, list(fired)), np.isin(win, list(judged - fired))
        if effect.n_hit and (m := self.measured(data, steps[hit], steps[quiet])):
            effect = replace(effect, cost=m.cost, measured=m.measured, measured_as=m.measured_as)
        return effect

    def combine(self, parts: list[Part], data: RuleInput) -> RuleResult:
        """As :class:`NodeRule`, with ``cost_seconds``: the slowest node's (None if unknown),
        at most the time the findings span; the fix removes the problem: the saving is
        the cost."""
        res = super().combine(parts, data)
        costs = [
            v.get("cost_seconds") for p in parts for v in p.details.values() if isinstance(v, dict)
        ]
        known = [float(c) for c in costs if isinstance(c, int | float)]
        cost = within_evidence(max(known) if known else None, res.findings)
        return replace(res, cost_seconds=cost, saving_seconds=cost)  # the fix: stop it


def medians_in(
    framed: pd.DataFrame, run: list[Hit], columns: dict[str, pd.Series]
) -> dict[str, float]:
    """The median of each series (aligned with ``framed``) over the samples of ``run``."""
    t = framed["time"]
    inside = ((t >= run[0].start) & (t <= run[-1].end)).to_numpy()
    out = {}
    for name, series in columns.items():
        x = series.to_numpy(np.float64)[inside]
        x = x[~np.isnan(x)]
        out[name] = float(np.median(x)) if len(x) else float("nan")
    return out
