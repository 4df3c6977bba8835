"""The benchmark's training loop: a CPU MLP of about 2.5 ms per step (one torch thread).

Run as a script, prints one JSON line: steps, and the seconds the training loop
took (measured by the script itself, so stepscope's start-up and shutdown are
not in it). ``Loop`` is the same loop for benchmarks that drive it in process.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn


class Loop:
    """The model, optimizer and data; ``run(steps)`` trains and returns its seconds."""

    def __init__(self, width: int = 512, threads: int = 0) -> None:
        if threads:
            torch.set_num_threads(threads)
        torch.manual_seed(0)
        self.model = nn.Sequential(
            nn.Linear(256, width),
            nn.ReLU(),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, 10),
        )
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        data = torch.utils.data.TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
        self.loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True)
        self.loss_fn = nn.CrossEntropyLoss()

    def run(self, steps: int) -> float:
        done, t0 = 0, time.perf_counter()
        while done < steps:
            for x, y in self.loader:
                self.opt.zero_grad()
                self.loss_fn(self.model(x), y).backward()
                self.opt.step()
                done += 1
                if done == steps:
                    break
        return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args()
    loop = Loop(a.width, a.threads)
    print(json.dumps({"steps": a.steps, "loop_s": loop.run(a.steps)}))


if __name__ == "__main__":
    main()
