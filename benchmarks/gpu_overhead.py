"""Overhead of `stepscope run` on GPU training: a launch-bound and a GPU-bound step.

Targets (issue 29): a launch-bound step of about 0.8 ms at most 1.02x bare, a
GPU-bound step (about 9 ms) at most 1.005x. Runs on any NVIDIA GPU; the method is
benchmarks/overhead.py's switched blocks (benchmarks/_gpu_switched.py), each
ratio with the 95% bootstrap interval of its median, and an A/A run (nothing
switched) for the noise floor. Which part costs: ``--split`` adds runs that
switch only the hooks, only the helpers (sampler, rule runner), only the
writers, and the device timer on every step (``--period-ms 0``, the agent
before issue 29). ``--events`` times CUDA events themselves.

    python benchmarks/gpu_overhead.py --split --events --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from overhead import median_ci  # noqa: E402

MEMORY = ["--parts", "memory"]  # switch only the allocator's reading (_gpu_switched.py)
Run = tuple[str, str, list[str]]  # (name, loop kind, _gpu_switched.py options)


def runs(split: bool) -> list[Run]:
    out: list[Run] = [
        ("launch", "launch", []),
        ("launch A/A", "launch", ["--same"]),
        ("gpu", "gpu", []),
    ]
    if split:
        out += [
            ("launch, every step timed", "launch", ["--period-ms", "0"]),
            ("launch, hooks only", "launch", ["--parts", "hooks"]),
            ("launch, helpers only", "launch", ["--parts", "helpers"]),
            ("launch, writers only", "launch", ["--parts", "writers"]),
            # issue 33: the allocator's counters read at a timed step's end, alone
            ("launch, allocator reads", "launch", MEMORY),
            ("launch, allocator reads, every step", "launch", ["--period-ms", "0", *MEMORY]),
        ]
    return out


def switched(kind: str, options: list[str], blocks: int, cpu: bool) -> dict[str, Any]:
    script = [sys.executable, str(HERE / "_gpu_switched.py"), "--kind", kind]
    script += ["--blocks", str(blocks), *options, *(["--cpu"] if cpu else [])]
    with tempfile.TemporaryDirectory() as out:
        run = [sys.executable, "-m", "stepscope.cli", "run", "-o", out, "--job", "gpu-bench"]
        cmd = [*run, "--", *script]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def summary(name: str, r: dict[str, Any]) -> dict[str, Any]:
    ratios = r["ratios"]
    lo, hi = median_ci(ratios)
    return {
        "run": name,
        "median": statistics.median(ratios),
        "cpu_median": statistics.median(r["cpu_ratios"]),  # the training thread's CPU time
        "blocked_ms_per_s": r["blocked_ms_per_s"],
        "ci95": [lo, hi],
        "blocks": len(ratios),
        "step_us": r["step_us"],
        "agent_threads_ms_per_s": r["agent_threads_ms_per_s"],
        "helpers_ms_per_s": r["helpers_ms_per_s"],
    }


def event_costs(n: int = 2000) -> dict[str, float]:
    """Microseconds per call of what the device timer does, on this GPU and driver."""
    import torch

    torch.cuda.init()
    x = torch.ones(1, device="cuda")
    out: dict[str, float] = {}

    def per_call(name: str, fn: Any) -> None:
        fn()  # the first call may set something up
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out[name] = (time.perf_counter() - t0) / n * 1e6

    per_call("perf_counter", time.perf_counter)
    per_call("new Event + record", lambda: torch.cuda.Event(enable_timing=True).record())
    ev = torch.cuda.Event(enable_timing=True)
    per_call("record (reused event)", ev.record)
    per_call("current_stream", torch.cuda.current_stream)
    per_call("a tiny kernel launch", lambda: x.add_(1))
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    b.record()
    b.synchronize()
    per_call("elapsed_time", lambda: a.elapsed_time(b))
    per_call("query", b.query)
    from stepscope.agent._cuda_memory import read_memory

    per_call("memory_stats_as_nested_dict", torch.cuda.memory_stats_as_nested_dict)
    per_call("read_memory (the step's 3 columns)", lambda: read_memory(torch.cuda))
    return out


def memory_history_costs(blocks: int = 10) -> dict[str, float]:
    """What a memory window costs (issue 33): the launch-bound loop's steps with the
    allocator's history on (the window's ``max_entries``) against off, in alternating
    blocks (median ratio); then one ``_snapshot()`` and its pickle, as the window's end
    takes them, with the snapshot's size."""
    import pickle

    import torch
    from _gpu_loop import GpuLoop

    from stepscope.config._window import DEFAULT_MAX_ENTRIES

    loop = GpuLoop("launch")
    steps, _ = loop.calibrate(0.3)

    def record(on: bool) -> None:  # as the window's start and end call it
        if on:
            torch.cuda.memory._record_memory_history(max_entries=DEFAULT_MAX_ENTRIES)
        else:
            torch.cuda.memory._record_memory_history(enabled=None)

    ratios = []
    for i in range(blocks):
        times = {}
        for on in (True, False) if i % 2 else (False, True):
            record(on)
            times[on] = loop.run(steps)
        ratios.append(times[True] / times[False])
    record(True)
    loop.run(steps)
    t0 = time.perf_counter()
    snapshot = torch.cuda.memory._snapshot()
    t1 = time.perf_counter()
    data = pickle.dumps(snapshot)
    t2 = time.perf_counter()
    record(False)
    return {"step_ratio_median": statistics.median(ratios), "step_ratio_min": min(ratios),
            "step_ratio_max": max(ratios), "snapshot_s": t1 - t0, "pickle_s": t2 - t1,
            "snapshot_mb": len(data) / 2**20, "steps_per_block": steps}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--blocks", type=int, default=30, help="blocks of each side per run")
    p.add_argument("--split", action="store_true", help="also the runs that say which part costs")
    p.add_argument("--events", action="store_true", help="also time CUDA events themselves")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--cpu", action="store_true", help="a smoke test of the harness on the CPU")
    p.add_argument("--only", nargs="*", help="run only these (names as printed)")
    a = p.parse_args()
    import torch

    if not (a.cpu or torch.cuda.is_available()):
        raise SystemExit("benchmarks/gpu_overhead.py needs an NVIDIA GPU (torch.cuda)")
    card = "cpu (smoke test)" if a.cpu else torch.cuda.get_device_name()
    results: dict[str, Any] = {"card": card, "torch": torch.__version__}
    if a.events and not a.cpu:
        results["event_costs_us"] = event_costs()
        print("CUDA event costs (us/call):", json.dumps(results["event_costs_us"]), flush=True)
        try:  # first run on a GPU: its failure must not cost the overhead runs after it
            results["memory_window"] = memory_history_costs()
        except Exception as e:  # reported in the results, as measured
            results["memory_window"] = {"error": f"{type(e).__name__}: {e}"}
        print("memory window costs:", json.dumps(results["memory_window"]), flush=True)
    results["runs"] = []
    for name, kind, options in runs(a.split):
        if a.only and name not in a.only:
            continue
        s = summary(name, switched(kind, options, a.blocks, a.cpu))
        results["runs"].append(s)
        print(
            f"{name}: median {s['median']:.4f} (95% {s['ci95'][0]:.4f}-{s['ci95'][1]:.4f}; "
            f"training thread CPU {s['cpu_median']:.4f}), "
            f"{s['blocks']} blocks, {s['step_us']:.0f} us/step bare",
            flush=True,
        )
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
