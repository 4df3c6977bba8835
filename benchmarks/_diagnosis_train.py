"""The training script of ``benchmarks/diagnosis.py``: one small, learnable CPU job whose
options plant one problem each (run it under ``stepscope run``).

    python _diagnosis_train.py --steps 300 --stall-every 40 --stall-s 0.6

Healthy by default: an MLP learns a fixed linear labelling of Gaussian inputs (its
loss falls), fed by a DataLoader. ``--seconds S`` ends the training after S seconds
(or ``--steps``, whichever comes first): GPU scenarios need seconds of samples,
however slow the steps. Knobs, all off by default:

--start-s S          sleep S s before the first step (a dataset download)
--read-ms MS         sleep MS ms per sample in ``__getitem__`` (slow storage)
--decode-ms MS       CPU work of MS ms (of CPU time, calibrated at the start) per sample
                     in ``__getitem__`` (decoding)
--workers W          DataLoader workers
--persistent         keep the workers between epochs (``persistent_workers``), with
                     4 batches prefetched each: no restart of the workers every epoch
--stall-every N --stall-s S    a pause of S s after every N-th training step
--save-every N --save-mb MB    a checkpoint after every N-th step: ``torch.save`` of the
                     model and MB MB of optimizer-like state, then fsync (a periodic
                     checkpoint in the loop)
--write-mb MB        write (O_DIRECT, 32 MB at a time) and fsync MB per step in a thread
                     the loop waits for (a checkpoint to storage slower than the step)
--python-ms MS       pure-Python work of MS ms (of CPU time, calibrated at the start) per
                     step outside the model (logging)
--compute N          N matmuls of 256x256 in the model's forward per step (default 2: a
                     model that outweighs the DataLoader's own overhead; 0: data wait is
                     ~20% of a step)
--device-ms MS       the forward waits MS ms (sleeps) per step, as a loop waits for its
                     GPU's kernels: a step that leaves the CPU idle
--lr LR              0 leaves the loss where it started
--model sigmoid      12 sigmoid layers: the first layers' gradients vanish
--task regress --lr 10    the loss overflows to inf, then NaN
--straggle-ms MS     rank 1 of a torchrun job waits MS ms more per batch
--hold-gb GB         keep GB of memory allocated and touched
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import threading
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

DIM = 32
# Empty loop iterations a ms of CPU, measured at the start (calibrate()) for --decode-ms and
# --python-ms: the fixed 39,000 made 1 "ms" 0.43 ms here (issue 30).
ITERATIONS_PER_MS, CALIBRATION_CPU_MS = 39_000.0, 50.0
# Written, not generated, per step: the disk is the bottleneck. Page-aligned (an
# anonymous mmap), as O_DIRECT needs: the writes wait for the device, not for a copy
# into the page cache (CPU work that would hide the wait).
BLOCK_MB = 32
BLOCK = mmap.mmap(-1, BLOCK_MB * 2**20)
BLOCK.write(os.urandom(BLOCK_MB * 2**20))


class Points(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, n: int, a: argparse.Namespace, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, DIM, generator=g)
        w = torch.randn(DIM, 4, generator=torch.Generator().manual_seed(99))
        self.y = (self.x @ w).argmax(1)  # learnable: a fixed linear labelling
        if a.task == "regress":
            self.y = self.x.sum(1, keepdim=True).repeat(1, 4)  # type: ignore[assignment]
        self.read_s, self.decode_ms = a.read_ms / 1000, a.decode_ms
        self.per_ms = ITERATIONS_PER_MS  # calibrated by then; travels to spawned workers
        rank = int(os.environ.get("RANK", "0"))
        if rank == 1:
            self.read_s += a.straggle_ms / 1000 / a.batch

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.read_s:
            time.sleep(self.read_s)
        if self.decode_ms:
            busy(self.decode_ms, self.per_ms)
        return self.x[i], self.y[i]


def busy(ms: float, per_ms: float | None = None) -> None:
    """``ms`` ms of CPU work (``per_ms`` iterations a ms, by default the calibrated
    count): a fixed amount of work, not of time: it slows down under load as work does."""
    for _ in range(int(ms * (per_ms or ITERATIONS_PER_MS))):
        pass


def calibrate(cpu_ms: float = CALIBRATION_CPU_MS) -> float:
    """Empty loop iterations per ms of this thread's CPU time, counted over ``cpu_ms``
    ms of it: CPU time, not wall time, so a loaded machine does not shrink the count."""
    count, chunk, t0 = 0, 10_000, time.thread_time()
    while (spent := time.thread_time() - t0) < cpu_ms / 1000:
        for _ in range(chunk):
            pass
        count += chunk
    return count / (spent * 1000)


class Heavy(nn.Module):
    """The model plus ``compute`` matmuls of 256x256 in its forward: the model's own
    work (forward time), not the loop's, as a larger model's layers would be."""

    def __init__(self, model: nn.Module, compute: int, device_s: float = 0.0) -> None:
        super().__init__()
        self.model, self.compute, self.device_s = model, compute, device_s
        self.register_buffer("weights", torch.randn(256, 256) / 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():  # work of the forward that leaves the gradients alone
            w = self.weights
            for _ in range(self.compute):
                w = torch.tanh(w @ w)
        if self.device_s:
            time.sleep(self.device_s)
        out: torch.Tensor = self.model(x)
        return out


def build(a: argparse.Namespace) -> nn.Module:
    return Heavy(_layers(a), a.compute, a.device_ms / 1000.0)


def _layers(a: argparse.Namespace) -> nn.Module:
    if a.model == "sigmoid":  # gradients vanish through many saturating layers
        layers: list[nn.Module] = []
        for _ in range(12):
            layers += [nn.Linear(DIM, DIM), nn.Sigmoid()]
        return nn.Sequential(*layers, nn.Linear(DIM, 4))
    return nn.Sequential(
        nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)
    )


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    for name, default in (
        ("--steps", 300), ("--batch", 32), ("--workers", 0), ("--stall-every", 0),
        ("--eval-every", 0), ("--compute", 2), ("--threads", 0), ("--seconds", 0),
        ("--save-every", 0),
    ):  # fmt: skip
        p.add_argument(name, type=int, default=default)
    for name in ("--start-s", "--read-ms", "--decode-ms", "--stall-s", "--write-mb", "--save-mb",
                 "--python-ms", "--straggle-ms", "--hold-gb", "--device-ms"):  # fmt: skip
        p.add_argument(name, type=float, default=0.0)
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--model", default="mlp", choices=("mlp", "sigmoid"))
    p.add_argument("--task", default="classify", choices=("classify", "regress"))
    return p.parse_args()


def step_extras(a: argparse.Namespace, step: int, folder: str, model: nn.Module) -> None:
    """The planted per-step work besides forward, backward and optimizer."""
    if a.save_every and step % a.save_every == 0:
        checkpoint(model, a.save_mb, os.path.join(folder, "checkpoint.pt"))
    if a.python_ms:
        busy(a.python_ms)
    if a.write_mb:
        # A checkpoint written by a thread of its own, as torch.distributed.checkpoint's
        # async save does; the loop waits for it (its storage is slower than a step).
        writer = threading.Thread(target=write, args=(folder, 0, a.write_mb))
        writer.start()
        writer.join()
    if a.stall_every and step % a.stall_every == 0:
        time.sleep(a.stall_s)


def checkpoint(model: nn.Module, mb: float, path: str) -> None:
    """``torch.save`` of the model and ``mb`` MB of state, then fsync, as a periodic
    checkpoint does: a stall of serialising (CPU) and of writing (disk)."""
    state = torch.full((int(mb * 2**18),), 0.5)  # float32: 4 bytes; fresh, as moments are
    torch.save({"model": model.state_dict(), "state": state}, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(folder: str, shard: int, mb: float) -> None:
    """``mb`` MB to the disk: O_DIRECT where the file system takes it (else through the
    page cache), then fsync: the thread waits for the device (disk sleep)."""
    path, flags = os.path.join(folder, f"shard-{shard}.bin"), os.O_WRONLY | os.O_CREAT
    try:
        fd = os.open(path, flags | os.O_TRUNC | getattr(os, "O_DIRECT", 0))
    except OSError:  # tmpfs and some others refuse O_DIRECT
        fd = os.open(path, flags | os.O_TRUNC)
    try:
        # Large writes, as checkpoint writers make: the thread waits for the device
        # (disk sleep) for most of each, and seldom runs (or waits for a core).
        for _ in range(max(int(mb) // BLOCK_MB, 1)):
            os.write(fd, BLOCK)
        os.fsync(fd)
    finally:
        os.close(fd)


def evaluate(model: nn.Module, val: DataLoader[tuple[torch.Tensor, torch.Tensor]]) -> None:
    model.eval()
    with torch.no_grad():
        for x, _ in val:
            model(x)
    model.train()


def main() -> None:
    global ITERATIONS_PER_MS
    a = parse()
    if a.decode_ms or a.python_ms:
        ITERATIONS_PER_MS = calibrate()
        print(f"busy(): calibrated {ITERATIONS_PER_MS:,.0f} loop iterations a ms of CPU "
              f"(over {CALIBRATION_CPU_MS:g} ms): --decode-ms/--python-ms are CPU ms")  # fmt: skip
    torch.manual_seed(0)
    if a.threads:
        torch.set_num_threads(a.threads)
    held = torch.ones(int(a.hold_gb * 2**28)) if a.hold_gb else None  # float32: 4 bytes
    time.sleep(a.start_s)
    model = build(a)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    loss_fn = nn.MSELoss() if a.task == "regress" else nn.CrossEntropyLoss()
    kept = {"persistent_workers": True, "prefetch_factor": 4} if a.persistent else {}
    loader = DataLoader(
        Points(4096, a, 0), batch_size=a.batch, shuffle=True, num_workers=a.workers, **kept
    )
    val = DataLoader(Points(256, a, 1), batch_size=64)
    step, end = 0, time.monotonic() + (a.seconds or float("inf"))
    with tempfile.TemporaryDirectory(prefix="diagnosis-") as folder:
        while step < a.steps and time.monotonic() < end:
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
                step += 1
                step_extras(a, step, folder, model)
                if a.eval_every and step % a.eval_every == 0:
                    evaluate(model, val)
                if step == a.steps or time.monotonic() > end:
                    break
    del held


if __name__ == "__main__":
    main()
