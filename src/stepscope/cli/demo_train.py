"""The demo training job of ``stepscope demo``: a small CNN on synthetic images.

About 20 s on a laptop CPU: a data loader with a little decoding work, an
evaluation every 50 steps, and one deliberately slow step (a "checkpoint") so
that the rules have something to find.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 1, 28, 28, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i] * 0.5 + 0.1, self.y[i]  # "decoding"


def model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 7 * 7, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def main(steps: int = 300) -> None:
    torch.manual_seed(0)
    net, loss_fn = model(), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    train = DataLoader(Images(2048), batch_size=32, shuffle=True)
    val = DataLoader(Images(256), batch_size=64)
    step = 0
    while step < steps:
        for x, y in train:
            net.train()
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            step += 1
            if step == steps // 2:
                time.sleep(1.0)  # a slow "checkpoint": StepOutlier should notice
            if step % 50 == 0:
                net.eval()
                with torch.no_grad():
                    acc = sum((net(vx).argmax(1) == vy).sum().item() for vx, vy in val) / 256
                print(f"step {step:4d}  loss {loss.item():.3f}  val acc {acc:.2f}", flush=True)
            if step == steps:
                break


if __name__ == "__main__":
    main()
