"""Dashboard load benchmark: 20 viewers of a 24-hour single-node job at 500 ms.

A synthetic job (32 cores, 8 GPUs, 500 ms samples, 24 h: 172,800 samples, 216,000
steps) is written through the store's SegmentWriter, ending now. ``stepscope ui``
serves it in its own process. Two phases of ``--seconds`` each:

* finished: the job is Completed; each viewer polls what the job page asks for
  once a second (detail, rules, whole-job system and steps charts) plus one
  random 10-minute window (a rule finding's jump, never cached).
* running: the job is Running (fresh heartbeat) and a writer appends a sample
  every 500 ms, flushing every 2 s like the sampler, so every flush changes the
  data; the same viewers, plus one Chromium page whose redraws give the latency
  from a sample being written (its flush done) to the chart showing it.

Latencies are per data request (system, steps), measured by the client; the
server's CPU time per second of each phase (from /proc) is less sensitive to
the other processes of a shared machine.

    .venv/bin/python benchmarks/dashboard.py [--viewers 20] [--seconds 30]
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stepscope.store import SegmentWriter, Store, encode_parquet, open_store, segment_name
from stepscope.testing import SyntheticJob, write_synthetic_job

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]  # fmt: skip
JOB = "day"


class Viewer(threading.Thread):
    """One browser's worth of polling, timing each data request."""

    def __init__(
        self, port: int, spec: SyntheticJob, stop: threading.Event, jump_every: int
    ) -> None:
        super().__init__(daemon=True)
        self.port, self.spec, self.stop_flag, self.jump_every = port, spec, stop, jump_every
        self.times: dict[str, list[float]] = {"system": [], "steps": [], "other": []}
        self.rng = random.Random(id(self))

    def get(self, conn: http.client.HTTPConnection, path: str, kind: str) -> None:
        t = time.perf_counter()
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        self.times[kind].append(time.perf_counter() - t)
        assert resp.status == 200, (path, resp.status, body[:200])

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        base = f"/api/jobs/{JOB}"
        cycle = self.rng.randrange(self.jump_every)
        while not self.stop_flag.is_set():
            began, cycle = time.perf_counter(), cycle + 1
            self.get(conn, base, "other")
            self.get(conn, f"{base}/rules", "other")
            self.get(conn, f"{base}/system?node=node-a&buckets=1000", "system")
            self.get(conn, f"{base}/steps?rank=0&phase=train&buckets=1000", "steps")
            if cycle % self.jump_every:
                time.sleep(max(0.0, 1.0 - (time.perf_counter() - began)))
                continue
            start = self.spec.loop_start + self.rng.uniform(0, self.spec.hours * 3600 - 600)
            window = f"start={start:.3f}&end={start + 600:.3f}&buckets=1000"
            self.get(conn, f"{base}/system?node=node-a&{window}", "system")
            self.get(conn, f"{base}/steps?rank=0&{window}", "steps")
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - began)))
        conn.close()


