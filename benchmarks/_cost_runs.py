"""One run of run_cost.py's training, bare or under `stepscope run`, and what it cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
TRAIN, WAIT = str(HERE / "_cost_train.py"), str(HERE / "_cost_wait.py")
PROBE = str(HERE / "_cost_probe")  # its sitecustomize: each helper's CPU as it exits
HELPERS = {"stepscope.sampler.main": "sampler", "stepscope.rules.runner": "rules"}
POLL_S = 0.5


def without_pyc_off(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """``env`` with bytecode caching on: a user's installed stepscope has its ``.pyc``
    files; compiling every module at each start would add 0.2 s of CPU per process."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass
class Run:
    """One run's figures, by the keys of run_cost.ROWS (seconds, or % of a core)."""

    values: dict[str, float] = field(default_factory=dict)


class CpuWatch:
    """Polls the CPU seconds of the launcher and its helpers (not the training)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.seen = pid, {}  # type: int, dict[int, tuple[str, float]]
        self.series: list[tuple[float, dict[str, float]]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _ours(self) -> list[tuple[str, psutil.Process]]:
        launcher = psutil.Process(self.pid)
        found = [("launcher", launcher)]
        for child in launcher.children():
            role = next((r for m, r in HELPERS.items() if m in child.cmdline()), None)
            if role is not None:
                found.append((role, child))
        return found

    def _poll(self) -> None:
        while not self._done.wait(POLL_S):
            try:
                for role, proc in self._ours():
                    t = proc.cpu_times()
                    self.seen[proc.pid] = (role, t.user + t.system)
            except psutil.Error:
                continue  # one ended between the listing and the read: next time
            roles: dict[str, float] = {}
            for role, cpu in self.seen.values():
                roles[role] = roles.get(role, 0.0) + cpu
            self.series.append((time.time(), roles))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def rates(self, start: float, end: float) -> dict[str, float]:
        """% of a core of each process, and of all, between ``start`` and ``end``."""
        inside = [(t, c) for t, c in self.series if start <= t <= end]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < 1.0:
            return {}
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        out = {f"steady_{r}": 100 * (c1[r] - c0.get(r, 0.0)) / (t1 - t0) for r in c1}
        out["steady_pct"] = sum(out.values())
        return out


def _command(side: str, steps: int, threads: int, out: Path) -> list[str]:
    train = [sys.executable, TRAIN, "--steps", str(steps), "--threads", str(threads)]
    wrapped = [sys.executable, "-I", WAIT, str(out / "wait.json"), "--", *train]
    if side == "bare":
        return wrapped
    run = [sys.executable, "-m", "stepscope.cli", "run", "-o", str(out), "--job", "j"]
    return [*run, "--", *wrapped]


def one_run(side: str, steps: int, src: Path | None, threads: int, out: Path) -> Run:
    """Run the training once (``src``: the stepscope code on ``PYTHONPATH``)."""
    out.mkdir(parents=True)
    env = without_pyc_off(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join((PROBE, str(src)))
        env["STEPSCOPE_COST_LOG"] = str(out / "cpu.jsonl")
    log = (out / "stdout").open("w+b"), (out / "stderr").open("w+b")
    t0 = time.time()
    command = _command(side, steps, threads, out)
    proc = subprocess.Popen(command, env=env, stdout=log[0], stderr=log[1])
    watch = CpuWatch(proc.pid) if side != "bare" else None
    _, status, usage = os.wait4(proc.pid, 0)
    ended = time.time()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if watch is not None:
        watch.stop()
    if proc.returncode != 0:
        raise SystemExit(f"{side} run failed: {(out / 'stderr').read_text()[-2000:]}")
    stamps = json.loads((out / "stdout").read_text().strip().splitlines()[-1])
    waited = json.loads((out / "wait.json").read_text())
    v = {"wall": ended - t0, "to_script": stamps["start"] - t0}
    v |= {"to_first": stamps["first_step"] - t0, "loop": stamps["end"] - stamps["first_step"]}
    v |= {"exit": waited["reaped"] - stamps["end"], "tail": ended - waited["reaped"]}
    v |= {"cpu_tree": usage.ru_utime + usage.ru_stime, "cpu_train": waited["cpu_s"]}
    if "cpu_start" in stamps:  # the training process's CPU before its first line, after main
        v |= {"cpu_start": stamps["cpu_start"], "cpu_exit": waited["cpu_s"] - stamps["cpu_end"]}
    if "thread_cpu" in stamps:  # ms of CPU per step, first step to the loop's end
        per_step = 1e3 / stamps["steps"]
        v |= {"step_thread_ms": stamps["thread_cpu"] * per_step}
        v |= {"step_process_ms": stamps["process_cpu"] * per_step}
        v |= {"step_wait_ms": stamps.get("run_delay", 0.0) * per_step}
    if watch is not None:
        v |= watch.rates(stamps["first_step"] + 1.0, stamps["end"] - 0.5)
        v |= _job_times(out / "j", t0)
        v |= _helpers_cpu(out / "cpu.jsonl")
    return Run(v)


def _helpers_cpu(log: Path) -> dict[str, float]:
    """CPU seconds of each of stepscope's processes as it exited (the probe's lines;
    a restarted helper's lives add up)."""
    found: dict[str, float] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        rec = json.loads(line)
        key = f"cpu_{rec['role']}"
        found[key] = found.get(key, 0.0) + float(rec["cpu"])
    return found


def _job_times(job: Path, t0: float) -> dict[str, float]:
    """The first system sample after the start; the last verdict after the training's end."""
    import pyarrow.parquet as pq

    found: dict[str, float] = {}
    meta = json.loads((job / "job.json").read_text())
    times = [
        min(pq.read_table(seg, columns=["time"]).column("time").to_pylist())
        for seg in sorted((job / "system").glob("*/*.parquet"))[:1]
    ]
    if times:
        found["first_sample"] = times[0] - t0
    verdicts = [p.stat().st_mtime for p in (job / "rules").glob("*.json")]
    if verdicts and isinstance(meta.get("end_time"), int | float):
        found["verdicts"] = max(verdicts) - float(meta["end_time"])
    return found
