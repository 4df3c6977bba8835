"""A small DDP training script (gloo, CPU) for the torchrun tests; run it under torchrun.

Usage: torchrun ... ddp_train.py [--steps N] [--slow-rank R --slow-s X] [--crash-rank R
       --crash-at S]
``--slow-rank`` makes that rank's data loading sleep ``X`` s per batch (a straggler);
``--crash-rank`` makes that rank raise at step ``S``. Rank 0 prints one JSON line at
the end with what it did.
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-s", type=float, default=0.0)
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--crash-at", type=int, default=-1)
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(256, 32, generator=g)
    data = TensorDataset(x, (x.sum(1) > 0).long())
    slow = a.slow_s if rank == a.slow_rank else 0.0

    def collate(batch):  # runs inside the data loader's __next__: counted as data wait
        if slow:
            time.sleep(slow)
        return torch.stack([b[0] for b in batch]), torch.stack([b[1] for b in batch])

    loader = DataLoader(data, batch_size=16, collate_fn=collate)
    steps = 0
    while steps < a.steps:
        for xb, yb in loader:
            if rank == a.crash_rank and steps == a.crash_at:
                raise RuntimeError(f"injected crash at step {steps}")
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            if steps >= a.steps:
                break
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"steps": steps, "world": world, "loss": loss.item()}), flush=True)


if __name__ == "__main__":
    main()