def load(
    port: int, spec: SyntheticJob, viewers: int, seconds: float, jump_every: int
) -> dict[str, list[float]]:
    stop = threading.Event()
    threads = [Viewer(port, spec, stop, jump_every) for _ in range(viewers)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    out: dict[str, list[float]] = {"system": [], "steps": [], "other": []}
    for t in threads:
        for k, v in t.times.items():
            out[k] += v
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(label: str, times: dict[str, list[float]], cpu_per_s: float) -> None:
    data = sorted(times["system"] + times["steps"])
    q = np.quantile(np.array(data) * 1e3, [0.5, 0.95, 0.99])
    print(f"{label:9s} data requests {len(data):6,d} | p50 {q[0]:6.1f} ms | p95 {q[1]:6.1f} ms"
          f" | p99 {q[2]:6.1f} ms | max {1e3 * data[-1]:6.0f} ms"
          f" | other p99 {1e3 * float(np.quantile(times['other'], 0.99)):5.1f} ms"
          f" | server CPU {cpu_per_s:4.2f} s/s")  # fmt: skip


def phase(proc: subprocess.Popen[str], label: str, run: Callable[[], dict[str, list[float]]],
          seconds: float) -> None:  # fmt: skip
    """Run one phase of load and print its latencies and the server's CPU per second."""
    cpu = cpu_seconds(proc.pid)
    times = run()
    summary(label, times, (cpu_seconds(proc.pid) - cpu) / seconds)


class LiveWriter(threading.Thread):
    """Appends one sample every 500 ms and flushes every 2 s; logs when each flush is done."""

    def __init__(self, job_dir: Path) -> None:
        super().__init__(daemon=True)
        self.store = open_store(str(job_dir))
        last = sorted((job_dir / "system" / "node-a").glob("part-*.parquet"))[-1]
        table = pq.read_table(last)
        self.template = table.slice(table.num_rows - 1)
        self.flushed: dict[float, float] = {}  # sample time -> time its flush finished
        self.stop_flag = threading.Event()

    def run(self) -> None:
        writer = SegmentWriter(self.store, "system/node-a")
        pending: list[float] = []
        next_flush = time.time() + 2.0
        while not self.stop_flag.wait(0.5):
            now = time.time()
            times = self.template.column("time").type
            row = self.template.set_column(0, "time", [[now]]).cast(self.template.schema)
            assert row.schema.field("time").type == times
            writer.append(row.to_batches()[0])
            pending.append(now)
            self.store.write_json("heartbeat/node-a.json", {"time": now, "pid": 1})
            if now >= next_flush:
                writer.flush()
                done = time.time()
                self.flushed.update({t: done for t in pending})
                pending, next_flush = [], now + 2.0
        writer.flush()


def screen_latency(port: int, writer: LiveWriter, seconds: float) -> list[float]:
    """Seconds from a flush being written to the page drawing its newest sample."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/#/job/{JOB}")
        time.sleep(seconds)
        drawn = page.evaluate("window.__drawn || []")
        browser.close()
    first: dict[float, float] = {}
    for last, at in drawn:
        if last is not None:
            first.setdefault(float(last), float(at))
    return [at - writer.flushed[t] for t, at in first.items() if t in writer.flushed]


def resegment(store: Store, prefix: str, time_col: str, seconds: float = 300.0) -> None:
    """Cut a stream into segments of ``seconds`` (the sampler's 300 s), as a real job has."""
    keys = store.list(prefix, ".parquet")
    table = pa.concat_tables([pq.read_table(store.path(k)) for k in keys])
    for k in keys:
        store.delete(k)
    times = table.column(time_col).to_numpy()
    cuts = np.searchsorted(times, np.arange(times[0], times[-1] + seconds, seconds))
    for seq, (a, b) in enumerate(itertools.pairwise(cuts)):
        if b > a:
            part = table.slice(int(a), int(b - a))
            store.write_bytes(f"{prefix}/{segment_name(float(times[a]), seq, 1)}",
                              encode_parquet(part))  # fmt: skip


def start_server(root: Path) -> tuple[subprocess.Popen[str], int]:
    exe = Path(sys.executable).parent / "stepscope"
    proc = subprocess.Popen([str(exe), "ui", str(root), "--port", "0"], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None
    url = proc.stdout.readline().split(" at ", 1)[1]
    return proc, int(url.split(":")[2].split("/")[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--viewers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument(
        "--jump-every",
        type=int,
        default=5,
        help="each viewer jumps to a random 10-minute window every N polls",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepscope-dash-bench-") as tmp:
        root = Path(tmp)
        start = time.time() - args.hours * 3600 - 15
        spec = SyntheticJob(name=JOB, hours=args.hours, cores=32, gpus=8, start_time=start)
        t = time.perf_counter()
        store = write_synthetic_job(str(root / JOB), spec)
        resegment(store, "system/node-a", "time")
        resegment(store, "steps/rank-0", "start")
        print(f"job written in {time.perf_counter() - t:.0f} s; {args.viewers} viewers, "
              f"{args.seconds:g} s per phase")  # fmt: skip
        proc, port = start_server(root)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            for what in ("system?node=node-a", "steps?rank=0"):
                t = time.perf_counter()
                conn.request("GET", f"/api/jobs/{JOB}/{what}")
                conn.getresponse().read()
                print(f"cold first request {what}: {1e3 * (time.perf_counter() - t):.0f} ms")
            phase(proc, "finished", lambda: load(port, spec, args.viewers, args.seconds,
                                                 args.jump_every), args.seconds)  # fmt: skip
            meta = store.read_json("job.json") | {"status": "Running", "end_time": None}
            store.write_json("job.json", meta)
            writer = LiveWriter(root / JOB)
            writer.start()
            lat: list[float] = []
            page = threading.Thread(target=lambda: lat.extend(
                screen_latency(port, writer, args.seconds)))  # fmt: skip
            page.start()
            phase(proc, "running", lambda: load(port, spec, args.viewers, args.seconds,
                                                args.jump_every), args.seconds)  # fmt: skip
            page.join()
            writer.stop_flag.set()
            writer.join()
            if lat:
                print(f"written -> on screen: {len(lat)} flushes, median "
                      f"{statistics.median(lat):.2f} s, max {max(lat):.2f} s "
                      "(plus up to 2 s from a sample to its flush)")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            print(json.dumps({"server_exit": proc.returncode}))


if __name__ == "__main__":
    main()
