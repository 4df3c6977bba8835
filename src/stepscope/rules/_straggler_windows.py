"""Straggler's numbers: each rank's window medians, the slower ones, their cost.

Pure functions of the steps frame; :class:`~stepscope.rules.straggler.Straggler`
holds the parameters and words the findings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.profiled import standing
from stepscope.rules._reduce import peer_medians
from stepscope.rules._windows import Hit

METRICS = ("duration", "data_wait", "forward", "backward", "optimizer", "other", "busy")
CATCH_ALL = ("busy", "duration")  # named only for ranks no specific column names
MIN_STEPS = 3  # a rank's window with fewer steps is not judged


def judged_steps(
    steps: pd.DataFrame, events: pd.DataFrame, skip_steps: int
) -> tuple[pd.DataFrame, int]:
    """The training steps judged, and how many were left out as profiled (only
    those a window could have slowed: stepscope.analysis.profiled)."""
    if not len(steps):
        return steps, 0
    keep = (steps["phase"] == "train") & (steps["step"] >= skip_steps)
    profiled = standing(steps, events)
    left_out = int((keep.to_numpy() & profiled).sum())
    # Only the columns read: a day-long job's whole steps were copied (tens of MB).
    read = ("rank", "node", "step", "start", "end", "collective", *METRICS)
    steps = steps[[c for c in read if c in steps]][keep.to_numpy() & ~profiled]
    # Jobs written before the agent measured collectives have no such column.
    waited = steps["collective"].fillna(0.0) if "collective" in steps else 0.0
    return steps.assign(collective=waited, busy=steps["duration"] - waited), left_out


def window_medians(steps: pd.DataFrame, window: int) -> pd.DataFrame:
    """Per (window, rank): step count, span, node and the median of every metric."""
    frame = steps.assign(win=steps["step"] // window)
    aggs: dict[str, tuple[str, str]] = {m: (m, "median") for m in (*METRICS, "collective")}
    grouped = frame.groupby(["win", "rank"])
    out = grouped.agg(
        n=("step", "size"),
        first=("step", "min"),
        last=("step", "max"),
        start=("start", "min"),
        end=("end", "max"),
        node=("node", "first"),
        **aggs,
    )
    return out[out["n"] >= MIN_STEPS]


def slower(medians: pd.DataFrame, metric: str, threshold: float, floor: float) -> list[Hit]:
    """The (window, rank)s whose median of ``metric`` is over ``threshold`` times their
    peers' median, and over it by more than ``floor`` seconds."""
    table = medians[metric].unstack("rank")
    mine = table.to_numpy()  # in the medians' dtype: the same numbers as pandas
    peers = peer_medians(mine)  # every rank's peers at once: ranks x ranks pandas was slow
    with np.errstate(invalid="ignore"):
        worse = (mine > threshold * peers) & (mine - peers > floor)
    hits = []
    for i, j in zip(*np.nonzero(worse), strict=True):
        win, rank = table.index[i], table.columns[j]
        row = medians.loc[(win, rank)]
        ratio = float(mine[i, j] / peers[i, j]) if peers[i, j] > 0 else float("inf")
        hit = Hit(f"{rank}|{metric}", int(win), float(row["start"]), float(row["end"]), ratio)
        hits.append(hit)
    return hits


def waited_for(found: list[list[Hit]], medians: pd.DataFrame) -> float | None:
    """The time the job waited for its stragglers: in each window of a finding, the
    straggler's median excess over its peers' times its steps (the worst straggler
    of a window only: the others wait for the slowest once)."""
    if not found:
        return None
    lost: dict[int, float] = {}
    for run in found:
        rank_s, metric = run[0].key.split("|")
        for hit in run:
            table = medians.xs(hit.win, level="win")
            mine = table.loc[int(rank_s)]
            peers = float(table.drop(index=int(rank_s))[metric].median())
            cost = max(float(mine[metric]) - peers, 0.0) * int(mine["n"])
            lost[hit.win] = max(lost.get(hit.win, 0.0), cost)
    return sum(lost.values())


def specific_first(found: list[list[Hit]]) -> list[list[Hit]]:
    """Drop catch-all findings (busy, duration) of ranks that a specific column names."""
    keys = [run[0].key.split("|") for run in found]
    named = {rank for rank, metric in keys if metric not in CATCH_ALL}
    return [
        run
        for run, (rank, metric) in zip(found, keys, strict=True)
        if metric not in CATCH_ALL or rank not in named
    ]
