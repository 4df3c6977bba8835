"""Benchmark: how soon a live finding follows the flush of its evidence, and what the
live rule runner costs, at every job age.

    python benchmarks/live_latency.py [--jobs 2] [--seconds 240] [--src OTHER/src]

Each job is a real ``stepscope run`` of ``_stall_loop.py`` (a tiny CPU model,
~0.05 s steps) with a 1.5 s stall planted every ``--stall-every`` seconds of
the script's age, and StepOutlier (``n_outliers = 0``, ``min_excess_s = 1``)
as its rule set, so each stall is one finding. While it runs the benchmark
polls the job folder every 0.1 s:

* **flushed**: the mtime of the first version of the rank's steps segment
  that holds the stalled step (the writer rewrites its current segment every
  flush, 2 s by default): the moment the evidence reached the folder;
* **visible**: the mtime of the first version of ``rules/StepOutlier.json``
  that lists the finding (written atomically: what ``stepscope rules`` and the
  dashboard read);
* latency = visible - flushed, per finding, grouped by the job's age at the
  flush. A finding first seen in the final evaluation (after the training
  ended) is counted apart;
* the runner's CPU (utime + stime from ``/proc/<pid>/stat``) and its scans
  (the rewrites of the rule's file), per minute of job age.

``--src`` runs another checkout's ``src`` (on ``PYTHONPATH``), to compare.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).parent
LOOP = str(HERE / "_stall_loop.py")
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")
CONFIG = '[[rules]]\nname = "StepOutlier"\nparameters = { n_outliers = 0, min_excess_s = 1.0 }\n'
POLL_S = 0.1
SKIP_STEPS = 10  # StepOutlier's skip_steps
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Watch:
    """What the poller saw of one job."""

    job: Path
    seg_mtime: dict[str, float] = field(default_factory=dict)
    flushed: dict[int, float] = field(default_factory=dict)  # step -> first flush with it
    max_step: int = -1
    rule_mtime: float = 0.0
    scans: list[float] = field(default_factory=list)  # mtimes of the rule file's versions
    visible: dict[int, float] = field(default_factory=dict)  # step -> first version with it
    cpu: list[tuple[float, float]] = field(default_factory=list)  # (time, runner CPU s)
    runner_pid: int | None = None

    def poll_steps(self) -> None:
        folder = self.job / "steps" / "rank-0"
        if not folder.is_dir():
            return
        for name in sorted(os.listdir(folder))[-2:]:
            path = folder / name
            try:
                mtime = path.stat().st_mtime
                if self.seg_mtime.get(name) == mtime:
                    continue
                steps = pq.read_table(path, columns=["step"]).column("step").to_pylist()
            except (OSError, ValueError):
                continue  # being replaced: the next poll sees it
            self.seg_mtime[name] = mtime
            for s in steps:
                self.flushed.setdefault(int(s), mtime)

    def poll_rule(self) -> None:
        path = self.job / "rules" / "StepOutlier.json"
        try:
            mtime = path.stat().st_mtime
            if mtime == self.rule_mtime:
                return
            body = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        self.rule_mtime = mtime
        self.scans.append(mtime)
        for f in body.get("findings", []):
            self.visible.setdefault(int(f["steps"][0]), mtime)

    def poll_cpu(self) -> None:
        if self.runner_pid is None:
            self.runner_pid = find_runner(self.job)
        if self.runner_pid is None:
            return
        try:
            fields = Path(f"/proc/{self.runner_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return
        self.cpu.append((time.time(), (int(fields[11]) + int(fields[12])) / TICK))


def find_runner(job: Path) -> int | None:
    """The pid of the rule runner of ``job`` (this benchmark's own job)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"stepscope.rules.runner" in cmd and str(job).encode() in cmd:
            return int(pid)
    return None


@dataclass
class Job:
    """One finished job: what was polled, the stalls planted, its start and end."""

    watch: Watch
    stalls: list[int]
    start: float
    end: float


def run_job(out: Path, name: str, a: argparse.Namespace, env: dict[str, str]) -> Job:
    """One job under ``stepscope run``, polled until it ends."""
    config = out / "stepscope.toml"
    config.write_text(CONFIG)
    stalls = [str(t) for t in range(a.first_stall, int(a.seconds) - 15, a.stall_every)]
    cmd = [STEPSCOPE, "run", "-o", str(out), "--job", name, "--config", str(config), "--",
           sys.executable, LOOP, "--seconds", str(a.seconds), "--stall-at", *stalls]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    watch, ticks = Watch(out / name), 0
    while proc.poll() is None:
        watch.poll_steps()
        watch.poll_rule()
        if ticks % 10 == 0:
            watch.poll_cpu()
        ticks += 1
        time.sleep(POLL_S)
    watch.poll_steps()
    watch.poll_rule()
    assert proc.stdout is not None
    planted = json.loads(proc.stdout.read().decode().strip().splitlines()[-1])
    meta = json.loads((out / name / "job.json").read_text())
    stalls = [int(s["step"]) for s in planted["stalls"]]
    return Job(watch, stalls, float(meta["start_time"]), float(meta["end_time"]))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def describe(values: list[float]) -> str:
    if not values:
        return "n=0"
    med, p90, low, high = statistics.median(values), pct(values, 0.9), min(values), max(values)
    return f"n={len(values)} median {med:.1f} s, p90 {p90:.1f} s, range {low:.1f}-{high:.1f} s"


def latencies(jobs: list[Job], bucket_s: int) -> None:
    """Per finding: latency from the flush of its step to its first listing."""
    live: dict[int, list[float]] = {}
    final: list[float] = []
    missed: list[int] = []
    extra = skipped = 0
    for job in jobs:
        w = job.watch
        extra += len(set(w.visible) - set(job.stalls))
        for step in job.stalls:
            if step < SKIP_STEPS:  # a slow start put the stall in the steps not judged
                skipped += 1
                continue
            if step not in w.visible or step not in w.flushed:
                missed.append(step)
                continue
            lat, age = w.visible[step] - w.flushed[step], w.flushed[step] - job.start
            if w.visible[step] >= job.end - 1.0:
                final.append(lat)
            else:
                live.setdefault(int(age // bucket_s), []).append(lat)
    everything = [x for v in live.values() for x in v]
    print(f"latency, all live findings: {describe(everything)}")
    for b in sorted(live):
        ages = f"{b * bucket_s:>3}-{(b + 1) * bucket_s:<3} s"
        print(f"  flushed at job age {ages}: {describe(live[b])}")
    print(f"found only by the final evaluation: {describe(final)}; "
          f"planted stalls not found: {missed}; in the skipped first steps: {skipped}; "
          f"findings not planted: {extra}")  # fmt: skip


def costs(jobs: list[Job]) -> None:
    """The runner's CPU and scans per minute of job age."""
    per_min: dict[int, list[tuple[float, int]]] = {}
    for job in jobs:
        w = job.watch
        for (t0, c0), (t1, c1) in itertools.pairwise(w.cpu):
            minute = int((t0 - job.start) // 60)
            n = sum(t0 <= s < t1 for s in w.scans)
            per_min.setdefault(minute, []).append((c1 - c0, n))
    print("runner, per minute of job age (over all jobs): CPU s/min, scans/min, CPU ms/scan")
    for m in sorted(per_min):
        cpu = sum(c for c, _ in per_min[m]) / len(per_min[m]) * 60  # the polls are 1 s apart
        scans = sum(n for _, n in per_min[m]) / len(per_min[m]) * 60
        each = 1000 * cpu / scans if scans else float("nan")
        print(f"  minute {m}: {cpu:5.2f} CPU s/min, {scans:5.1f} scans/min, {each:4.0f} ms/scan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seconds", type=float, default=240.0, help="each job's training time")
    p.add_argument("--first-stall", type=int, default=8, help="job age of the first stall, s")
    p.add_argument("--stall-every", type=int, default=15, help="seconds between stalls")
    p.add_argument("--bucket", type=int, default=60, help="job-age buckets of the report, s")
    p.add_argument("--src", help="another checkout's src folder (PYTHONPATH), to compare")
    p.add_argument("--out", help="where the jobs go (default: a temporary folder)")
    a = p.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if a.src:
        env["PYTHONPATH"] = a.src
    out = Path(a.out or tempfile.mkdtemp(prefix="stepscope-live-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"jobs in {out}; load average before: {os.getloadavg()[0]:.2f}")
    jobs = [run_job(out, f"live-{i}-{int(time.time())}", a, env) for i in range(a.jobs)]
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    latencies(jobs, a.bucket)
    costs(jobs)


if __name__ == "__main__":
    main()
