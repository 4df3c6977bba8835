"""A small deterministic CPU training whose forward runs under ``torch.compile``.

Usage: python compiled.py [--steps N] [--vary] [--break] [--no-compile] [--save PATH]
``--vary`` feeds a batch whose size changes every step (with ``dynamic=False``, so
dynamo recompiles for each new size up to its ``recompile_limit``); ``--break`` prints
from the compiled forward (a graph break). ``--no-compile`` never imports dynamo.
At the end it prints one JSON line: whether ``torch._dynamo`` was imported.
"""

import argparse
import json
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, breaks: bool) -> None:
        super().__init__()
        self.a, self.b, self.breaks = nn.Linear(16, 32), nn.Linear(32, 2), breaks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        if self.breaks:
            print("", end="")  # dynamo cannot trace print: the graph breaks here
        return self.b(h)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--vary", action="store_true")
    p.add_argument("--break", dest="breaks", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--save", default=None)
    args = p.parse_args()
    torch.manual_seed(0)
    model = Net(args.breaks)
    forward = model if args.no_compile else torch.compile(model, backend="eager", dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    for step in range(args.steps):
        n = 4 + step % 12 if args.vary else 8
        x = torch.randn(n, 16, generator=g)
        y = (x.sum(1) > 0).long()
        loss = nn.functional.cross_entropy(forward(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if args.save:
        torch.save(model.state_dict(), args.save)
    print(json.dumps({"dynamo": "torch._dynamo" in sys.modules, "steps": args.steps}))


if __name__ == "__main__":
    main()
