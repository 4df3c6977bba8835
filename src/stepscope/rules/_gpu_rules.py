"""GPU rules: GPUMemoryIncrease and GPUIdleBetweenSteps (LoadBalancing has its own module)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._base import Part
from ._input import RuleInput
from ._params import Param, patience, window
from ._system_rules import SystemRule, lasted, pct
from ._types import Finding
from ._windows import Hit, gpu_indices, hits_from, no_gpu_reason, severity, window_spans, worst_of


def mem_percent(framed: pd.DataFrame, g: int) -> pd.Series:
    """GPU ``g``'s memory used, % of its total (``gpu<g>_mem_util``, else used/total)."""
    col = f"gpu{g}_mem_util"
    if col in framed and framed[col].notna().any():
        return framed[col].astype(np.float64)
    used, total = framed.get(f"gpu{g}_mem_used"), framed.get(f"gpu{g}_mem_total")
    if used is None or total is None:
        return pd.Series(np.nan, index=framed.index)
    return used.astype(np.float64) / total.astype(np.float64) * 100.0


def fitted_rise(t: pd.Series, v: pd.Series, win: pd.Series) -> pd.Series:
    """Per window: the rise of the least-squares line through (t, v) over the window."""
    ok = v.notna().to_numpy()
    tt = (t - t.min()).to_numpy(np.float64)[ok]
    vv = v.to_numpy(np.float64)[ok]
    codes, wins = pd.factorize(win[ok], sort=True)
    if not len(wins):
        return pd.Series(dtype=np.float64)

    def total(x: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(codes, weights=x, minlength=len(wins))

    n, st, sv, stv, stt = total(), total(tt), total(vv), total(tt * vv), total(tt * tt)
    denom = n * stt - st**2
    slope = np.divide(n * stv - st * sv, denom, out=np.zeros_like(denom), where=denom > 0)
    ranges = pd.DataFrame({"t": tt, "v": vv}).groupby(codes).agg(["min", "max"])
    span_t = (ranges["t"]["max"] - ranges["t"]["min"]).to_numpy()
    span_v = (ranges["v"]["max"] - ranges["v"]["min"]).to_numpy()
    # The line overshoots a step change: never more than the window's own range.
    return pd.Series(np.minimum(slope * span_t, span_v), index=wins)


class GPUMemoryIncrease(SystemRule):
    name = "GPUMemoryIncrease"
    description = "GPU memory grows: a sudden jump or a slow, steady increase (a leak)."
    recommendation = (
        "Look for tensors kept across steps (losses appended to a list without .item(), "
        "growing caches, retained graphs); check torch.cuda.memory_summary() between steps."
    )
    params = (
        pct("increase", 10, "rise of GPU memory, in points of its total, that fires the rule"),
        patience(100),
        window(500),
        Param("lookback", 20, "windows over which a slow increase accumulates", int, minimum=1),
    )

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        spans, hits = window_spans(framed), []
        for g in gpus:
            mem = mem_percent(framed, g)
            means = mem.groupby(framed["win"]).mean()
            # A rise over the lowest recent window catches a jump and a slow climb alike;
            # the fitted line inside a window catches a climb in a short job.
            floor = means.shift(1).rolling(self.p("lookback"), min_periods=1).min()
            rise = (means - floor).fillna(0.0)
            inside = fitted_rise(framed["time"], mem, framed["win"])
            table = pd.DataFrame({"value": np.maximum(rise, inside.reindex(rise.index))})
            hits += hits_from(table, spans, f"gpu{g}", lambda r: r["value"] > self.p("increase"))
        return hits

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value, threshold = worst_of(run), self.p("increase")
        return Finding(
            f"{run[0].key} on {node}: memory rose by {value:.1f} points of its total "
            f"(> {threshold:g}) over {lasted(run)}",
            self.recommendation,
            severity(value, threshold, 50.0),
            node=node,
            device=run[0].key,
            start=run[0].start,
            end=run[-1].end,
            value=value,
            threshold=threshold,
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
        if not gpu_indices(data.system):
            return Part(na_reason=no_gpu_reason(data))
        train = data.steps[data.steps["phase"] == "train"] if len(data.steps) else data.steps
        if not len(train):
            return Part(na_reason="no training steps on this node: no training loop to judge")
        loop = data.system["time"].between(train["start"].min(), train["end"].max())
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

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        spans, hits = window_spans(framed), []
        for g in gpus:
            idle = (framed[f"gpu{g}_util"] < self.p("idle_threshold")).astype(np.float64)
            share = idle.groupby(framed["win"]).mean() * 100.0
            table = pd.DataFrame({"value": share})
            hits += hits_from(table, spans, f"gpu{g}", lambda r: r["value"] > self.p("threshold"))
        return hits

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value, threshold = worst_of(run), self.p("threshold")
        return Finding(
            f"{run[0].key} on {node} idle in {value:.0f}% of the training loop's samples "
            f"(> {threshold:g}%) for {lasted(run)}",
            self.recommendation,
            severity(value, threshold, 100.0),
            node=node,
            device=run[0].key,
            start=run[0].start,
            end=run[-1].end,
            value=value,
            threshold=threshold,
        )
