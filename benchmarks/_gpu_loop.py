"""The GPU benchmark's training loops (benchmarks/gpu_overhead.py): launch-bound and GPU-bound.

* ``launch``: two ``Linear(256, 256)`` layers, batch 32, SGD: the host's kernel
  launches bound the step (about 0.8 ms on an H200), as in issue 29.
* ``gpu``: eight ``Linear(4096, 4096)`` layers in fp32, batch 512, SGD: the device
  bounds the step (about 9 ms on an H200), as the fixtures' ``healthy`` job.

Data is made on the device once: the loop measures the step, not a loader.
``run(steps)`` synchronizes before and after, so a block's time holds its device work.
"""

from __future__ import annotations

import time

import torch
from torch import nn

KINDS = {"launch": (256, 2, 32), "gpu": (4096, 8, 512)}  # width, layers, batch


class GpuLoop:
    """One model on the GPU; ``run(steps)`` trains and returns its seconds."""

    def __init__(self, kind: str, device: str = "cuda") -> None:
        width, layers, batch = KINDS[kind]
        torch.manual_seed(0)
        self.model = nn.Sequential(*(nn.Linear(width, width) for _ in range(layers))).to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-4)
        self.x = torch.randn(batch, width, device=device)
        self.y = torch.randn(batch, width, device=device)
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        self.loss_fn = nn.MSELoss()

    def run(self, steps: int) -> float:
        self.sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            self.opt.zero_grad()
            self.loss_fn(self.model(self.x), self.y).backward()
            self.opt.step()
        self.sync()
        return time.perf_counter() - t0

    def calibrate(self, block_s: float) -> tuple[int, float]:
        """Steps per block of about ``block_s`` seconds, and seconds per step."""
        self.run(50)  # warm-up: kernels, allocator
        per_step = self.run(200) / 200
        return max(20, int(block_s / per_step)), per_step
