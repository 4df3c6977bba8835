"""The benchmark's training loop: a CPU MLP of about 2.5 ms per step.

Prints one JSON line: steps, and the seconds the training loop took (measured by
the script itself, so stepscope's start-up and shutdown are not in it).
"""

import argparse
import json
import time

import torch
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(256, a.width),
        nn.ReLU(),
        nn.Linear(a.width, a.width),
        nn.ReLU(),
        nn.Linear(a.width, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
    loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True)
    loss_fn = nn.CrossEntropyLoss()
    steps, t0 = 0, time.perf_counter()
    while steps < a.steps:
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            steps += 1
            if steps == a.steps:
                break
    print(json.dumps({"steps": steps, "loop_s": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
