"""What Prometheus metrics cost the live rule runner: adding a scan's step rows, and
rendering ``/metrics`` (a scrape).

    python benchmarks/metrics.py [--repeats 21]

Synthetic step rows (1 rank, and 64 ranks on one node), fed to
:class:`stepscope.metrics.JobMetrics` as the runner's scans feed it; then a render
of 64 ranks' series and 20 rules. Prints the median and the 10th-90th percentile of
each, in milliseconds of CPU time (``time.process_time``: less moved by other load).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from stepscope.metrics import JobMetrics, render


def steps(n: int, ranks: int, seed: int = 0) -> pd.DataFrame:
    d = np.random.default_rng(seed).uniform(0.05, 0.4, n).astype("float32")
    shares = {"data_wait": 0.1, "forward": 0.3, "backward": 0.3, "optimizer": 0.1, "other": 0.2}
    return pd.DataFrame({"rank": np.arange(n) % ranks, "node": "node-a", "phase": "train",
                         "end": np.cumsum(d), "duration": d,
                         **{p: d * f for p, f in shares.items()}})  # fmt: skip


def timed(fn: Callable[[], object], repeats: int) -> str:
    ms = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        ms.append((time.process_time() - t) * 1e3)
    q = statistics.quantiles(ms, n=10)
    return f"median {statistics.median(ms):.2f} ms (p10-p90 {q[0]:.2f}-{q[-1]:.2f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=21, help="runs of each (default 21)")
    a = p.parse_args()
    m = JobMetrics("bench")
    for n, ranks in ((40, 1), (1280, 64), (12800, 64)):
        frame = steps(n, ranks)
        cost = timed(lambda f=frame: m.add_rows("steps", f), a.repeats)
        print(f"add_rows: {n} step rows of {ranks} rank(s): {cost}")
    for i in range(20):
        m.set_rule(f"Rule{i}", "NoIssuesFound", [])
    size = len(render([m]))
    print(f"render: 64 ranks, 20 rules ({size} bytes): {timed(lambda: render([m]), a.repeats)}")


if __name__ == "__main__":
    main()
