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


class Switch:
    """Turns the watched side on and off: the agent's torch hooks and the helpers."""

    def __init__(self, agent: bootstrap.Agent) -> None:
        self.agent = agent
        me = os.getpid()
        self.helpers = [p for p in psutil.Process(os.getppid()).children() if p.pid != me]
        self.watched = threading.Event()
        self.watched.set()
        writers: list[Any] = [agent.writer]
        if agent.tensors is not None:
            writers.append(agent.tensors.writer)
        for writer in writers:
            writer.flush = self._held(writer.flush)

    def _held(self, flush: Callable[..., None]) -> Callable[..., None]:
        def held(*args: Any, **kwargs: Any) -> None:
            self.watched.wait()  # a flush that falls due in a bare block waits for W
            flush(*args, **kwargs)

        return held

    def off(self) -> None:
        self.agent.collectives.remove()  # before the hooks: it wraps their wrapper
        self.agent.hooks.remove()
        for p in self.helpers:
            p.suspend()
        self.watched.clear()

    def on(self) -> None:
        self.watched.set()
        for p in self.helpers:
            p.resume()
        self.agent.hooks.install()
        self.agent.collectives.install()


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
    for r in range(a.blocks):
        for side in ("b", "w") if r % 2 == 0 else ("w", "b"):  # B W W B B W ...
            if side == "b" and not a.same:
                switch.off()
            cpu0 = agent_threads_cpu(me)
            times.append((side, loop.run(a.steps)))
            if side == "b":
                idle_cpu += agent_threads_cpu(me) - cpu0
                if not a.same:
                    switch.on()
    ratios = []
    for i, (side, t) in enumerate(times):
        if side == "w":
            bares = [x for s, x in times[:i] if s == "b"][-1:]
            bares += [x for s, x in times[i + 1 :] if s == "b"][:1]
            ratios.append(t / statistics.mean(bares))
    bare_s = sum(t for s, t in times if s == "b")
    print(
        json.dumps(
            {
                "ratios": ratios,
                "bare_s": bare_s,
                "watched_s": sum(t for s, t in times if s == "w"),
                "step_ms": bare_s / (a.blocks * a.steps) * 1e3,
                "idle_threads_ms_per_s": idle_cpu / bare_s * 1e3,
            }
        )
    )


if __name__ == "__main__":
    main()
