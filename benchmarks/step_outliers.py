"""Recall and false flags of StepOutlier's definition against the seed's, on recorded jobs.

Usage: python benchmarks/step_outliers.py JOB [JOB ...] [--every 40]

Each JOB is a job folder of ``tests/scripts/mlp.py --stall-every K`` (its stalls
are steps K, 2K, ...) or, with ``silent`` in its name, the same job without
stalls. Prints, per job and ``stddev``, the stalls found and the other steps
flagged by the seed's definition (leave-one-out mean and standard deviation,
iterated, as StepOutlier had it) and by ``stepscope.analysis.outliers``. Also
times the robust definition on 1M synthetic steps.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

import stepscope
from stepscope.analysis.outliers import Definition, judge, judge_steps

Floats = npt.NDArray[np.float64]


def seed(d: Floats, k: float, min_excess: float = 0.1, floor: float = 0.01) -> npt.NDArray[np.intp]:
    """The previous StepOutlier definition: leave-one-out mean + k std, iterated."""
    flagged = np.zeros(len(d), dtype=bool)
    for _ in range(10):
        keep = d[~flagged]
        n, s, q = len(keep), keep.sum(), (keep * keep).sum()
        if n < 3:
            break
        inside = ~flagged
        m = n - inside.astype(np.float64)
        mean = (s - np.where(inside, d, 0.0)) / m
        var = (q - np.where(inside, d**2, 0.0)) / m - mean**2
        std = np.maximum(np.sqrt(np.maximum(var, 0.0)), floor * np.abs(mean))
        excess = np.abs(d - mean)
        new = (excess > k * std) & (excess > min_excess) & ~flagged
        if not new.any() or (flagged | new).sum() * 2 > len(d):
            break
        flagged |= new
    return np.flatnonzero(flagged)


def score(found: set[int], truth: set[int]) -> str:
    return f"{len(found & truth):2d}/{len(truth)} found, {len(found - truth):2d} false"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("jobs", nargs="+")
    ap.add_argument("--every", type=int, default=40)
    a = ap.parse_args()
    for path in a.jobs:
        steps = stepscope.open(path).steps(phase="train")
        name = Path(path).name
        for k in (3.0, 5.0):
            judged = judge_steps(steps, Definition(stddev=k))
            st = judged["step"].to_numpy()
            truth = set() if "silent" in name else {int(s) for s in st[st % a.every == 0]}
            old = {int(s) for s in st[seed(judged["duration"].to_numpy(np.float64), k)]}
            new = {int(s) for s in st[judged["outlier"].to_numpy()]}
            print(f"{name:22s} stddev={k:g}  seed {score(old, truth)}  robust {score(new, truth)}")
    d = 0.02 * np.random.default_rng(0).lognormal(0.0, 0.5, 1_000_000)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        judge(d, np.arange(len(d)))
        times.append(time.perf_counter() - t)
    print(f"judge on 1M steps: median {np.median(times):.3f} s of 5")


if __name__ == "__main__":
    main()
