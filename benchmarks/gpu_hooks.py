"""What the torch hooks alone cost a GPU step: no `stepscope run`, no threads, no helpers.

One process trains ``benchmarks/_gpu_loop.py``'s loop in blocks, taking turns:
``bare`` (no hooks), ``hooks`` (the agent's torch hooks and a recorder whose rows go
to a bounded deque; CUDA seen, the device timer sampling one step per 50 ms), and
``timer off`` (the same hooks, the timer never lent after the first steps). Each
hooked block against the bare blocks beside it; medians with their 95% intervals.
Where benchmarks/gpu_overhead.py says "hooks" cost, this says whether it is the
hooks' own work on the training thread.

    python benchmarks/gpu_hooks.py --blocks 40 [--kind launch] [--cpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _gpu_loop import GpuLoop
from overhead import median_ci

from stepscope.agent import _cuda
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import new_recorder
from stepscope.agent.frameworks._torch_hooks import TorchHooks


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=("launch", "gpu"), default="launch")
    p.add_argument("--blocks", type=int, default=40)
    p.add_argument("--block-seconds", type=float, default=0.2)
    p.add_argument("--cpu", action="store_true")
    a = p.parse_args()
    loop = GpuLoop(a.kind, "cpu" if a.cpu else "cuda")
    steps, _ = loop.calibrate(a.block_seconds)
    sides = {}
    for name, period in (("hooks", None), ("timer off", 1e9)):
        rec = new_recorder(deque(maxlen=1000))
        hooks = TorchHooks(rec, FaultBoundary(None, {"rank": 0, "node": "bench", "pid": 0}))
        if a.cpu:  # a stand-in: CUDA "initialised", events that cost nothing
            hooks._cuda_initialized = lambda: False
        sides[name] = (hooks, period)
    times: dict[str, list[float]] = {"bare": [], "hooks": [], "timer off": []}
    order = ["bare", "hooks", "bare", "timer off"]
    for _ in range(a.blocks):
        for side in order:
            if side != "bare":
                hooks, period = sides[side]
                _cuda.SAMPLE_PERIOD_S = period if period is not None else 0.05
                hooks.install()
            times[side].append(loop.run(steps))
            if side != "bare":
                sides[side][0].remove()
    out = {"kind": a.kind, "steps_per_block": steps}
    bare = times["bare"]
    for first, side in ((0, "hooks"), (1, "timer off")):  # B H B T B H ...: its neighbours
        ratios = [t / ((bare[2 * i + first] + bare[min(2 * i + first + 1, len(bare) - 1)]) / 2)
                  for i, t in enumerate(times[side])]  # fmt: skip
        lo, hi = median_ci(ratios)
        out[side] = {"median": statistics.median(ratios), "ci95": [lo, hi]}
    out["bare_us_per_step"] = statistics.median(times["bare"]) / steps * 1e6
    print(json.dumps(out))


if __name__ == "__main__":
    main()
