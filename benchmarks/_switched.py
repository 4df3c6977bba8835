"""The MLP loop under `stepscope run`, with stepscope switched off and on by blocks.

Run by benchmarks/overhead.py as ``stepscope run -- python _switched.py ...``;
its machinery (``Switch``, ``run_blocks``) also serves benchmarks/_tf_switched.py,
which passes its own hooks and training (torch is imported only here, by ``main``).
Two processes of the same loop differ by up to +-6% for their whole life (two
bare processes taking turns block by block: medians 0.94 and 1.05,
BENCHMARKS.md), so bare and watched are compared inside one process, in
blocks of about a second, B W W B B W ...:

* watched blocks: everything `stepscope run` starts by default runs (the
  agent's hooks and threads, the sampler, the live rule runner);
* bare blocks: the agent's torch hooks are removed, the sampler and the rule
  runner are stopped (SIGSTOP), and the agent's writers do not flush. The
  agent's threads stay alive; their CPU in bare blocks is measured and printed
  (it should be about zero).

The writers flush every 2 s of wall time, and half of the wall time is bare.
``--flushes paced`` (the default) skips a flush that falls due in a bare block
(its rows wait for the next one), so watched time carries the flushes a run
of its length makes: one per 2 s. ``--flushes held`` makes it wait for the
next watched block instead (the method before 2026-11-25): watched time then
carries every flush of the wall time, twice a real run's rate. The flushes
per watched second are printed. The helpers keep their wall-time schedules:
after a pause the sampler and the rule runner catch up with what fell due, so
the watched blocks carry up to twice their work (BENCHMARKS.md). ``--same``
switches nothing (an A/A run: the noise floor of the method). Prints one JSON
line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psutil

from stepscope.agent import bootstrap

if TYPE_CHECKING:
    from stepscope.agent.frameworks._torch import TorchFramework

Hooks = tuple[Callable[[], None], Callable[[], None]]  # (off, on)


def _tasks_cpu(tids: set[int] | None = None) -> float:
    """CPU seconds of this process's threads (those of ``tids`` if given), to the ns."""
    total = 0
    for tid in os.listdir("/proc/self/task") if tids is None else tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended
    return total / 1e9


def _agent_tids() -> set[int]:
    main = threading.main_thread().native_id
    return {t.native_id for t in threading.enumerate() if t.native_id is not None} - {main}


def agent_threads_cpu() -> float:
    """CPU seconds of this process's Python threads other than the main one: the agent's.

    (Not every other thread: TensorFlow's thread pools are native threads that train.)"""
    return _tasks_cpu(_agent_tids())


def training_cpu() -> float:
    """CPU seconds of every thread of this process but the agent's (TensorFlow's pools)."""
    return _tasks_cpu() - _tasks_cpu(_agent_tids())


def helpers_cpu(helpers: list[psutil.Process]) -> float:
    """CPU seconds of the helper processes (sampler, rule runner) so far."""
    total = 0.0
    for p in helpers:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass  # a helper that ended
    return total


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


def _module(p: psutil.Process) -> str:
    """The ``-m`` module a helper runs (``stepscope.sampler.main``), else its pid."""
    try:
        args = p.cmdline()
        return args[args.index("-m") + 1] if "-m" in args else str(p.pid)
    except (psutil.Error, IndexError):
        return str(p.pid)


def pace_writers(agent: bootstrap.Agent, held: bool) -> tuple[threading.Event, list[int]]:
    """Make the agent's writers flush only while the returned event is set (it is now).

    A flush that falls due while it is clear is skipped, or with ``held`` waits for
    it; the list counts the steps writer's flushes."""
    watched, flushes = threading.Event(), [0]
    watched.set()
    writers: list[Any] = [agent.writer]
    if agent.tensors is not None:
        writers.append(agent.tensors.writer)
    for writer in writers:
        counter = flushes if writer is agent.writer else [0]
        writer.flush = _paced(writer.flush, watched, held, counter)
    return watched, flushes


def _paced(
    flush: Callable[..., None], watched: threading.Event, held: bool, count: list[int]
) -> Callable[..., None]:
    def paced(*args: Any, **kwargs: Any) -> None:
        if not (held or watched.is_set()):
            return  # due in a bare block: its rows go with the next flush
        watched.wait()
        count[0] += 1
        flush(*args, **kwargs)

    return paced


def _torch(agent: bootstrap.Agent) -> TorchFramework:
    from stepscope.agent.frameworks._torch import TorchFramework

    fw = agent.framework("torch")
    assert isinstance(fw, TorchFramework)
    return fw


def hooks_off(agent: bootstrap.Agent) -> None:
    fw = _torch(agent)
    fw.collectives.remove()  # before the hooks: it wraps their wrapper
    fw.hooks.remove()


