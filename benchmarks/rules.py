"""Benchmark: every profiler rule over a large synthetic job, and one live scan of it.

The job: 16 nodes, each with 32 cores and 8 GPUs sampled every 500 ms for 24 h
(2.76 M wide samples), and 128 ranks (one per GPU) with 5 s steps (2.2 M steps),
cut into 300 s segments as the writers do. It is generated once through the
store's SegmentWriter into ``$TMPDIR/stepscope-bench-rules`` and reused.

    python benchmarks/rules.py [--nodes 16] [--hours 24] [--exclude Straggler] [--live-only]

Prints the offline evaluation time and peak memory (in a fresh process), and
the median time of a live scan that reads the last minute of every stream:
with an empty buffer, in the steady state of a long job, and in the scan that
commits a chunk (one in every ``chunk_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from stepscope.jobfolder import STEPS_SCHEMA
from stepscope.store import SegmentWriter, Store, open_store

T0 = 1_760_000_000.0
SEGMENT_S = 300.0
GPUS, CORES, STEP_S = 8, 32, 5.0


def append(store: Store, prefix: str, frame: pd.DataFrame, schema: pa.Schema | None = None) -> None:
    """One 300 s segment per call, as a live writer would cut it."""
    first = float(frame["time" if "time" in frame else "start"].iloc[0])
    writer = SegmentWriter(store, prefix, segment_rows=len(frame), clock=lambda: first)
    writer.append(pa.RecordBatch.from_pandas(frame, schema=schema, preserve_index=False))
    writer.flush()


def system_chunk(node: str, t: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    n = len(t)
    cols: dict[str, object] = {"time": t, "node": node, "interval_ms": np.int32(500)}
    cores = rng.integers(20, 100, (CORES, n)).astype(np.float32)
    cols["cpu"], cols["cpu_iowait"] = cores.mean(axis=0).round(1), np.float32(0.5)
    cols.update({f"cpu{i}": cores[i] for i in range(CORES)})
    cols.update(mem_used=np.full(n, 2e11), mem_percent=np.float32(40), disk_read_bps=1e7,
                disk_write_bps=1e6, net_rx_bps=1e8, net_tx_bps=1e8, proc_cpu=np.float32(900),
                proc_rss=np.full(n, 8e10))  # fmt: skip
    for g in range(GPUS):
        util = np.clip(rng.normal(90, 4, n).round(), 0, 100).astype(np.float32)
        util[rng.random(n) < 0.05] = 0
        cols.update({f"gpu{g}_util": util, f"gpu{g}_mem_used": np.full(n, 3.3e10),
                     f"gpu{g}_mem_total": np.full(n, 4.29e10),
                     f"gpu{g}_mem_util": np.float32(77.5), f"gpu{g}_power_w": 60 + 3.5 * util,
                     f"gpu{g}_temp_c": (61 + util / 20).round()})  # fmt: skip
    return pd.DataFrame(cols)


def steps_chunk(rank: int, node: str, first: int, n: int, rng: np.random.Generator) -> pd.DataFrame:
    d = STEP_S + rng.normal(0, 0.05, n)
    start = T0 + 10 + STEP_S * np.arange(first, first + n)
    f32 = np.float32
    return pd.DataFrame({
        "rank": np.int32(rank), "local_rank": np.int32(rank % GPUS), "node": node,
        "pid": np.int32(1000 + rank), "phase": "train", "step": np.arange(first, first + n),
        "start": start, "end": start + d, "duration": d.astype(f32),
        "data_wait": f32(0.05), "forward": (d * 0.3).astype(f32),
        "backward": (d * 0.6).astype(f32), "optimizer": f32(0.2), "other": f32(0.0),
        "profiled": False, "gpu_forward": f32(np.nan), "gpu_backward": f32(np.nan),
        "gpu_optimizer": f32(np.nan),
    })  # fmt: skip


def generate(path: Path, nodes: int, hours: float) -> None:
    store = open_store(str(path))
    end = T0 + hours * 3600
    rng = np.random.default_rng(0)
    per_seg, steps_per_seg = int(SEGMENT_S / 0.5), int(SEGMENT_S / STEP_S)
    for k in range(nodes):
        node = f"node-{k:02d}"
        info = {
            "node": node,
            "cpu_count": CORES,
            "gpus": [{"index": g} for g in range(GPUS)],
            "interval_ms": 500,
        }
        store.write_json(f"nodes/{node}.json", info)
        for s in np.arange(T0, end, SEGMENT_S):
            append(store, f"system/{node}", system_chunk(node, s + 0.5 * np.arange(per_seg), rng))
        for g in range(GPUS):
            rank = k * GPUS + g
            for first in range(0, int(hours * 3600 / STEP_S) - steps_per_seg, steps_per_seg):
                chunk = steps_chunk(rank, node, first, steps_per_seg, rng)
                append(store, f"steps/rank-{rank}", chunk, STEPS_SCHEMA)
        print(f"  generated {node}", file=sys.stderr, flush=True)
    meta = {"format_version": 1, "name": "bench", "start_time": T0, "end_time": end,
            "status": "Completed", "config": {"rules": []}, "cwd": str(path)}  # fmt: skip
    store.write_json("job.json", meta)


def offline(path: str, exclude: list[str]) -> None:
    """Child process: evaluate every profiler rule (less ``exclude``), print time and
    peak memory."""
    import stepscope
    from stepscope.rules import build_rules, evaluate_rules

    job = stepscope.open(path)
    rules = [s.rule for s in build_rules([]) if s.rule.rule_name not in exclude]
    began = time.perf_counter()
    results = evaluate_rules(job, rules)
    took = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    statuses = {r.rule: r.status.value for r in results}
    print(json.dumps({"seconds": took, "peak_mb": peak, "statuses": statuses}))


def profiler_specs(exclude: list[str]) -> list[Any]:
    from stepscope.rules import build_rules

    return [s for s in build_rules([]) if s.rule.rule_name not in exclude]


def live_scan(path: str, exclude: list[str], repeats: int = 5) -> list[float]:
    """Median cost of a scan that reads the last minute of every stream."""
    import stepscope
    from stepscope.rules.runner import Runner

    times = []
    for _ in range(repeats):
        job = stepscope.open(path)
        end = float(job.meta["end_time"])
        runner = Runner(job, profiler_specs(exclude), clock=lambda e=end: e)
        for reader in runner.readers.values():
            for prefix in [f"{reader.kind}/{n}" for n in job.store.listdir(reader.kind)]:
                reader.last_key[prefix] = job.store.list(prefix, ".parquet")[-1]
                reader.watermark[prefix] = end - 60
        began = time.perf_counter()
        runner.scan()
        times.append(time.perf_counter() - began)
    return times


def steady_scan(
    path: str, exclude: list[str], repeats: int = 5, fresh_s: float = 60.0, commit: bool = False
) -> tuple[list[float], float]:
    """Median cost of a scan in a long job's steady state: the live buffer already
    holds everything since the start of the previous chunk (what a runner that has
    scanned all along keeps), and the scan reads the last minute and judges it all.
    With ``commit``, the buffer also holds the chunk before, which the scan commits
    (judges once more and drops), as one scan in every chunk does."""
    import math

    import stepscope
    from stepscope.rules._live import TIME_COLUMNS
    from stepscope.rules.runner import Runner

    times, held = [], 0.0
    for _ in range(repeats):
        job = stepscope.open(path)
        end, origin = float(job.meta["end_time"]), float(job.meta["start_time"])
        runner = Runner(job, profiler_specs(exclude), clock=lambda e=end: e)
        chunk = runner.state.chunk_s
        cut = origin + (math.floor((end - origin) / chunk) - 1 - commit) * chunk
        held = end - cut
        for kind, reader in runner.readers.items():
            for prefix in [f"{kind}/{n}" for n in job.store.listdir(kind)]:
                keys = job.store.list(prefix, ".parquet")
                reader.last_key[prefix] = keys[-math.ceil(held / SEGMENT_S) - 2]
                reader.watermark[prefix] = cut
            frame = reader.read_new()
            if frame is not None:  # what the buffer holds: newer than the previous chunk
                old = frame[TIME_COLUMNS[kind]] <= end - fresh_s
                if kind == "steps":
                    old &= frame["start"] >= cut
                runner.state.add(kind, frame[old])
            reader.watermark = dict.fromkeys(reader.watermark, end - fresh_s)
        began = time.perf_counter()
        runner.scan()
        times.append(time.perf_counter() - began)
    return times, held


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--hours", type=float, default=24)
    p.add_argument("--exclude", nargs="*", default=[], help="profiler rules left out")
    p.add_argument("--live-only", action="store_true", help="skip the offline evaluation")
    p.add_argument("--offline-child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.offline_child:
        offline(a.offline_child, a.exclude)
        return
    path = Path(tempfile.gettempdir()) / f"stepscope-bench-rules-{a.nodes}x{a.hours:g}h"
    if not (path / "job.json").exists():
        began = time.perf_counter()
        generate(path, a.nodes, a.hours)
        print(f"generated {path} in {time.perf_counter() - began:.0f} s")
    if not a.live_only:
        child = [sys.executable, __file__, "--offline-child", str(path), "--exclude", *a.exclude]
        done = subprocess.run(child, capture_output=True, text=True, check=True)
        out = json.loads(done.stdout)
        print(f"offline, profiler rules: {out['seconds']:.1f} s, peak RSS {out['peak_mb']:.0f} MB")
        print(f"  statuses: {out['statuses']}")
    scans = live_scan(str(path), a.exclude)
    print(f"live scan (last minute of every stream): median {statistics.median(scans):.2f} s "
          f"(min {min(scans):.2f}, max {max(scans):.2f}, n={len(scans)})")  # fmt: skip
    for commit in (False, True):
        steady, held = steady_scan(str(path), a.exclude, commit=commit)
        what = "and commits the oldest chunk" if commit else "last minute new"
        print(
            f"live scan in steady state (buffer of {held:.0f} s, {what}): median "
            f"{statistics.median(steady):.2f} s (min {min(steady):.2f}, max {max(steady):.2f})"
        )
    os.sync()


if __name__ == "__main__":
    main()
