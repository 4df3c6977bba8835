"""A bare loop and a loop under `stepscope run` that take turns, block by block.

Whole runs of a minute each cannot resolve 0.5% on a shared machine: the same
bare loop moves by 3-6% from one minute to the next, and by up to 50% between
seconds (BENCHMARKS.md). Here two long-lived processes run the same loop
(benchmarks/_mlp_loop.py ``--serve``): one bare, one under `stepscope run` with
default settings (agent, sampler, live rule runner). They take turns, a block
of steps each (B W W B B W ...), so that both meet the machine in nearly the
same state; each watched block is compared with the bare blocks on either side.

While the bare loop runs, the whole watched job is stopped (SIGSTOP: launcher,
training process with the agent's threads, sampler, rule runner), so none of
stepscope's work lands on the bare blocks; it resumes (SIGCONT) before its
own block. Its helpers keep their wall-time schedules, so after a pause the
sampler and the rule runner catch up with what fell due: if anything, the
watched blocks carry more of their work, not less.
"""

from __future__ import annotations

import json
import signal
import subprocess
from typing import IO

import psutil


class Server:
    """One ``_mlp_loop.py --serve`` process (possibly under `stepscope run`)."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.tree: list[psutil.Process] = []  # stopped between its blocks, once known

    def block(self, steps: int) -> float:
        """Seconds the loop took for ``steps`` steps (timed inside the loop)."""
        self._signal(signal.SIGCONT)
        stdin: IO[str] = self.proc.stdin  # type: ignore[assignment]
        stdout: IO[str] = self.proc.stdout  # type: ignore[assignment]
        stdin.write(f"{steps}\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise SystemExit(f"the loop {self.proc.args!r} ended early: {self.proc.returncode}")
        self._signal(signal.SIGSTOP)
        return float(json.loads(line)["loop_s"])

    def freeze_between_blocks(self) -> None:
        """From now on, stop this process and all its descendants between blocks."""
        me = psutil.Process(self.proc.pid)
        self.tree = [me, *me.children(recursive=True)]

    def _signal(self, sig: int) -> None:
        # SIGSTOP children first and SIGCONT them last: the launcher never sees a
        # child stopped under it while it runs
        order = self.tree[::-1] if sig == signal.SIGSTOP else self.tree
        for p in order:
            try:
                p.send_signal(sig)
            except psutil.Error:
                continue

    def close(self) -> None:
        self._signal(signal.SIGCONT)
        self.tree = []
        stdin: IO[str] = self.proc.stdin  # type: ignore[assignment]
        stdin.write("0\n")
        stdin.flush()
        self.proc.wait(timeout=120)


def take_turns(bare: Server, watched: Server, steps: int, rounds: int) -> list[float]:
    """Watched/bare ratios: each watched block over the mean of its bare neighbours."""
    times: list[tuple[str, float]] = []
    for r in range(rounds):
        order = (bare, watched) if r % 2 == 0 else (watched, bare)  # B W W B B W ...
        for server in order:
            times.append(("b" if server is bare else "w", server.block(steps)))
    ratios = []
    for i, (kind, t) in enumerate(times):
        if kind == "w":
            before = [x for k, x in times[:i] if k == "b"][-1:]
            after = [x for k, x in times[i + 1 :] if k == "b"][:1]
            bares = before + after
            ratios.append(t / (sum(bares) / len(bares)))
    return ratios
