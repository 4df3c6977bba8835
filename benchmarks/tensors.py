"""Cost of tensor capture on a ~2.5 ms/step CPU MLP (benchmarks/_mlp_loop.py).

Compares, in interleaved pairs (medians), the training loop's own time under
`stepscope run` with the default capture (losses every 500 steps) against the
same run with tensor capture off... which does not exist, so against the default
capture with a collection that never saves (`losses` from step 10**9): the
difference is the cost of the capture itself. Then weights + gradients of every
layer every 100 steps (raw tensors), and every 10 steps, against the default.

    python benchmarks/tensors.py --steps 4000 --pairs 5

Anchors: a predecessor's tensor saving every 10 steps cost 1.9x; gradient
histograms in a popular tracker about 2.6x.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from overhead import watched

CONFIGS = {
    "none": '[[debugger.collections]]\nname = "losses"\nstart_step = 1000000000\n',
    "default": "",
    "wg100": "[debugger.hook_parameters]\nsave_interval = 100\n"
    '[[debugger.collections]]\nname = "weights"\n'
    '[[debugger.collections]]\nname = "biases"\n'
    '[[debugger.collections]]\nname = "gradients"\n',
    "wg10": "[debugger.hook_parameters]\nsave_interval = 10\n"
    '[[debugger.collections]]\nname = "weights"\n'
    '[[debugger.collections]]\nname = "biases"\n'
    '[[debugger.collections]]\nname = "gradients"\n',
}


def run(out: str, name: str, i: int, steps: int) -> float:
    config = Path(out) / f"{name}.toml"
    config.write_text(CONFIGS[name])
    return watched(steps, out, f"{name}-{i}", ["--no-rules", "--config", str(config)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--against", default="none", help="the baseline configuration")
    p.add_argument("--configs", nargs="*", default=["default", "wg100", "wg10"])
    a = p.parse_args()
    ratios: dict[str, list[float]] = {c: [] for c in a.configs}
    with tempfile.TemporaryDirectory() as out:
        runs = itertools.count()  # every job of the run gets its own name
        for i in range(a.pairs):
            for name in a.configs:
                base = run(out, a.against, next(runs), a.steps)
                t = run(out, name, next(runs), a.steps)
                ratios[name].append(t / base)
                print(
                    f"pair {i} {name}: {t:.2f} s vs {a.against} {base:.2f} s ratio {t / base:.4f}",
                    flush=True,
                )
    for name, r in ratios.items():
        print(
            f"{name}: median ratio {statistics.median(r):.4f} over {len(r)} pairs "
            f"(min {min(r):.4f}, max {max(r):.4f})"
        )


if __name__ == "__main__":
    main()
