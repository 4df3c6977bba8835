"""The planted GPU jobs of scripts/gpu-check (the script that recorded ../shared/fixtures/h200).

    python scripts/gpu_train.py KIND STEPS      # KIND: stall, loader, leak, big, tiny

Eight ``Linear(4096, 4096)`` layers in fp32, batch 512 (the loader: batch 64), SGD;
20 untimed warm-up steps first, so recorded step ``s`` is loop step ``s - 20``.

* ``stall``: a 0.3 s host ``time.sleep`` before every 50th loop step (recorded 45, 95, ...).
* ``loader``: ``DataLoader(num_workers=0)`` whose ``__getitem__`` burns 0.4 ms of CPU a
  sample: the GPU starves.
* ``leak``: each step keeps a new 100 MB CUDA tensor and sleeps 80 ms outside its parts.
* ``big``: nothing planted, GPU-bound (about 9 ms a step on an H200).
* ``tiny``: two ``Linear(256)``, batch 32: launch-bound.

Without CUDA it is a dry run on the CPU: width 64, two layers, a tenth of the steps
(at least 60), 1 MB and a 10 ms sleep a step for the leak.
"""

import sys
import time

import torch

kind, steps = sys.argv[1], int(sys.argv[2])
width, depth, batch = (4096, 8, 512) if kind != "tiny" else (256, 2, 32)
dev = "cuda" if torch.cuda.is_available() else "cpu"
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
if dev == "cpu":
    width, depth, steps = 64, 2, max(steps // 10, 60)
m = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)]).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=1e-4)
x = torch.randn(batch, width, device=dev)
hoard = []


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 10**6

    def __getitem__(self, i):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0004:  # 0.4 ms of CPU per sample
            pass
        return torch.randn(width)


def batches():
    if kind != "loader":
        while True:
            yield x
    for b in torch.utils.data.DataLoader(Slow(), batch_size=64, num_workers=0):
        yield b.to(dev, non_blocking=True)


it = batches()
for _ in range(20):  # warm-up, recorded too: steps 0-19
    loss = m(next(it)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
sync()
t = time.perf_counter()
for step in range(steps):
    if kind == "stall" and step % 50 == 25:
        time.sleep(0.3)  # host stall: the GPU idles
    if kind == "leak":
        size = 100 * 2**20 if dev == "cuda" else 2**20
        hoard.append(torch.empty(size, dtype=torch.uint8, device=dev).fill_(1))
        time.sleep(0.08 if dev == "cuda" else 0.01)  # a dry run's verdicts are not judged
    loss = m(next(it)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
sync()
print(f"LOOP {kind} {steps} {time.perf_counter() - t:.4f}")
