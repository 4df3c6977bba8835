"""The MLP loop under `stepscope run`, with stepscope switched off and on by blocks.

Run by benchmarks/overhead.py as ``stepscope run -- python _switched.py ...``.
Two processes of the same loop differ by up to +-6% for their whole life (two
bare processes taking turns block by block: medians 0.94 and 1.05,
BENCHMARKS.md), so bare and watched are compared inside one process, in
blocks of about a second, B W W B B W ...:

* watched blocks: everything `stepscope run` starts by default runs (the
  agent's hooks and threads, the sampler, the live rule runner);
* bare blocks: the agent's torch hooks are removed, the sampler and the rule
  runner are stopped (SIGSTOP), and the agent's writers hold their flushes
  until the next watched block, so that the rows a watched block produced are
  written in watched time. The agent's threads stay alive; their CPU in bare
  blocks is measured and printed (it should be about zero).

The helpers keep their wall-time schedules: after a pause the sampler and the
rule runner catch up with what fell due, so if anything the watched blocks
carry more of their work, not less. ``--same`` switches nothing (an A/A run:
the noise floor of the method). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil
from _mlp_loop import Loop

from stepscope.agent import bootstrap


def agent_threads_cpu(me: psutil.Process) -> float:
    """CPU seconds of this process's threads other than the main one."""
    return sum(t.user_time + t.system_time for t in me.threads() if t.id != me.pid)


def thread_state(tid: int) -> tuple[float, int, float]:
    """(wall s, voluntary switches, wall minus CPU minus run-queue s) of thread ``tid``.

    On Linux (``/proc/self/task``). A training thread that sleeps waits for the
    GIL (or for I/O, which this loop does not do): a steadier sign of what other
    threads cost it than its loop time on a shared machine.
    """
    with open(f"/proc/self/task/{tid}/status") as f:
        status = f.read()
    vol = int(status.split("\nvoluntary_ctxt_switches:")[1].split()[0])
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        cpu_ns, queue_ns, _ = map(int, f.read().split())
    wall = time.perf_counter()
    return wall, vol, wall - (cpu_ns + queue_ns) / 1e9


def hold_writers(agent: bootstrap.Agent) -> threading.Event:
    """Make the agent's writers flush only while the returned event is set (it is now)."""
    watched = threading.Event()
    watched.set()
    writers: list[Any] = [agent.writer]
    if agent.tensors is not None:
        writers.append(agent.tensors.writer)
    for writer in writers:
        writer.flush = _held(writer.flush, watched)
    return watched


def _held(flush: Callable[..., None], watched: threading.Event) -> Callable[..., None]:
    def held(*args: Any, **kwargs: Any) -> None:
        watched.wait()  # a flush that falls due in a bare block waits for W
        flush(*args, **kwargs)

    return held


def hooks_off(agent: bootstrap.Agent) -> None:
    agent.collectives.remove()  # before the hooks: it wraps their wrapper
    agent.hooks.remove()


def hooks_on(agent: bootstrap.Agent) -> None:
    agent.hooks.install()
    agent.collectives.install()


def ratios(times: list[tuple[str, float]]) -> list[float]:
    """Each watched block over the mean of the nearest bare block on either side."""
    out = []
    for i, (side, t) in enumerate(times):
        if side == "w":
            bares = [x for s, x in times[:i] if s == "b"][-1:]
            bares += [x for s, x in times[i + 1 :] if s == "b"][:1]
            out.append(t / statistics.mean(bares))
    return out


class Switch:
    """Turns the watched side on and off: the agent's torch hooks and the helpers."""

    def __init__(self, agent: bootstrap.Agent) -> None:
        self.agent = agent
        me = os.getpid()
        self.helpers = [p for p in psutil.Process(os.getppid()).children() if p.pid != me]
        self.watched = hold_writers(agent)

    def off(self) -> None:
        hooks_off(self.agent)
        for p in self.helpers:
            p.suspend()
        self.watched.clear()

    def on(self) -> None:
        self.watched.set()
        for p in self.helpers:
            p.resume()
        hooks_on(self.agent)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=60, help="blocks of each side")
    p.add_argument("--steps", type=int, default=400, help="steps per block")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--same", action="store_true", help="switch nothing (A/A)")
    a = p.parse_args()
    agent = bootstrap.current()
    if agent is None:
        raise SystemExit("run under `stepscope run` (benchmarks/overhead.py does)")
    loop = Loop(threads=a.threads)
    t_end = time.monotonic() + 10  # the helpers start and import meanwhile
    while time.monotonic() < t_end:
        loop.run(a.steps)
    switch, me = Switch(agent), psutil.Process()
    times: list[tuple[str, float]] = []
    idle_cpu = 0.0
    tid, sleeps = threading.get_native_id(), {"b": [0, 0.0], "w": [0, 0.0]}
    for r in range(a.blocks):
        for side in ("b", "w") if r % 2 == 0 else ("w", "b"):  # B W W B B W ...
            if side == "b" and not a.same:
                switch.off()
            cpu0, (_, v0, b0) = agent_threads_cpu(me), thread_state(tid)
            times.append((side, loop.run(a.steps)))
            _, v1, b1 = thread_state(tid)
            sleeps[side][0] += v1 - v0
            sleeps[side][1] += b1 - b0
            if side == "b":
                idle_cpu += agent_threads_cpu(me) - cpu0
                if not a.same:
                    switch.on()
    secs = {side: sum(t for s, t in times if s == side) for side in ("b", "w")}
    bare_s = secs["b"]
    print(
        json.dumps(
            {
                "ratios": ratios(times),
                "bare_s": bare_s,
                "watched_s": secs["w"],
                "step_ms": bare_s / (a.blocks * a.steps) * 1e3,
                "idle_threads_ms_per_s": idle_cpu / bare_s * 1e3,
                # the training thread's sleeps (GIL waits) and blocked time per second
                "sleeps_per_s": {s: sleeps[s][0] / secs[s] for s in secs},
                "blocked_ms_per_s": {s: sleeps[s][1] / secs[s] * 1e3 for s in secs},
            }
        )
    )


if __name__ == "__main__":
    main()
