"""GPUMemoryIncrease: a GPU's memory grows (GPUIdleBetweenSteps: ``_gpu_idle``; LoadBalancing:
``_balance``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import Part
from stepscope.rules._params import Param, patience, window
from stepscope.rules._reduce import Windows
from stepscope.rules._system_base import SystemRule, lasted, pct
from stepscope.rules._text import versus
from stepscope.rules._trend import COLUMNS, compact, trend_rise
from stepscope.rules._types import Finding
from stepscope.rules._windows import Hit, node_gpus, run_finding, severity, worst_of


def mem_percent(w: Windows, framed: pd.DataFrame, g: int) -> npt.NDArray[np.float64]:
    """GPU ``g``'s memory used, % of its total (``gpu<g>_mem_util``, else used/total),
    in window order."""
    col = f"gpu{g}_mem_util"
    if w.has_values(framed, col):
        return w.columns(framed, [col])[:, 0]
    used, total = f"gpu{g}_mem_used", f"gpu{g}_mem_total"
    if used not in framed or total not in framed:
        return np.full(len(framed), np.nan)
    x = w.columns(framed, [used, total])
    return x[:, 0] / x[:, 1] * 100.0


def fitted_rise(w: Windows, t: FloatArray, v: FloatArray) -> FloatArray:
    """Per window and column of ``v``: the rise of the least-squares line through
    (t, v) over the window (0 where it cannot be fitted). Each temporary (rows x GPUs,
    tens of MB for a day of samples) is dropped once summed: a day-long node's peak."""
    ok = ~np.isnan(v)

    def total(x: FloatArray) -> FloatArray:
        return np.asarray(np.add.reduceat(x, w.offsets, axis=0))

    def span(x: FloatArray) -> FloatArray:
        high = np.maximum.reduceat(np.where(ok, x, -np.inf), w.offsets, axis=0)
        return np.asarray(high - np.minimum.reduceat(np.where(ok, x, np.inf), w.offsets, axis=0))

    tt = np.where(ok, (t - t.min())[:, None], 0.0)
    vv = np.where(ok, v, 0.0)
    n, st, sv, stv = total(ok * 1.0), total(tt), total(vv), total(tt * vv)
    del vv
    stt, span_t = total(tt * tt), span(tt)
    del tt
    denom = n * stt - st**2
    slope = np.divide(n * stv - st * sv, denom, out=np.zeros_like(denom), where=denom > 0)
    # The line overshoots a step change: never more than the window's own range.
    rise = np.minimum(slope * np.nan_to_num(span_t), np.nan_to_num(span(v)))
    return np.where(n > 1, rise, 0.0)


def floor_before(means: FloatArray, lookback: int) -> FloatArray:
    """Per window (rows): the lowest mean of the ``lookback`` windows before it (NaN if none)."""
    pad = np.full((lookback, means.shape[1]), np.nan)
    before = np.concatenate([pad, means[:-1]])
    view = np.lib.stride_tricks.sliding_window_view(before, lookback, axis=0)
    return np.asarray(np.fmin.reduce(view, axis=-1))


class GPUMemoryIncrease(SystemRule):
    """Per GPU: a window above the lowest of the ``lookback`` windows before it, a
    line rising inside a window, or the robust trend of the window medians over the
    whole job so far, by more than ``increase`` points of the GPU's memory."""

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
        w, hits = self.windows_of(framed), []
        mem = np.column_stack([mem_percent(w, framed, g) for g in gpus])
        means = w.mean(mem)
        # A rise over the lowest recent window catches a jump and a slow climb alike;
        # the fitted line inside a window catches a climb in a short job.
        rise = np.nan_to_num(means - floor_before(means, self.p_int("lookback")))
        inside = fitted_rise(w, w.columns(framed, ["time"])[:, 0], mem)
        value = np.maximum(rise, inside)
        fired = value > self.p_float("increase")
        for i, g in enumerate(gpus):
            hits += w.hits(f"gpu{g}", value[:, i], fired[:, i])
        return hits

    def needs(self, gpus: list[int]) -> list[tuple[str, ...]]:
        return [tuple(f"gpu{g}_{m}" for g in gpus for m in ("mem_util", "mem_used"))]

    def check(self, data: RuleInput) -> Part:
        part = super().check(data)
        if part.na_reason is not None:
            return part
        seen = {f.device for f in part.findings}  # a GPU already found by its windows
        points = self.summary(data)
        kept = data.history.get(self.rule_name)
        if kept is not None and len(kept):
            points = pd.concat([kept, points], ignore_index=True)
        for key, group in compact(points).groupby("key", sort=True):
            rise = trend_rise(group)
            if key not in seen and rise > self.p_float("increase"):
                part.findings.append(self.trend_finding(str(key), group, rise, data))
                part.triggers += 1
        return part

    def summary(self, data: RuleInput) -> pd.DataFrame:
        """Per GPU and window after patience: the median memory and the middle time."""
        gpus = node_gpus(data)
        framed = self.framed(data, gpus) if gpus else data.system.iloc[:0]
        if not len(framed):
            return pd.DataFrame({c: [] for c in COLUMNS})
        w = self.windows_of(framed)
        mem = np.column_stack([mem_percent(w, framed, g) for g in gpus])
        medians = w.quantiles(mem, [0.5])[:, 0, :]
        middle = (w.start + w.end) / 2
        return pd.DataFrame(
            {
                "key": np.repeat([f"gpu{g}" for g in gpus], len(middle)),
                "time": np.tile(middle, len(gpus)),
                "value": medians.T.ravel(),
                "n": np.tile(w.counts, len(gpus)),
            }
        ).dropna(subset=["value"])

    def trend_finding(
        self, key: str, points: pd.DataFrame, rise: float, data: RuleInput
    ) -> Finding:
        threshold = self.p_float("increase")
        start, end = float(points["time"].min()), float(points["time"].max())
        node = data.node_names()[0] if data.node_names() else ""
        return Finding(
            f"{key} on {node}: memory rose by {versus(rise, threshold, 'points')} of its total "
            f"over the job so far ({(end - start) / 3600:.1f} h; robust "
            f"trend of {int(points['n'].sum())} samples' window medians): a slow leak",
            self.recommendation,
            severity(rise, threshold, 50.0),
            node=node,
            device=key,
            start=start,
            end=end,
            value=rise,
            threshold=threshold,
        )

    def finding(self, node: str, run: list[Hit]) -> Finding:
        value, threshold = worst_of(run), self.p_float("increase")
        text = (
            f"{run[0].key} on {node}: memory rose by {versus(value, threshold, 'points')} of "
            f"its total over {lasted(run)}"
        )
        return run_finding(
            text, self.recommendation, run, value, threshold, 50.0, node=node, device=run[0].key
        )
