"""A compute-bound CPU training script for the CPU rules' tests.

Usage: python cpu_train.py [--steps N] [--threads T] [--width W] [--workers K]
       [--slow-data S] [--burn-data S] [--step-sleep S] [--cores C]
``--slow-data`` sleeps and ``--burn-data`` burns CPU for S seconds per sample in
``__getitem__``; ``--step-sleep`` sleeps in Python between backward and the
optimizer step (time in the step's ``other``). ``--cores`` runs the process on
its first C usable cores (``os.sched_setaffinity``, as taskset would). Prints one
JSON line at the end.
"""

import argparse
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    def __init__(self, n: int, width: int, slow: float, burn: float) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, width, generator=g)
        self.y = (self.x.sum(1) > 0).long()
        self.slow, self.burn = slow, burn

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.slow:
            time.sleep(self.slow)
        end = time.process_time() + self.burn
        while self.burn and time.process_time() < end:
            pass
        return self.x[i], self.y[i]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--slow-data", type=float, default=0.0)
    p.add_argument("--burn-data", type=float, default=0.0)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--cores", type=int, default=0)
    a = p.parse_args()
    if a.cores:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: a.cores])
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    w = a.width
    model = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    data = Data(64 * 16, w, a.slow_data, a.burn_data)
    # Persistent workers: an epoch here is 16 batches (~0.5 s), and workers that live
    # less than the sampler's listing period (1 s) are never counted as such.
    persistent = a.workers > 0
    loader = DataLoader(data, batch_size=64, num_workers=a.workers, persistent_workers=persistent)
    steps = 0
    while steps < a.steps:
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            if a.step_sleep:
                time.sleep(a.step_sleep)
            opt.step()
            opt.zero_grad()
            steps += 1
            if steps >= a.steps:
                break
    print(json.dumps({"steps": steps, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
