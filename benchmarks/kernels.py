"""Kernel breakdown of a large trace: seconds, and peak Python memory against decoding
the whole document (``json.loads``) as a reader that keeps it would.

The trace is the H200 ``stall`` window's (tests/data/h200) repeated ``COPIES`` times, one
after another in time, with fresh correlation ids: 1,843 events a copy.
Then ``show`` of a job with ``WINDOWS`` detailed windows (copies of the ``stall``
job's): the first ``show`` parses every trace and keeps each breakdown beside it
(``<trace>.kernels.json``), the next ones read those; ``--no-cache`` times a ``show``
with the derived files deleted before each run (what every ``show`` cost before).
Run: ``PYTHONPATH=src python benchmarks/kernels.py``.
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import stepscope
from stepscope.analysis.summary import summarize
from stepscope.read import breakdown, load_trace

TRACE = Path(__file__).resolve().parent.parent / (
    "tests/data/h200/stall/profiling/rank-0/detailed-100-102.pt.trace.json.gz"
)
COPIES = 100
REPEATS = 5
WINDOWS = 40


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
    show_many_windows()
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


def many_windows(root: Path, windows: int) -> Path:
    """The ``stall`` job with its one detailed window copied to ``windows`` of them."""
    job = root / "stall"
    shutil.copytree(TRACE.parents[2], job)
    folder = job / "profiling/rank-0"
    record = json.loads((folder / "detailed-100-102.window.json").read_text())
    for i in range(1, windows):
        a, b = 100 + 3 * i, 102 + 3 * i
        base = f"detailed-{a}-{b}"
        shutil.copy(TRACE, folder / f"{base}.pt.trace.json.gz")
        path = f"profiling/rank-0/{base}.pt.trace.json.gz"
        copy = dict(record, start_step=a, end_step=b, path=path, files=[path])
        (folder / f"{base}.window.json").write_text(json.dumps(copy))
    return job


def show_seconds(job: Path, cached: bool) -> float:
    if not cached:
        for f in job.glob("profiling/rank-0/*.kernels.json"):
            f.unlink()
    t0 = time.perf_counter()
    summary = summarize(stepscope.open(str(job)))
    seconds = time.perf_counter() - t0
    assert len(summary["profiling"]) == WINDOWS
    return seconds


def show_many_windows() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        job = many_windows(Path(tmp), WINDOWS)
        show_seconds(job, cached=True)  # warms imports and makes the derived files
        pairs = [(show_seconds(job, False), show_seconds(job, True)) for _ in range(REPEATS)]
    cold = statistics.median(p[0] for p in pairs)
    warm = statistics.median(p[1] for p in pairs)
    print(f"show of a job with {WINDOWS} detailed windows, median of {REPEATS} pairs:")
    print(f"  every trace parsed (no derived file): {cold:.2f} s")
    print(f"  breakdowns read from <trace>.kernels.json: {warm:.2f} s")


if __name__ == "__main__":
    main()
