"""Instructions per training step, bare and under the agent: a noise-free count.

Wall time on a shared 2-core machine moves by more than the 0.5% the agent may
cost (benchmarks/overhead.py), so this benchmark counts CPU instructions with
valgrind's callgrind instead: the same loop, in the same process layout, bare
and with ``stepscope.init()`` (default configuration), counted only inside the
measured loop (``--toggle-collect`` on a C function that wraps nothing else),
on the training thread only (``--separate-threads``), with garbage collection
off in that region (a collection runs on whichever thread crosses the
allocation threshold, which the agent's threads move). Repeated runs of the
same code agree to ~100 instructions a step. Instructions are not seconds (torch's
kernels retire more of them per cycle than the interpreter does), so this says
what the callbacks cost, and the wall-time benchmark says what a user sees.

    python benchmarks/step_instructions.py            # needs valgrind (Debian: valgrind)

Loops: ``tiny`` (an MLP of 8 units, batch 4: almost all Python, the worst case
for per-step callbacks; the default) and ``mlp`` (benchmarks/_mlp_loop.py's
2.5 ms step). Under valgrind a step takes ~50x longer in wall time, so the
agent's threads, which wake on wall time, switch in ~50x more often per step:
the ``mlp`` count overstates what a native run pays (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

LOOP = r"""
import functools, gc, sys, tempfile, torch
from torch import nn
mode, width, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
torch.manual_seed(0)
n_in = 8 if width <= 8 else 256
model = nn.Sequential(nn.Linear(n_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                      nn.Linear(width, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(4096, n_in), torch.randint(0, 10, (4096,)))
loader = torch.utils.data.DataLoader(data, batch_size=4 if width <= 8 else 64, shuffle=True)
loss_fn = nn.CrossEntropyLoss()
def loop(n):
    s = 0
    while s < n:
        for x, y in loader:
            opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step(); s += 1
            if s == n:
                return
session = None
if mode == "agent":
    import stepscope
    session = stepscope.init(output=tempfile.mkdtemp(), job="instructions")
loop(10)  # warm-up: the interpreter specialises, the agent finds the roots
# No garbage collection in the counted region: a collection runs on whichever
# thread crosses the allocation threshold, which the agent's threads move.
gc.disable()
functools.reduce(lambda a, b: loop(steps), [0, 1])  # the counted region
gc.enable()
if session is not None:
    session.__exit__(None, None, None)
"""


def count(mode: str, width: int, steps: int) -> int:
    """Instructions callgrind collected inside the measured loop."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            "--separate-threads=yes",
            f"--callgrind-out-file={tmp}/cg.out",
            sys.executable,
            "-c",
            LOOP,
            mode,
            str(width),
            str(steps),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict layouts in both runs
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"valgrind failed ({out.returncode}):\n{out.stderr[-2000:]}")
        # Thread 1 only: the agent's threads wake on wall time, which valgrind and a
        # loaded machine stretch; what the training thread runs does not depend on it.
        with open(f"{tmp}/cg.out-01") as f:
            found = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
        if not found:
            raise SystemExit("callgrind wrote no total for the training thread")
        return int(found.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--loops", nargs="*", default=["tiny"], choices=["tiny", "mlp"])
    p.add_argument("--steps", type=int, default=200, help="counted steps of the tiny loop")
    p.add_argument("--mlp-steps", type=int, default=20, help="of the mlp loop (slow here)")
    a = p.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found: apt-get install -y valgrind")
    widths = {"tiny": 8, "mlp": 512}
    for name in a.loops:
        width, steps = widths[name], a.steps if name == "tiny" else a.mlp_steps
        with ThreadPoolExecutor(2) as pool:  # the two runs side by side
            runs = [pool.submit(count, mode, width, steps) for mode in ("bare", "agent")]
            bare, agent = (run.result() for run in runs)
        per_bare, per_agent = bare / steps, agent / steps
        print(
            f"{name}: bare {per_bare:,.0f} instructions/step, agent {per_agent:,.0f}: "
            f"+{per_agent - per_bare:,.0f} (ratio {per_agent / per_bare:.4f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
