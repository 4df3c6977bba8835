"""System sampler benchmark: cost of one sample, and bytes per stored value.

(a) this machine: the real sampler loop (psutil, NVML if present) at 100 ms for
    ``--seconds`` (60), writing a job folder in a temporary directory.
(b) a synthetic node, 32 cores and 8 GPUs, ``--hours`` (1) at 100 ms: noisy values
    shaped like a training node (CPU time counted in 10 ms ticks, integer NVML
    readings, page-sized memory, bursty disk, steady network) stored through the
    sampler's own batch building (``rows_to_batches``) and ``SegmentWriter``,
    flushed every 2 s of data and rolled every 300 s, as the sampler does.
(c) the probe alone with 8 fake GPUs (tests/fakes/pynvml.py): the Python cost of
    the GPU columns, without a driver's latency.

(a) also times the scans of ``others/<node>/`` (every 3 s: every process of the host
read, the busiest outside the job kept), printed below the table.

"sample µs" is the median time of one sample (counters read into a row); "flush ms"
the median time of one flush (rows -> Arrow -> Parquet, the segment rewritten whole).
"bytes/value" is the Parquet bytes on disk divided by rows x metric columns (all
but ``time``, ``node`` and ``interval_ms``, whose bytes are in the numerator).
The predecessor's JSON lines cost about 185 bytes per value; the target is 18.5.

    .venv/bin/python benchmarks/sampler.py [--seconds 60] [--hours 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq

from stepscope.sampler._nvml import Gpus, Row
from stepscope.sampler._probe import SystemProbe, rows_to_batches
from stepscope.sampler.main import Sampler
from stepscope.store import SegmentWriter, open_store

ROOT = Path(__file__).resolve().parents[1]
NODE = "bench"
META_COLUMNS = 3  # time, node, interval_ms
GIB = 2**30


def stored_bytes(folder: Path) -> tuple[int, int]:
    files = list(folder.glob("part-*.parquet"))
    return sum(f.stat().st_size for f in files), len(files)


def stored_shape(folder: Path) -> tuple[int, int]:
    """(rows, metric columns) of the stored segments."""
    metas = [pq.read_metadata(f) for f in folder.glob("part-*.parquet")]
    return sum(m.num_rows for m in metas), max(m.num_columns for m in metas) - META_COLUMNS


def real_run(seconds: float) -> dict[str, Any]:
    """(a): the sampler's own loop on this machine, each sample() timed."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = SystemProbe(os.getpid(), Gpus.open())
        sampler = Sampler(open_store(tmp), NODE, interval_ms=100, probe=probe)
        costs = timed(sampler, "sample")
        flushes = timed(sampler, "flush")
        scans = timed_scan(sampler)
        timer = threading.Timer(seconds, sampler.stop)
        timer.start()
        sampler.run()
        folder = Path(tmp) / "system" / NODE
        size, files = stored_bytes(folder)
        rows, values = stored_shape(folder)
    return {"rows": rows, "values": values, "sample_us": _median_us(costs),
            "flush_ms": _median_us(flushes) / 1e3, "bytes": size, "files": files,
            "scan_ms": _median_us(scans) / 1e3, "scans": len(scans)}  # fmt: skip


def timed_scan(sampler: Sampler) -> list[float]:
    """Record the duration of each scan of the other processes."""
    costs: list[float] = []
    scanner = sampler.others.scanner
    original = scanner.scan

    def wrapper(mono: float) -> list[Row]:
        t = time.perf_counter()
        rows = original(mono)
        costs.append(time.perf_counter() - t)
        return rows

    scanner.scan = wrapper  # type: ignore[method-assign]
    return costs


def timed(obj: Any, method: str) -> list[float]:
    """Wrap ``obj.method`` to record the duration of each call; returns the record."""
    costs: list[float] = []
    original = getattr(obj, method)

    def wrapper(*args: Any, **kwargs: Any) -> None:  # flush(final=True) at the end
        t = time.perf_counter()
        original(*args, **kwargs)
        costs.append(time.perf_counter() - t)

    setattr(obj, method, wrapper)
    return costs


def _median_us(costs: list[float]) -> float:
    return statistics.median(costs) * 1e6


