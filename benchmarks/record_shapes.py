"""Cost of ``record_shapes`` (and ``with_flops``) in a detailed window, on CPU.

A small MLP trains one process long; every round profiles a window of ``--steps``
steps with ``torch.profiler`` in each of three settings (plain, record_shapes,
record_shapes + with_flops) and unprofiled, in a rotating order so that all three meet the same
machine load. Per setting it prints the median over rounds of the window's
cost: the steps inside it plus stopping and exporting the trace, in ms, with
the 25th-75th percentile spread, and the median trace size.

    python benchmarks/record_shapes.py --rounds 9 --steps 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

SETTINGS: dict[str, dict[str, bool] | None] = {
    "no profiler": None,
    "plain": {},
    "record_shapes": {"record_shapes": True},
    "shapes+flops": {"record_shapes": True, "with_flops": True},
}


def _steps(model: Any, x: Any, opt: Any, steps: int) -> None:
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()


def _window(
    model: Any, x: Any, opt: Any, steps: int, options: dict[str, bool] | None
) -> tuple[float, int]:
    from torch.profiler import ProfilerActivity, profile

    t0 = time.perf_counter()
    if options is None:  # the same steps, unprofiled: what a window adds to
        _steps(model, x, opt, steps)
        return (time.perf_counter() - t0) * 1e3, 0
    with profile(activities=[ProfilerActivity.CPU], **options) as prof:
        _steps(model, x, opt, steps)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        prof.export_chrome_trace(path)
        size = os.path.getsize(path)
    return (time.perf_counter() - t0) * 1e3, size


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    layers: list[torch.nn.Module] = []
    for _ in range(8):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    x = torch.randn(64, 256)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    names = list(SETTINGS)
    for name in names:  # warm-up: the profiler's first start is slow
        _window(model, x, opt, args.steps, SETTINGS[name])
    took: dict[str, list[float]] = {n: [] for n in names}
    sizes: dict[str, list[int]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            ms, size = _window(model, x, opt, args.steps, SETTINGS[name])
            took[name].append(ms)
            sizes[name].append(size)
    base = statistics.median(took["plain"])
    for name in names:
        q1, med, q3 = statistics.quantiles(took[name], n=4)
        print(
            f"{name:14s} window of {args.steps} steps: median {med:7.1f} ms "
            f"(p25-p75 {q1:.1f}-{q3:.1f}; x{med / base:.2f} plain), "
            f"trace {statistics.median(sizes[name]) / 1e3:.0f} kB"
        )


if __name__ == "__main__":
    main()
