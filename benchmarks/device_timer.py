"""What the device timer costs a step, on any machine: a CPU stand-in for CUDA events.

The stand-in's events cost what CUDA events cost on an H200 under its driver (measured
by ``benchmarks/gpu_overhead.py --events``, BENCHMARKS.md): making one 3.6 us, recording
one 12.4 us (``torch.cuda.Event.record`` looks up the current stream: 8 us of it),
``synchronize`` 0.6 us and ``elapsed_time`` 1.7 us, each a busy wait. A loop of
launch-bound steps (``--step-us`` of host work each, 800 by default, as issue 29's)
calls the recorder's hooks in blocks that take turns: no device timer, the sampled
timer (one step per 50 ms, the agent's), and the timer on every step (the agent
before issue 29). Each block's events are resolved after it, as the writer thread
would, and timed apart. Prints microseconds per step on the training thread and on
the writer, with the spread over blocks.

    python benchmarks/device_timer.py --blocks 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import deque
from typing import Self

from stepscope.agent._cuda import DeviceSampler, DeviceTimer, resolve
from stepscope.agent._recorder import StepRecorder, new_recorder

COSTS_US = {"make": 3.6, "record": 12.4, "synchronize": 0.6, "elapsed_time": 1.7}


def spin(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


class StandInEvent:
    """A CUDA event with an H200's costs; its clock is the host's."""

    counts = dict.fromkeys(COSTS_US, 0)

    def __init__(self, enable_timing: bool = False) -> None:
        spin(COSTS_US["make"])
        StandInEvent.counts["make"] += 1
        self.t = 0.0

    def record(self) -> None:
        spin(COSTS_US["record"])
        StandInEvent.counts["record"] += 1
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        spin(COSTS_US["synchronize"])
        StandInEvent.counts["synchronize"] += 1

    def elapsed_time(self, end: Self, /) -> float:
        spin(COSTS_US["elapsed_time"])
        StandInEvent.counts["elapsed_time"] += 1
        return (end.t - self.t) * 1000


class StandInCuda:
    Event = StandInEvent


def step(rec: StepRecorder, host_us: float) -> None:
    """One training step through the recorder's hooks: forward, backward, optimizer."""
    rec.on_forward_start(time.perf_counter())
    spin(host_us * 0.3)
    rec.on_forward_end(time.perf_counter(), True)
    rec.on_backward_start()
    t0 = time.perf_counter()
    spin(host_us * 0.5)
    rec.on_backward(t0, time.perf_counter())
    rec.on_optimizer_start(time.perf_counter())
    spin(host_us * 0.2)
    rec.on_optimizer_end(time.perf_counter())


def block(mode: str, steps: int, host_us: float) -> tuple[float, float, int]:
    """(training seconds, resolving seconds, timed steps) of one block in ``mode``."""
    rows: deque = deque()
    rec = new_recorder(rows)
    if mode == "every step":
        rec.device = DeviceTimer(StandInCuda())
    elif mode == "sampled":
        DeviceSampler(rec, DeviceTimer(StandInCuda())).attach()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(rec, host_us)
    t1 = time.perf_counter()
    timed = 0
    for row in rows:
        timed += bool(row[-1])
        resolve(row[-1])
    return t1 - t0, time.perf_counter() - t1, timed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--blocks", type=int, default=30)
    p.add_argument("--steps", type=int, default=500, help="per block")
    p.add_argument("--step-us", type=float, default=800.0)
    a = p.parse_args()
    modes = ("none", "sampled", "every step")
    train: dict[str, list[float]] = {m: [] for m in modes}
    writer: dict[str, list[float]] = {m: [] for m in modes}
    timed: dict[str, int] = dict.fromkeys(modes, 0)
    for i in range(a.blocks):
        for mode in modes if i % 2 == 0 else modes[::-1]:
            t, w, n = block(mode, a.steps, a.step_us)
            train[mode].append(t)
            writer[mode].append(w)
            timed[mode] += n
    out: dict[str, object] = {"step_us": a.step_us, "costs_us": COSTS_US}
    for mode in modes[1:]:
        extra = [(t - b) / a.steps * 1e6 for t, b in zip(train[mode], train["none"], strict=True)]
        q = statistics.quantiles(extra, n=4)
        out[mode] = {
            "training_us_per_step": statistics.median(extra),
            "quartiles": [q[0], q[2]],
            "writer_us_per_step": statistics.median(writer[mode]) / a.steps * 1e6,
            "timed_share": timed[mode] / (a.blocks * a.steps),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
