"""A GPU loop under `stepscope run`, with parts of stepscope switched off and on by blocks.

Run by benchmarks/gpu_overhead.py as ``stepscope run -- python _gpu_switched.py ...``;
the method is benchmarks/_switched.py's (B W W B B W ... blocks in one process,
each watched block against the bare blocks beside it). ``--parts`` says what bare
blocks switch off: all of it (the overhead a user pays), or one part (which part
costs), or ``memory``: only the reading of the CUDA allocator's counters at a timed
step's end (issue 33's per-step columns; the rest of the agent stays on in both
sides). ``--period-ms`` sets the device timer's sampling period (0: every step
timed, as before issue 29). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _gpu_loop import GpuLoop
from _switched import Switch, run_blocks, warm_up

from stepscope.agent import _cuda, bootstrap


def allocator_reads(
    agent: bootstrap.Agent, cpu: bool
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(off, on) for the allocator reading of the device timer the warm-up attached;
    on the CPU (a smoke test) there is none, both do nothing and the run is an A/A."""
    if cpu:
        return (lambda: None), (lambda: None)
    from stepscope.agent.frameworks._torch import TorchFramework

    fw = agent.framework("torch")
    device = fw.hooks.device if isinstance(fw, TorchFramework) else None
    reader = device.timer.memory if device is not None else None
    if device is None or reader is None:
        raise SystemExit("no allocator reading attached after the warm-up: nothing to switch")
    timer = device.timer
    return (lambda: setattr(timer, "memory", None)), (lambda: setattr(timer, "memory", reader))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=("launch", "gpu"), default="launch")
    p.add_argument("--blocks", type=int, default=30, help="blocks of each side")
    p.add_argument("--block-seconds", type=float, default=0.3)
    p.add_argument("--parts", default="hooks,helpers,writers")
    p.add_argument("--period-ms", type=float, default=None, help="device timer sampling")
    p.add_argument("--same", action="store_true", help="switch nothing (A/A)")
    p.add_argument("--cpu", action="store_true", help="a smoke test of the harness on the CPU")
    a = p.parse_args()
    agent = bootstrap.current()
    if agent is None:
        raise SystemExit("run under `stepscope run` (benchmarks/gpu_overhead.py does)")
    if a.period_ms is not None:
        _cuda.SAMPLE_PERIOD_S = a.period_ms / 1000
    loop = GpuLoop(a.kind, "cpu" if a.cpu else "cuda")
    steps, _ = loop.calibrate(a.block_seconds)
    warm_up(lambda: loop.run(steps), seconds=3)
    if a.parts == "memory":
        switch = Switch(agent, held=False, hooks=allocator_reads(agent, a.cpu), parts=("hooks",))
    else:
        switch = Switch(agent, held=False, parts=tuple(a.parts.split(",")))
    r = run_blocks(switch, lambda: loop.run(steps), a.blocks, a.same)
    r["step_us"] = r["bare_s"] / (a.blocks * steps) * 1e6
    r["steps_per_block"] = steps
    print(json.dumps(r))


if __name__ == "__main__":
    main()
