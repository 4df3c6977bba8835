"""GPUIdleBetweenSteps: GPUs idle while the training loop runs (host work between steps)."""

from __future__ import annotations

import pandas as pd

from stepscope.rules._device import with_loop_gpus
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import Part
from stepscope.rules._params import patience, window
from stepscope.rules._reduce import Windows
from stepscope.rules._system_base import SystemRule, lasted, pct
from stepscope.rules._text import versus
from stepscope.rules._types import Finding
from stepscope.rules._windows import (
    GPU_UTIL,
    Hit,
    gpu_indices,
    no_gpu_reason,
    node_gpus,
    run_finding,
    worst_of,
)


class GPUIdleBetweenSteps(SystemRule):
    name = "GPUIdleBetweenSteps"
    description = "GPUs sit idle while the training loop runs (host work between steps)."
    recommendation = (
        "Overlap host work with the GPU: prefetch the next batch (DataLoader workers, "
        "pin_memory=True, non_blocking copies), avoid .item()/.cpu() syncs and logging every "
        "step, and keep checkpointing and evaluation off the critical path."
    )
    params = (
        pct("threshold", 20, "share of idle GPU samples in a window that fires the rule"),
        pct("idle_threshold", 5, "GPU utilization below which a sample counts as idle"),
        patience(100),
        window(500),
    )

    def check(self, data: RuleInput) -> Part:
        # Too short for the patience: the diagnosis still says what the samples show.
        return with_loop_gpus(self._check(data), data, node_gpus(data))

    def _check(self, data: RuleInput) -> Part:
        gpus = node_gpus(data)
        if not gpus:
            return Part(na_reason=no_gpu_reason(data))
        train = data.steps[data.steps["phase"] == "train"] if len(data.steps) else data.steps
        if not len(train):
            return Part(na_reason="no training steps on this node: no training loop to judge")
        low, high = train["start"].min(), train["end"].max()
        loop = data.system["time"].between(low, high)
        if bool(loop.all()):
            return super().check(data)
        if self._same_framing(data, loop, gpus):
            # The samples of the loop framed as the other rules framed them all.
            framed = self.framed(data, gpus)
            framed = framed[framed["time"].between(low, high)]
            self._windows = (framed, Windows(framed) if len(framed) else None)
            return self.judge(framed, gpus, int(loop.sum()))
        return super().check(
            RuleInput(
                system=data.system[loop],
                steps=train,
                nodes=data.nodes,
                now=data.now,
                origin=data.start(),
                meta=data.meta,
            )
        )

    @staticmethod
    def _same_framing(data: RuleInput, loop: pd.Series, gpus: list[int]) -> bool:
        """Whether the loop's samples alone have the same GPUs and sampling interval."""
        util = [c for c in data.system.columns if GPU_UTIL.match(str(c))]
        known = bool(data.nodes) and all(i.get("interval_ms") for i in data.nodes.values())
        return known and gpu_indices(data.system.loc[loop, util]) == gpus

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        w, hits = self.windows_of(framed), []
        util = w.columns(framed, [f"gpu{g}_util" for g in gpus])
        share = w.share(util < self.p_float("idle_threshold"))
        fired = share > self.p_float("threshold")
        for i, g in enumerate(gpus):
            hits += w.hits(f"gpu{g}", share[:, i], fired[:, i])
        return hits

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value, threshold = worst_of(run), self.p_float("threshold")
        text = (
            f"{run[0].key} on {node} idle in {versus(value, threshold, '%')} of the training "
            f"loop's samples for {lasted(run)}"
        )
        return run_finding(
            text, self.recommendation, run, value, threshold, 100.0, node=node, device=run[0].key
        )
