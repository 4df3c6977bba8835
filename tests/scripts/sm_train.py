"""A tiny training entry point in the SageMaker style, for tests/test_sagemaker*.py.

It reads its hyperparameters as the platform passes them (``--key value`` and
``SM_HP_*``), trains a small model on the CPU for ``--steps`` steps and writes what
it received to ``$SM_MODEL_DIR/received-<rank>.json``.
"""

import argparse
import json
import os
import time

import torch
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "."))
    args, unknown = p.parse_known_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(64, 16), torch.randint(0, 2, (64,))
    for _ in range(args.steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if args.step_sleep:
            time.sleep(args.step_sleep)
    rank = os.environ.get("RANK", "0")
    received = {
        "args": vars(args),
        "unknown": unknown,
        "env": {k: v for k, v in os.environ.items() if k.startswith("SM_")},
        "world_size": os.environ.get("WORLD_SIZE"),
    }
    with open(os.path.join(args.model_dir, f"received-{rank}.json"), "w") as f:
        json.dump(received, f)


if __name__ == "__main__":
    main()
