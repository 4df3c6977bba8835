"""The ``train.py`` of the docs' examples (tests/test_docs_run.py): a small CPU model
with ``layer1``..``layer3``, 110 steps of about 5 ms and an evaluation every 50 steps.
It takes, and ignores, any argument the docs pass (``--lr 0.1``, ``--epochs 3``)."""

import argparse
import time

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer1, self.layer2, self.layer3 = (
            nn.Linear(16, 32),
            nn.Linear(32, 32),
            nn.Linear(32, 2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer3(torch.relu(self.layer2(torch.relu(self.layer1(x)))))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=110)
    args, _ = p.parse_known_args()
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 16), torch.randint(0, 2, (64,))
    for step in range(args.steps):
        model.train()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        time.sleep(0.005)
        opt.step()
        if step % 50 == 49:
            model.eval()
            with torch.no_grad():
                loss_fn(model(x), y)


if __name__ == "__main__":
    main()
