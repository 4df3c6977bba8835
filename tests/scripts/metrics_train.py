"""A small training with evaluation steps that runs until told to stop, for tests that
watch a job while it trains (tests/test_prometheus.py).

Usage: python metrics_train.py [--steps N | --until FILE] [--step-sleep S]
Trains in rounds of 10 training steps and 2 evaluation steps, sleeping S seconds
per step; with ``--until``, stops after the first round that ends once FILE exists
(at most 2000 rounds). Prints one JSON line: the steps trained and a digest of the
weights, to compare a watched run with a bare one of the same steps bit for bit.
"""

import argparse
import hashlib
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ROUND = 10


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--until", default="")
    p.add_argument("--step-sleep", type=float, default=0.05)
    a = p.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 32, generator=g)
    y = (x.sum(1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    steps = 0
    while steps < (a.steps or 2000 * ROUND):
        for xb, yb in loader:
            loss_fn(model(xb), yb).backward()
            time.sleep(a.step_sleep)
            opt.step()
            opt.zero_grad()
            steps += 1
            if steps % ROUND == 0:
                break
        model.eval()
        with torch.no_grad():
            for xb, _ in list(loader)[:2]:
                model(xb)
                time.sleep(a.step_sleep)
        model.train()
        if a.until and os.path.exists(a.until):
            break
    digest = hashlib.sha256(b"".join(t.detach().numpy().tobytes() for t in model.parameters()))
    print(json.dumps({"steps": steps, "weights": digest.hexdigest()}))


if __name__ == "__main__":
    main()
