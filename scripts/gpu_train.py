"""The planted GPU jobs of scripts/gpu-check (the script that recorded ../shared/fixtures/h200).

    python scripts/gpu_train.py KIND STEPS  # KIND: stall, loader, leak, big, tf32, tiny,
                                            # pageable, pinned

Eight ``Linear(4096, 4096)`` layers in fp32, batch 512 (the loader: batch 64), SGD;
20 untimed warm-up steps first, so recorded step ``s`` is loop step ``s - 20``.

* ``stall``: a 0.3 s host ``time.sleep`` before every 50th loop step (recorded 45, 95, ...).
* ``loader``: ``DataLoader(num_workers=0)`` whose ``__getitem__`` burns 0.4 ms of CPU a
  sample: the GPU starves.
* ``leak``: each step keeps a new 100 MB CUDA tensor and sleeps 80 ms outside its parts.
* ``big``: nothing planted, GPU-bound (about 9 ms a step on an H200); its matrix
  multiplies are fp32 on CUDA cores (torch's default: TF32 off), FP32MatMul's case.
* ``tf32``: ``big`` with TF32 allowed (``torch.backends.cuda.matmul.allow_tf32``):
  FP32MatMul's silent twin.
* ``tiny``: two ``Linear(256)``, batch 32: launch-bound (GPUIdleInSteps' case).
* ``pageable``: ``big`` whose step first copies 256 MB of features from pageable host
  memory, blocking (CopiesNotOverlapped's case).
* ``pinned``: the same copy from pinned memory, ``non_blocking`` on a side stream while
  the step before computes (its silent twin: the copies overlap the kernels).

Without CUDA it is a dry run on the CPU: width 64, two layers, a tenth of the steps
(at least 60), 1 MB and a 10 ms sleep a step for the leak, 1 MB of features copied
(nothing to pin, no stream).
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
if kind == "tf32":
    torch.backends.cuda.matmul.allow_tf32 = True


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 10**6

    def __getitem__(self, i):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0004:  # 0.4 ms of CPU per sample
            pass
        return torch.randn(width)


class Feed:
    """256 MB of features a step from the host: pageable and blocking, or pinned and
    copied on a side stream one step ahead (the step waits for its copy only)."""

    def __init__(self, kind, dev):
        size = 64 * 2**20 if dev == "cuda" else 2**18  # float32: 256 MB (1 MB on the CPU)
        self.host = [torch.randn(size) for _ in range(2)]
        self.ahead = kind == "pinned" and dev == "cuda"
        self.dev, self.i = dev, 0
        if self.ahead:
            self.host = [h.pin_memory() for h in self.host]
            self.side = torch.cuda.Stream()
            self.next = self._copy()

    def _copy(self):
        self.i += 1
        with torch.cuda.stream(self.side):
            return self.host[self.i % 2].to(self.dev, non_blocking=True)

    def take(self):
        if not self.ahead:
            return self.host[0].to(self.dev)  # pageable: the host waits for the copy
        torch.cuda.current_stream().wait_stream(self.side)
        got, self.next = self.next, None
        got.record_stream(torch.cuda.current_stream())
        self.next = self._copy()  # overlaps this step's kernels
        return got


def batches():
    if kind != "loader":
        while True:
            yield x
    for b in torch.utils.data.DataLoader(Slow(), batch_size=64, num_workers=0):
        yield b.to(dev, non_blocking=True)


it = batches()
feed = Feed(kind, dev) if kind in ("pageable", "pinned") else None
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
    extra = feed.take().mean() * 0 if feed is not None else 0
    loss = m(next(it)).square().mean() + extra
    opt.zero_grad()
    loss.backward()
    opt.step()
sync()
print(f"LOOP {kind} {steps} {time.perf_counter() - t:.4f}")
