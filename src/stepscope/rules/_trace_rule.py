"""The base of the kernel rules (docs/rules.md, "Inside the GPU"): a rule judged
window by window on the PyTorch traces of the detailed windows.

Each window gives findings and the device time they cost per step; the job's cost is
that per-step cost (the median over a rank's windows) times the rank's training
steps, the worst rank's: the diagnosis ranks the rules by it. No window with a
trace, or none with device activity: NotApplicable, never zero. The time intervals
the rules measure are in ``_device_intervals``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import pandas as pd

from stepscope.read import DeviceEvent
from stepscope.rules._base import Rule
from stepscope.rules._device_intervals import Alone, alone_per_device
from stepscope.rules._input import RuleInput
from stepscope.rules._trace_source import TraceWindow
from stepscope.rules._types import Finding, RuleResult, Status

NO_TRACE = (
    "no detailed profiling window with a PyTorch trace in this job (profile one: "
    "stepscope profile JOB --detailed)"
)
NO_DEVICE = "no kernel events in the traces: recorded without CUDA activity"


@dataclass
class Judged:
    """What one window showed: findings, the data points judged (kernels, copies) and
    the device seconds the findings cost per step of the window."""

    findings: list[Finding] = field(default_factory=list)
    datapoints: int = 0
    cost_per_step: float = 0.0


class TraceRule(Rule):
    """A rule on the detailed windows' traces: implement :meth:`judge`."""

    frames: ClassVar[tuple[str, ...]] = ("steps",)
    #: what a window needs besides kernels to be judged, said when none has it
    needs_text: ClassVar[str] = ""

    def judge(self, window: TraceWindow) -> Judged | None:
        """Judge one window with device activity; None: it holds nothing to judge."""
        raise NotImplementedError

    def device_finding(
        self, window: TraceWindow, device: int, message: str, share: float, scale: float, param: str
    ) -> Finding:
        """A finding on GPU ``device`` of ``window``: ``share`` (%) against the parameter
        ``param``, its severity ``share / scale`` (at most 1)."""
        return Finding(
            message,
            self.recommendation,
            min(1.0, share / scale),
            device=f"gpu{device}",
            rank=window.rank,
            steps=window_steps(window),
            value=share,
            threshold=self.p_float(param),
        )

    def judge_alone(
        self,
        window: TraceWindow,
        chosen: list[DeviceEvent],
        param: str,
        say: Callable[[Alone], str],
    ) -> Judged:
        """Per device: a finding where ``chosen`` ran alone for at least ``param`` % of
        the active span (``say`` words what follows its window and GPU); its cost is the
        time they ran alone."""
        judged = Judged(datapoints=len(chosen))
        for alone in alone_per_device(window.trace.device, chosen):
            if alone.share < self.p_float(param):
                continue
            judged.cost_per_step += alone.seconds / window.steps
            judged.findings.append(
                self.device_finding(
                    window,
                    alone.device,
                    f"{window.label}, GPU {alone.device}: {say(alone)}",
                    alone.share,
                    50.0,
                    param,
                )
            )
        return judged

    def evaluate(self, data: RuleInput) -> RuleResult:
        windows = data.traces() if data.traces is not None else []
        if not windows:
            return self.not_applicable(data, NO_TRACE)
        on_device = [w for w in windows if any(e.cat == "kernel" for e in w.trace.device)]
        if not on_device:
            return self.not_applicable(data, NO_DEVICE)
        judged = [(w, j) for w in on_device if (j := self.judge(w)) is not None]
        if not judged:
            return self.not_applicable(data, self.needs_text or NO_DEVICE)
        findings = [f for _, j in judged for f in j.findings]
        datapoints = sum(j.datapoints for _, j in judged)
        cost = _job_cost(judged, data.steps) if findings else None
        details: dict[str, object] = {"windows": len(judged)}
        if not findings:
            message = f"No issue found in {datapoints} datapoints of {len(judged)} window(s)."
            status = Status.NO_ISSUES_FOUND
        else:
            worst = max(findings, key=lambda f: f.severity)
            message = (
                f"{len(findings)} finding(s) in {len(judged)} window(s); worst: {worst.message}"
            )
            status = Status.ISSUES_FOUND
        return self.result(
            status,
            data,
            findings=findings,
            datapoints=datapoints,
            message=message,
            details=details,
            cost_seconds=cost,
        )


def _job_cost(judged: list[tuple[TraceWindow, Judged]], steps: pd.DataFrame) -> float:
    """Per rank: the median per-step cost of its windows times its training steps (the
    windows' own steps when the job's are not known); the worst rank's."""
    per_rank: dict[int | None, list[float]] = defaultdict(list)
    covered: dict[int | None, int] = defaultdict(int)
    for w, j in judged:
        per_rank[w.rank].append(j.cost_per_step)
        covered[w.rank] += w.steps
    costs = []
    for rank, values in per_rank.items():
        n = _train_steps(steps, rank) or covered[rank]
        costs.append(statistics.median(values) * n)
    return max(costs)


def _train_steps(steps: pd.DataFrame, rank: int | None) -> int:
    if not len(steps) or "rank" not in steps or rank is None:
        return 0
    mine = steps[steps["rank"] == rank]
    if "phase" in mine:
        mine = mine[mine["phase"] == "train"]
    return len(mine)


def ms(seconds: float) -> str:
    """``2.31 ms``."""
    return f"{seconds * 1e3:.2f} ms"


def window_steps(window: TraceWindow) -> tuple[int, int] | None:
    """The window's (first, last) steps for a finding; None when it does not say."""
    if window.start_step is None or window.end_step is None:
        return None
    return (window.start_step, window.end_step)
