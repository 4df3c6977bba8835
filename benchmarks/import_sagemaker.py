"""Import speed: a 24-hour, 32-core, 8-GPU node's system metrics (about 1.3 GB of JSON)
and the framework timelines of its ranks.

    python benchmarks/import_sagemaker.py [--hours 24] [--ranks 2] [--runs 3] [--keep]
    python benchmarks/import_sagemaker.py --source /tmp/sm-import-.../src --runs 3

Writes the predecessor's layout streaming into a temporary folder under /tmp (one
minute file, or one rank's hour of timeline, at a time, lines formatted from
templates: no job is held in memory), runs ``stepscope import sagemaker`` on it in
a child process (the import includes the rules' evaluation), and prints the wall
time, the child's CPU time and its peak RSS; the source is deleted afterwards
unless ``--keep``. Targets (issues 22, 30): at most 60 s of CPU and 500 MB at peak.
Each rank's timeline: a step every 0.3 s (a fetch, the step, a forward, a backward
and a data-loader worker event per batch), one file per hour as the predecessor
rotates them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

START = 1_763_850_000.0
CORES, GPUS, INTERVAL = 32, 8, 0.5


def _templates() -> list[str]:
    """One line per metric of a sample, as the predecessor writes it (docs/sagemaker.md);
    each a %-template of its value and timestamp."""
    tail = '"Value": %.2f, "Timestamp": %.6f}'
    keys = [
        ("cpu", f"cpu{c}", d) for c in range(CORES) for d in ("CPUUtilization", "I/OWaitPercentage")
    ]
    keys += [
        ("gpu", f"gpu{g}", d)
        for g in range(GPUS)
        for d in ("GPUUtilization", "GPUMemoryUtilization")
    ]
    keys += [("memory", "MemoryUsedPercent", "")]
    keys += [
        ("i/o", n, "")
        for n in ("IOPS", "ReadThroughputInBytesPerSecond", "WriteThroughputInBytesPerSecond")
    ]
    keys += [("network", n, d) for n in ("ReceiveBytesPerSecond", "TransmitBytesPerSecond")
             for d in ("Algorithm", "Platform")]  # fmt: skip
    return [f'{{"Type": "{t}", "Name": "{n}", "Dimension": "{d}", {tail}' for t, n, d in keys]


def generate(root: Path, hours: float) -> int:
    """Write the minute files; returns the bytes written."""
    rng = np.random.default_rng(0)
    lines = _templates()
    per_minute = int(60 / INTERVAL)
    total = 0
    for m in range(int(hours * 60)):
        t0 = START + 60 * m
        hour = time.strftime("%Y%m%d%H", time.gmtime(t0))
        folder = root / "profiler-output/system/incremental" / hour
        folder.mkdir(parents=True, exist_ok=True)
        values = rng.uniform(0, 100, (per_minute, len(lines)))
        stamps = t0 + np.arange(per_minute) * INTERVAL + 0.009
        body = "".join(
            line % (values[i, j], stamps[i] + 0.0001 * (j // 8)) + "\n"
            for i in range(per_minute)
            for j, line in enumerate(lines)
        ).encode()
        (folder / f"{int(t0)}.algo-1.json").write_bytes(body)
        total += len(body)
    return total


STEP_S = 0.3


def generate_timelines(root: Path, hours: float, ranks: int) -> int:
    """One timeline file per rank and hour; returns the bytes written."""
    total, step = 0, {r: 0 for r in range(ranks)}
    per_hour = int(3600 / STEP_S)
    for h in range(int(np.ceil(hours))):
        t0 = START + 3600 * h
        n = min(per_hour, int((hours * 3600 - 3600 * h) / STEP_S))
        hour = time.strftime("%Y%m%d%H", time.gmtime(t0))
        folder = root / "profiler-output/framework/pevents" / hour
        folder.mkdir(parents=True, exist_ok=True)
        for r in range(ranks):
            head = [
                '{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "default", '
                f'"start_time_since_epoch_in_micros": {t0 * 1e6:.0f}}}}}',
                '{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": '
                '"Step:ModeKeys.TRAIN"}}',
            ]
            body = [
                f'{{"name": "DataLoaderIter::GetNext", "ph": "X", "ts": {us:.0f}, "dur": 30000, '
                f'"pid": 0, "tid": 1, "args": {{}}}},\n'
                f'{{"name": "DataLoaderWorker", "ph": "X", "ts": {us:.0f}, "dur": 30000, '
                f'"pid": 0, "tid": {10 + k % 2}, "args": {{"worker_id": {k % 2}, '
                f'"pid": {5000 + k % 2}}}}},\n'
                f'{{"name": "Step:ModeKeys.TRAIN", "ph": "X", "ts": {us + 30000:.0f}, '
                f'"dur": 250000, "pid": 1, "tid": 1, "args": {{"step_num": "{step[r] + k}"}}}},\n'
                f'{{"name": "Forward", "ph": "X", "ts": {us + 30000:.0f}, "dur": 100000, '
                f'"pid": 0, "tid": 1, "args": {{}}}},\n'
                f'{{"name": "Backward", "ph": "X", "ts": {us + 140000:.0f}, "dur": 130000, '
                f'"pid": 0, "tid": 1, "args": {{}}}}'
                for k, us in enumerate(np.arange(n) * STEP_S * 1e6)
            ]
            step[r] += n
            end_us = int((t0 + n * STEP_S) * 1e6)
            data = ("[\n" + ",\n".join(head + body) + "\n]\n").encode()
            (folder / f"{end_us}_{r}-algo-1_model_timeline.json").write_bytes(data)
            total += len(data)
    return total


def run_import(src: Path, job: Path) -> tuple[float, float, float, str]:
    """``stepscope import sagemaker SRC JOB`` in a child process, as a user runs it (the
    import, then the rules' evaluation): wall s, CPU s and peak RSS MB, its output."""
    code = "import sys; from stepscope.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", code, "import", "sagemaker", str(src), str(job)]
    t = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=os.environ)
    out = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: no second wait
    if child.returncode:
        raise SystemExit(f"the import failed ({child.returncode}):\n{out}")
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - t, cpu, usage.ru_maxrss / 1024, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--ranks", type=int, default=2, help="ranks with a timeline (0: none)")
    ap.add_argument("--keep", action="store_true", help="keep the generated source")
    ap.add_argument("--source", type=Path, help="import this source (one kept) instead")
    ap.add_argument("--runs", type=int, default=1, help="imports of the same source")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sm-import-", dir="/tmp"))
    try:
        src = args.source or tmp / "src"
        if args.source is None:
            t = time.perf_counter()
            size = generate(src, args.hours)
            size += generate_timelines(src, args.hours, args.ranks)
            print(f"generated {size / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s at {src}")
        for run in range(args.runs):
            wall, cpu, rss, out = run_import(src, tmp / f"job-{run}")
            print(out if run == 0 else "", end="")
            print(f"import {run + 1}: wall {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {rss:.0f} MB")
            shutil.rmtree(tmp / f"job-{run}", ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
