"""Kernel breakdown of a large trace: seconds, and peak Python memory against decoding
the whole document (``json.loads``) as a reader that keeps it would.

The trace is the H200 ``stall`` window's (tests/data/h200) repeated ``COPIES`` times, one
after another in time, with fresh correlation ids: 1,843 events a copy.
Run: ``PYTHONPATH=src python benchmarks/kernels.py``.
"""

from __future__ import annotations

import gzip
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from stepscope.read import breakdown, load_trace

TRACE = Path(__file__).resolve().parent.parent / (
    "tests/data/h200/stall/profiling/rank-0/detailed-100-102.pt.trace.json.gz"
)
COPIES = 100
REPEATS = 5


def big_trace(copies: int) -> bytes:
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    events = doc["traceEvents"]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events if isinstance(e.get("ts"), float))
    out = []
    for i in range(copies):
        shift = i * span / 1000  # later copies after the earlier ones (1 ms apart at least)
        for e in events:
            e = dict(e, ts=e["ts"] + shift) if isinstance(e.get("ts"), float) else dict(e)
            if "args" in e and "correlation" in e["args"]:
                e["args"] = dict(e["args"], correlation=e["args"]["correlation"] + i * 100_000)
            out.append(e)
    return gzip.compress(json.dumps(dict(doc, traceEvents=out)).encode())


def peak(fn: Callable[[], object]) -> float:
    """Peak MB of Python allocations while ``fn()`` runs."""
    tracemalloc.start()
    fn()
    top = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return top / 1e6


def main() -> None:
    data = big_trace(COPIES)
    text = gzip.decompress(data)
    print(
        f"trace: {COPIES * 1843} events, {len(data) / 1e6:.1f} MB gzipped, {len(text) / 1e6:.0f} MB"
    )
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        result = breakdown(load_trace(data))
        times.append(time.perf_counter() - t0)
    print(f"load_trace + breakdown: median {statistics.median(times):.2f} s of {REPEATS}")
    print(f"  kernels: {getattr(result, 'kernels', None)}")
    print(f"peak MB, load_trace + breakdown: {peak(lambda: breakdown(load_trace(data))):.0f}")
    whole = peak(lambda: json.loads(gzip.decompress(data)))
    print(f"peak MB, json.loads of the whole trace: {whole:.0f}")


if __name__ == "__main__":
    main()
