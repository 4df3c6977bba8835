"""The demo training job of ``stepscope demo``: a small CNN on synthetic images.

About 25 s on a laptop CPU, with three problems planted for the rules to find
(``stepscope demo`` configures the rules that name them, see ``_demo.RULES``):

* a slow start: the dataset is "downloaded and indexed" for ``SLOW_START_S``
  seconds before the first step (MaxInitializationTime);
* a starving data loader: every sample is read from "slow storage" (``READ_S``
  per sample) in the training loop's own process, ``num_workers=0``, so most of
  each training step waits for data (DataLoading);
* a slow checkpoint every ``CHECKPOINT_EVERY`` training steps, written to "slow
  storage" (``CHECKPOINT_S``) inside the next training step (StepOutlier).

``python -m stepscope.cli.demo_train --fixed`` runs the same job with the three
problems fixed (data and checkpoints on fast local storage, no preparation): the
demo's rules find nothing in it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

STEPS = 200
EVAL_EVERY = 50
CHECKPOINT_EVERY = 45  # never a multiple of EVAL_EVERY: the pause lands in a training step
CHECKPOINT_S = 0.8
READ_S = 0.0008  # per sample: 26 ms+ a batch of 32, several times the step's compute
# The planted slow start is a wait (a download), over the demo's threshold alone
# (_demo.RULES: 6 s), whatever the machine; the fixed job's start is CPU work (Python,
# torch's import: 2 to 3 s of CPU), and MaxInitializationTime leaves out the time it
# waits for a core on a busy machine (7 to 19 s of wall time measured at a load of 10).
SLOW_START_S = 8.0


class Images(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Synthetic images; ``read_s`` is the time one sample takes to read."""

    def __init__(self, n: int, read_s: float = 0.0) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 1, 28, 28, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.read_s = read_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.read_s:
            time.sleep(self.read_s)  # a read from a network file system, one sample at a time
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


def prepare_data(seconds: float) -> None:
    """Planted slow start: a download and index of the dataset before the first step."""
    print(f"preparing the dataset ({seconds:g} s)...", flush=True)
    time.sleep(seconds)


def checkpoint(net: nn.Module, folder: str, step: int, upload_s: float) -> None:
    """Planted periodic slow step: a checkpoint on slow storage, in the training loop."""
    torch.save(net.state_dict(), os.path.join(folder, "last.pt"))
    time.sleep(upload_s)  # the upload's latency
    print(f"step {step:4d}  checkpoint saved", flush=True)


def evaluate(net: nn.Module, val: DataLoader[tuple[torch.Tensor, torch.Tensor]]) -> float:
    net.eval()
    with torch.no_grad():
        right = sum(int((net(vx).argmax(1) == vy).sum().item()) for vx, vy in val)
    net.train()
    return right / len(val.dataset)  # type: ignore[arg-type]


def main(steps: int = STEPS, fixed: bool = False) -> None:
    """Train the demo model; ``fixed`` removes the three planted problems."""
    torch.manual_seed(0)
    # One thread: this small model gains nothing from more, and several threads that
    # wait for each other make every step slow and noisy when the machine is busy.
    torch.set_num_threads(1)
    prepare_data(0.0 if fixed else SLOW_START_S)
    net, loss_fn = model(), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    read_s = 0.0 if fixed else READ_S
    train = DataLoader(Images(2048, read_s), batch_size=32, shuffle=True, num_workers=0)
    val = DataLoader(Images(256), batch_size=64)
    step = 0
    with tempfile.TemporaryDirectory(prefix="stepscope-demo-") as folder:
        while step < steps:
            for x, y in train:
                opt.zero_grad()
                loss = loss_fn(net(x), y)
                loss.backward()
                opt.step()
                step += 1
                if step % CHECKPOINT_EVERY == 0:
                    checkpoint(net, folder, step, 0.0 if fixed else CHECKPOINT_S)
                if step % EVAL_EVERY == 0:
                    acc = evaluate(net, val)
                    print(f"step {step:4d}  loss {loss.item():.3f}  val acc {acc:.2f}", flush=True)
                if step == steps:
                    break


if __name__ == "__main__":
    main(fixed="--fixed" in sys.argv[1:])
