"""A small DDP training script (gloo, CPU) for the torchrun tests; run it under torchrun.

Usage: torchrun ... ddp_train.py [--steps N] [--slow-rank R --slow-s X [--slow-in W]]
       [--crash-rank R --crash-at S] [--allreduce-loss] [--abrupt-rank R --abrupt END]
``--slow-rank`` makes that rank sleep ``X`` s per step (a straggler) in its data loading
(``--slow-in data``, the default) or in its backward compute (``--slow-in backward``: a
gradient hook, before DDP's all-reduce of that gradient, where every rank's backward
takes as long); ``--crash-rank`` makes that rank raise at step ``S``;
``--allreduce-loss`` sums the loss over the ranks after every step (a collective
called from Python); ``--abrupt-rank`` makes that rank end, after the last
collective, as no agent sees (``--abrupt exit0``: ``os._exit(0)``; ``sigkill``: it
kills itself). Rank 0 prints one JSON line at the end with what it did.
"""

import argparse
import json
import os
import signal
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
    p.add_argument("--slow-in", choices=("data", "backward"), default="data")
    p.add_argument("--allreduce-loss", action="store_true")
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--crash-at", type=int, default=-1)
    p.add_argument("--abrupt-rank", type=int, default=-1)
    p.add_argument("--abrupt", choices=("exit0", "sigkill"), default="exit0")
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
    if slow and a.slow_in == "backward":
        first = model.module[0].weight  # its gradient is the last one computed
        first.register_hook(lambda grad: time.sleep(slow))

    def collate(batch):  # runs inside the data loader's __next__: counted as data wait
        if slow and a.slow_in == "data":
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
            if a.allreduce_loss:
                dist.all_reduce(loss.detach())  # summed: gloo has no AVG
            steps += 1
            if steps >= a.steps:
                break
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"steps": steps, "world": world, "loss": loss.item()}), flush=True)
    if rank == a.abrupt_rank and a.abrupt == "exit0":
        os._exit(0)
    if rank == a.abrupt_rank:
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
