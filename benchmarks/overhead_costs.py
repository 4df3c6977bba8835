"""Where the overhead of `stepscope run` goes: CPU of each part, measured directly.

On a noisy shared machine a 0.5% difference in wall time takes dozens of long
pairs to see (benchmarks/overhead.py). This benchmark measures the causes
instead, each with little noise:

* the in-process callbacks, in microseconds per training step: the same tiny
  step (where Python overhead dominates) timed bare and under ``stepscope.init``
  in one process, best of many rounds, interleaved;
* the CPU every other part of stepscope takes while the loop of
  ``benchmarks/_mlp_loop.py`` runs under ``stepscope run`` (default settings),
  in milliseconds of CPU per second of training: the launcher, the sampler, the
  live rule runner, and the agent's threads inside the training process (the
  threads of that process that are neither its main thread nor torch's busy
  compute threads).

    python benchmarks/overhead_costs.py --seconds 60
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

import psutil

HERE = Path(__file__).parent
LOOP = str(HERE / "_mlp_loop.py")
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")
THREADS = ["--threads", "1"]  # torch threads of the MLP loop (--threads)

MICRO = r"""
import json, sys, tempfile, time, torch
from torch import nn
import stepscope
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=4)
loss_fn = nn.CrossEntropyLoss()
def block(n=400):
    t0 = time.perf_counter(); s = 0
    while s < n:
        for x, y in loader:
            opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step(); s += 1
    return (time.perf_counter() - t0) / s * 1e6
bare, watched = [], []
for r in range(int(sys.argv[1])):
    bare.append(block())
    with stepscope.init(output=tempfile.mkdtemp(), job=f"m{r}"):
        block(50)  # roots found, hooks settled
        watched.append(block())
print(json.dumps({"bare_us": min(bare), "watched_us": min(watched)}))
"""


INPROC = r"""
import json, statistics, sys, tempfile
sys.path.insert(0, sys.argv[1])
from _mlp_loop import Loop
import stepscope
blocks, steps, threads = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
loop = Loop(threads=threads)
loop.run(200)  # warm-up
out = tempfile.mkdtemp()
bare, watched = [loop.run(steps)], []
for b in range(blocks):
    with stepscope.init(output=out, job=f"block-{b}"):
        loop.run(20)  # the agent finds the roots, its threads start
        watched.append(loop.run(steps))
    bare.append(loop.run(steps))
ratios = [w / ((bare[i] + bare[i + 1]) / 2) for i, w in enumerate(watched)]
print(json.dumps({"ratios": ratios, "step_ms": statistics.median(bare) / steps * 1e3}))
"""


def in_process(blocks: int, steps: int) -> dict[str, Any]:
    """The MLP loop in blocks, bare and under ``stepscope.init()``, in one process."""
    cmd = [sys.executable, "-c", INPROC, str(HERE), str(blocks), str(steps), THREADS[1]]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def micro(rounds: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", MICRO, str(rounds)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _kind(proc: psutil.Process, launcher: int) -> str:
    line = " ".join(proc.cmdline())
    if proc.pid == launcher:
        return "launcher"
    if "rules.runner" in line:
        return "rule runner"
    if "stepscope.sampler.main" in line:
        return "sampler"
    return "training" if "_mlp_loop" in line else "other"


def cpu_costs(seconds: float, steps_per_s: float) -> dict[str, float]:
    """CPU ms per second of training loop, per part (sampled at 0.5 s)."""
    steps = int(seconds * steps_per_s)
    out = tempfile.mkdtemp()
    cmd = [STEPSCOPE, "run", "-o", out, "--job", "costs", "--", sys.executable, LOOP, *THREADS]
    proc = psutil.Popen([*cmd, "--steps", str(steps)], stdout=subprocess.PIPE, text=True)
    first: dict[tuple[str, int], float] = {}
    last: dict[tuple[str, int], float] = {}
    main_pid = 0
    t_first = t_last = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        for p in [proc, *proc.children(recursive=True)]:
            try:
                kind = _kind(p, proc.pid)
                if kind == "training":
                    main_pid = p.pid
                    for t in p.threads():
                        last[("thread", t.id)] = t.user_time + t.system_time
                else:
                    times = p.cpu_times()
                    last[(kind, p.pid)] = times.user + times.system
            except psutil.Error:
                continue
        # The loop runs once torch is imported: count from the training's 3rd CPU second.
        if not first and sum(v for (k, _), v in last.items() if k == "thread") > 3:
            first, t_first = dict(last), now
        t_last = now
        time.sleep(0.5)
    loop_s = json.loads(proc.stdout.read().strip().splitlines()[-1])["loop_s"]  # type: ignore[union-attr]
    span = t_last - t_first
    costs: dict[str, float] = {}
    for (kind, ident), cpu in last.items():
        used = cpu - first.get((kind, ident), 0.0)
        if kind == "thread":
            # main thread and torch's compute threads are the training itself
            if ident == main_pid or used > 0.5 * span:
                continue
            kind = "agent threads"
        costs[kind] = costs.get(kind, 0.0) + used
    return {"loop_s": loop_s, "span_s": span, **{k: v / span * 1e3 for k, v in costs.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--rounds", type=int, default=15, help="rounds of the in-process A/B")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the MLP loop")
    p.add_argument("--blocks", type=int, default=20, help="watched blocks of the in-process A/B")
    p.add_argument("--block-steps", type=int, default=1500, help="steps per block")
    a = p.parse_args()
    THREADS[1] = str(a.threads)
    m = micro(a.rounds)
    per_step = m["watched_us"] - m["bare_us"]
    print(
        f"in-process callbacks: {per_step:.1f} us/step "
        f"(tiny step {m['bare_us']:.1f} -> {m['watched_us']:.1f} us, best of {a.rounds})"
    )
    ip = in_process(a.blocks, a.block_steps)
    ratio = statistics.median(ip["ratios"])
    print(
        f"in process, MLP loop ({ip['step_ms']:.2f} ms/step): median ratio {ratio:.4f} "
        f"= {(ratio - 1) * ip['step_ms'] * 1e3:+.1f} us/step over {a.blocks} blocks of "
        f"{a.block_steps} steps (min {min(ip['ratios']):.4f}, max {max(ip['ratios']):.4f})",
        flush=True,
    )
    bare = json.loads(
        subprocess.run(
            [sys.executable, LOOP, "--steps", "500", *THREADS], capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    steps_per_s = bare["steps"] / bare["loop_s"]
    costs = cpu_costs(a.seconds, steps_per_s)
    print(f"under stepscope run, {costs.pop('span_s'):.0f} s of the loop:")
    costs.pop("loop_s")
    for kind, ms in sorted(costs.items()):
        print(f"  {kind:14s} {ms:6.2f} ms CPU per s")
    callbacks = per_step * steps_per_s / 1e3
    total = callbacks + sum(costs.values())
    print(f"  {'callbacks':14s} {callbacks:6.2f} ms CPU per s ({steps_per_s:.0f} steps/s)")
    print(f"total {total:.1f} ms CPU per s of training: {total / 10:.2f}% of one core")


if __name__ == "__main__":
    main()
