"""The live-latency benchmark's training: a small CPU MLP with stalls at known times.

    python _stall_loop.py --seconds 240 --step-s 0.05 --stall-s 1.5 --stall-at 12 30 60 ...

Steps of about ``--step-s`` seconds (a tiny model plus a sleep, so the job
leaves the machine's cores mostly to the rest); the first step that begins
``--stall-at`` seconds or more after the script started sleeps ``--stall-s``
seconds more (a planted stall). Prints one JSON line at the end: the steps
that stalled (step number, start time, end time).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=240.0)
    p.add_argument("--step-s", type=float, default=0.05)
    p.add_argument("--stall-s", type=float, default=1.5)
    p.add_argument("--stall-at", type=float, nargs="*", default=[])
    a = p.parse_args()
    t0 = time.time()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randint(0, 2, (16,))
    pending, stalls, step = sorted(a.stall_at), [], 0
    while time.time() - t0 < a.seconds:
        began = time.time()
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        time.sleep(a.step_s)
        if pending and began - t0 >= pending[0]:
            pending.pop(0)
            time.sleep(a.stall_s)
            stalls.append({"step": step, "start": began})
        opt.step()  # the agent's step ends here
        if stalls and stalls[-1]["step"] == step:
            stalls[-1]["end"] = time.time()
        step += 1
    print(json.dumps({"steps": step, "stalls": stalls, "t0": t0}))


if __name__ == "__main__":
    main()
