"""Import speed: a 24-hour, 32-core, 8-GPU node's system metrics (about 1.3 GB of JSON).

    python benchmarks/import_sagemaker.py [--hours 24] [--keep]

Writes the predecessor's layout streaming into a temporary folder under /tmp (one
minute file at a time, lines formatted from templates: no job is held in memory),
runs ``stepscope import sagemaker`` on it in a child process, and prints the wall
time, the child's CPU time and its peak RSS; the source is deleted afterwards
unless ``--keep``. Target (issue 22): at most 60 s with bounded memory.
"""

from __future__ import annotations

import argparse
import os
import resource
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sm-import-", dir="/tmp"))
    try:
        t = time.perf_counter()
        size = generate(tmp / "src", args.hours)
        print(f"generated {size / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s")
        code = ("import sys; from stepscope.importers.sagemaker import import_job; "
                "print(import_job(sys.argv[1], sys.argv[2]).text())")  # fmt: skip
        t = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        argv = [sys.executable, "-c", code, str(tmp / "src"), str(tmp / "job")]
        done = subprocess.run(argv, check=True, capture_output=True, text=True, env=os.environ)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(done.stdout)
        rss = after.ru_maxrss / 1024
        print(f"import: wall {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {rss:.0f} MB, "
              f"{size / 1e6 / wall:.0f} MB/s")  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