class SyntheticNode:
    """Rows of a 32-core, 8-GPU node running data-parallel training, 100 ms apart."""

    def __init__(self, cores: int = 32, gpus: int = 8, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.cores, self.gpus = cores, gpus
        # 8 ranks busy, 12 data-loader workers half busy, the rest nearly idle
        self.busy = [0.97] * 8 + [0.55] * 12 + [0.03] * (cores - 20)
        self.mem_total, self.mem_pages = 1024 * GIB, (180 * GIB) // 4096
        self.rss_pages, self.temp = (150 * GIB) // 4096, [62.0] * gpus

    def rows(self, count: int, t0: float = 1.76e9) -> Iterator[Row]:
        for k in range(count):
            dt = 0.1 + abs(self.rng.gauss(0.0003, 0.0002))
            yield self.row(t0 + k * 0.1 + dt - 0.1, dt, k)

    def row(self, t: float, dt: float, k: int) -> Row:
        rng = self.rng
        ticks = [sum(rng.random() < p for _ in range(10)) for p in self.busy]
        per_core = [min(100.0, n / dt) for n in ticks]  # n ticks of 10 ms in dt seconds
        row: Row = {"time": t, "node": NODE, "interval_ms": 100}
        row["cpu"] = sum(per_core) / self.cores
        row["cpu_iowait"] = 100.0 * rng.choice([0, 0, 0, 0, 1]) * 0.01 / dt / self.cores
        row.update((f"cpu{i}", v) for i, v in enumerate(per_core))
        self.mem_pages += rng.randint(-300, 320)
        row["mem_used"] = float(self.mem_pages * 4096)
        row["mem_percent"] = 100.0 * self.mem_pages * 4096 / self.mem_total
        checkpoint = (k % 6000) < 100  # 10 s of checkpoint writes every 10 min
        row["disk_read_bps"] = rng.randint(0, 12800) * 4096 / dt
        row["disk_write_bps"] = (rng.randint(400_000, 500_000) if checkpoint else 0) * 4096 / dt
        row["net_rx_bps"] = rng.gauss(2.4e8, 3e7) // 1 / dt
        row["net_tx_bps"] = rng.gauss(2.4e8, 3e7) // 1 / dt
        row["proc_cpu"] = sum(per_core[:20])
        self.rss_pages += rng.randint(-50, 60)
        row["proc_rss"] = float(self.rss_pages * 4096)
        for i in range(self.gpus):
            row.update(self.gpu(i, k))
        return row

    def gpu(self, i: int, k: int) -> Row:
        rng, p = self.rng, f"gpu{i}_"
        stall = rng.random() < 0.04
        util = 0 if stall else min(100, max(0, round(rng.gauss(94, 3))))
        used = (31742 + rng.choice([0, 0, 0, 2, 4, 8])) * 2**20
        self.temp[i] = min(80.0, max(50.0, self.temp[i] + rng.choice([-1, 0, 0, 0, 0, 1])))
        power_mw = rng.randint(60_000, 70_000) if stall else round(rng.gauss(360_000, 25_000))
        return {p + "util": float(util), p + "mem_used": float(used),
                p + "mem_total": 40.0 * GIB, p + "mem_util": 100.0 * used / (40 * GIB),
                p + "power_w": power_mw / 1000, p + "temp_c": self.temp[i]}  # fmt: skip


def synthetic_run(hours: float) -> dict[str, Any]:
    """(b): an hour of a big node through rows_to_batches and SegmentWriter."""
    count = int(hours * 36_000)
    with tempfile.TemporaryDirectory() as tmp:
        clock = [0.0]
        writer = SegmentWriter(open_store(tmp), f"system/{NODE}", clock=lambda: clock[0])
        node, pending, costs = SyntheticNode(), [], []
        values = 0
        for k, row in enumerate(node.rows(count)):
            values = len(row) - META_COLUMNS
            pending.append(row)
            clock[0] = k * 0.1
            if len(pending) == 20 or k == count - 1:  # a flush every 2 s
                t = time.perf_counter()
                for batch in rows_to_batches(pending):
                    writer.append(batch)
                writer.flush()
                costs.append(time.perf_counter() - t)
                pending = []
        size, files = stored_bytes(Path(tmp) / "system" / NODE)
        assert stored_shape(Path(tmp) / "system" / NODE) == (count, values)
    return {"rows": count, "values": values, "flush_ms": _median_us(costs) / 1e3,
            "bytes": size, "files": files}  # fmt: skip


def fake_gpu_probe(samples: int = 300) -> dict[str, Any]:
    """(c): the probe with 8 fake GPUs (Python cost of the GPU columns only)."""
    os.environ["STEPSCOPE_FAKE_NVML_GPUS"] = "8"
    spec = importlib.util.spec_from_file_location("pynvml", ROOT / "tests/fakes/pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pynvml"] = module
    spec.loader.exec_module(module)
    probe, costs = SystemProbe(os.getpid(), Gpus.open()), []
    for _ in range(samples):
        t = time.perf_counter()
        row = probe.read(time.monotonic())
        costs.append(time.perf_counter() - t)
        time.sleep(0.002)
    return {"rows": samples, "values": len(row), "sample_us": _median_us(costs)}


def table(results: dict[str, dict[str, Any]]) -> str:
    head = f"{'scenario':<34} {'rows':>7} {'values':>6} {'sample µs':>9} {'flush ms':>8}"
    head += f" {'bytes/value':>11} {'files':>5}"
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        per_value = r["bytes"] / (r["rows"] * r["values"]) if "bytes" in r else math.nan
        lines.append(
            f"{name:<34} {r['rows']:>7} {r['values']:>6} {_fmt(r.get('sample_us')):>9} "
            f"{_fmt(r.get('flush_ms'), 1):>8} {_fmt(per_value, 2):>11} "
            f"{r.get('files', '-'):>5}"
        )
    return "\n".join(lines)


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="(a): real sampling time")
    p.add_argument("--hours", type=float, default=1.0, help="(b): synthetic data length")
    a = p.parse_args()
    results = {
        f"(a) this machine, {a.seconds:g} s @100 ms": real_run(a.seconds),
        f"(b) synthetic 32 cores+8 GPUs, {a.hours:g} h": synthetic_run(a.hours),
        "(c) probe with 8 fake GPUs": fake_gpu_probe(),
    }
    print(table(results))
    real = next(iter(results.values()))
    print(f"others/ scans: {real['scans']}, median {real['scan_ms']:.2f} ms "
          f"({len(psutil.pids())} processes on this host)")  # fmt: skip


if __name__ == "__main__":
    main()