def hooks_on(agent: bootstrap.Agent) -> None:
    fw = _torch(agent)
    fw.hooks.install()
    fw.collectives.install()


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
    """Turns the watched side on and off: the agent's hooks (torch's unless ``hooks``
    gives others) and the helpers."""

    PARTS = ("hooks", "helpers", "writers")

    def __init__(
        self,
        agent: bootstrap.Agent,
        held: bool,
        hooks: Hooks | None = None,
        parts: tuple[str, ...] = PARTS,
    ) -> None:
        self.agent, self.parts = agent, parts  # parts: what bare blocks switch off
        me = os.getpid()
        self.helpers = [p for p in psutil.Process(os.getppid()).children() if p.pid != me]
        self.watched, self.flushes = pace_writers(agent, held)
        self.hooks = hooks or (lambda: hooks_off(agent), lambda: hooks_on(agent))

    def off(self) -> None:
        if "hooks" in self.parts:
            self.hooks[0]()
        for p in self.helpers if "helpers" in self.parts else ():
            p.suspend()
        if "writers" in self.parts:
            self.watched.clear()

    def on(self) -> None:
        self.watched.set()
        for p in self.helpers if "helpers" in self.parts else ():
            p.resume()
        if "hooks" in self.parts:
            self.hooks[1]()


def warm_up(train: Callable[[], float], seconds: float = 10) -> None:
    """Train for ``seconds``: the helpers start and import meanwhile."""
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        train()


def run_blocks(
    switch: Switch,
    train: Callable[[], float],
    blocks: int,
    same: bool,
    cpu: Callable[[], float] = time.thread_time,
) -> dict[str, Any]:
    """``blocks`` blocks of each side, B W W B B W ...; ``train()`` trains one block and
    returns its wall seconds, ``cpu()`` is the training's CPU seconds so far. The
    result is the JSON line of ``main``."""
    flushes0 = switch.flushes[0]
    times: list[tuple[str, float]] = []
    cpu_times: list[tuple[str, float]] = []  # the training's CPU time per block
    agent_cpu = {"b": 0.0, "w": 0.0}  # the agent's threads' CPU seconds in each side's blocks
    helper_cpu = {"b": 0.0, "w": 0.0}  # the helpers' CPU seconds within each side's blocks
    tid, sleeps = threading.get_native_id(), {"b": [0, 0.0], "w": [0, 0.0]}
    for r in range(blocks):
        for side in ("b", "w") if r % 2 == 0 else ("w", "b"):  # B W W B B W ...
            if side == "b" and not same:
                switch.off()
            cpu0, (_, v0, b0) = agent_threads_cpu(), thread_state(tid)
            own0, h0 = cpu(), helpers_cpu(switch.helpers)
            times.append((side, train()))
            cpu_times.append((side, cpu() - own0))
            helper_cpu[side] += helpers_cpu(switch.helpers) - h0
            _, v1, b1 = thread_state(tid)
            sleeps[side][0] += v1 - v0
            sleeps[side][1] += b1 - b0
            agent_cpu[side] += agent_threads_cpu() - cpu0
            if side == "b" and not same:
                switch.on()
    secs = {side: sum(t for s, t in times if s == side) for side in ("b", "w")}
    bare_s = secs["b"]
    return {
        "ratios": ratios(times),
        # the same for the training's CPU time: without the time it waits (GIL, run
        # queue); measured as noisy as wall time for torch (BENCHMARKS.md)
        "cpu_ratios": ratios(cpu_times),
        "bare_s": bare_s,
        "watched_s": secs["w"],
        # the steps writer's flushes per second of watched time (a run: 1 / 2 s)
        "flushes_per_s": (switch.flushes[0] - flushes0) / secs["w"],
        "idle_threads_ms_per_s": agent_cpu["b"] / bare_s * 1e3,
        "agent_threads_ms_per_s": {s: agent_cpu[s] / secs[s] * 1e3 for s in secs},
        # compared with an A/A run's (nothing paused): more in watched blocks is
        # their catch-up after each pause (work of the bare blocks done in them)
        "helpers_ms_per_s": {s: helper_cpu[s] / secs[s] * 1e3 for s in secs},
        # each helper's CPU seconds over its life so far (start-up included)
        "helpers_life_cpu_s": {_module(p): helpers_cpu([p]) for p in switch.helpers},
        # the main thread's sleeps (GIL waits) and blocked time per second
        "sleeps_per_s": {s: sleeps[s][0] / secs[s] for s in secs},
        "blocked_ms_per_s": {s: sleeps[s][1] / secs[s] * 1e3 for s in secs},
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=60, help="blocks of each side")
    p.add_argument("--steps", type=int, default=400, help="steps per block")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--same", action="store_true", help="switch nothing (A/A)")
    p.add_argument("--flushes", choices=("paced", "held"), default="paced")
    a = p.parse_args()
    agent = bootstrap.current()
    if agent is None:
        raise SystemExit("run under `stepscope run` (benchmarks/overhead.py does)")
    from _mlp_loop import Loop

    loop = Loop(threads=a.threads)
    warm_up(lambda: loop.run(a.steps))
    switch = Switch(agent, a.flushes == "held")
    r = run_blocks(switch, lambda: loop.run(a.steps), a.blocks, a.same)
    r["step_ms"] = r["bare_s"] / (a.blocks * a.steps) * 1e3
    print(json.dumps(r))


if __name__ == "__main__":
    main()
