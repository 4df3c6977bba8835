"""Which part of the in-process agent costs the training loop: its hooks or its writers?

One process runs the MLP loop of ``benchmarks/_mlp_loop.py`` under
``stepscope.init()`` (the agent and its threads; no sampler, no rule runner)
and switches one part off and on between blocks (B W W B B W ...), as
``benchmarks/_switched.py`` does for everything:

* ``hooks``: the torch hooks are removed in bare blocks (the writers run);
* ``writers``: the agent's writers skip the flushes that fall due in bare
  blocks (their rows go with the next flush, in a watched block; the hooks
  stay), so watched time carries a run's rate of flushes (_switched.py);
* ``same``: nothing is switched (the A/A noise floor).

Each watched block is divided by the bare blocks beside it, in wall time and in
the training thread's CPU time. Wall time above CPU time is time the training
thread waited: for the GIL, or for a core.

    python benchmarks/overhead_split.py hooks writers --blocks 150 --steps 400
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _mlp_loop import Loop
from _switched import hooks_off, hooks_on, pace_writers, ratios

import stepscope
from stepscope.agent import bootstrap


class Switch:
    """Turns one part of the running agent off (bare blocks) and on again."""

    def __init__(self, agent: Any, part: str) -> None:
        self.agent, self.part = agent, part
        self.watched, _ = pace_writers(agent, held=False)

    def off(self) -> None:
        if self.part == "hooks":
            hooks_off(self.agent)
        elif self.part == "writers":
            self.watched.clear()

    def on(self) -> None:
        self.watched.set()
        if self.part == "hooks":
            hooks_on(self.agent)


def blocks(loop: Loop, switch: Switch, n: int, steps: int) -> list[tuple[str, float, float]]:
    """(side, wall s, training-thread CPU s) of 2n blocks, B W W B B W ..."""
    rows = []
    for r in range(n):
        for side in ("b", "w") if r % 2 == 0 else ("w", "b"):
            if side == "b":
                switch.off()
            c0, t0 = time.thread_time(), time.perf_counter()
            loop.run(steps)
            rows.append((side, time.perf_counter() - t0, time.thread_time() - c0))
            if side == "b":
                switch.on()
    return rows


def measure(part: str, n: int, steps: int) -> None:
    loop = Loop(threads=1)
    loop.run(200)
    with stepscope.init(output=tempfile.mkdtemp(), job=f"split-{part}"):
        loop.run(3000)  # past the first flushes and the imports they do
        rows = blocks(loop, Switch(bootstrap.current(), part), n, steps)
    bare = statistics.mean(x[1] for x in rows if x[0] == "b") / steps
    for k, name in ((1, "wall"), (2, "cpu")):
        rs = ratios([(row[0], row[k]) for row in rows])
        q = statistics.quantiles(rs, n=4)
        print(
            f"{part:8s} {name}: median {statistics.median(rs):.4f}, "
            f"quartiles {q[0]:.4f}-{q[2]:.4f} ({n} blocks a side, {bare * 1e3:.2f} ms/step)"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("parts", nargs="+", choices=["hooks", "writers", "same"])
    p.add_argument("--blocks", type=int, default=150, help="blocks of each side")
    p.add_argument("--steps", type=int, default=400, help="steps per block")
    a = p.parse_args()
    for part in a.parts:
        measure(part, a.blocks, a.steps)


if __name__ == "__main__":
    main()
