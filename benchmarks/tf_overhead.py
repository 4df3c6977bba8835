"""Overhead of `stepscope run` (default settings) on a small Keras MLP: ``fit`` and a custom
loop (issue 23). Target: training time watched at most 1.01x bare.

Whole runs, interleaved B W B W ... B per mode; each watched run is divided by the mean
of its two bare neighbours; the median and quartiles of those ratios are printed.
The timed part is the training after a warm-up (benchmarks/_tf_train.py), so TensorFlow's
import and tracing are not in it.

    python benchmarks/tf_overhead.py --pairs 6 --steps 2000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
TRAIN = str(HERE / "_tf_train.py")
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")


def _run(cmd: list[str]) -> float:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["loop_s"])


def bare(mode: str, steps: int) -> float:
    return _run([sys.executable, TRAIN, "--mode", mode, "--steps", str(steps)])


def watched(mode: str, steps: int, out: str, i: int) -> float:
    cmd = [STEPSCOPE, "run", "-o", out, "--job", f"{mode}-{i}", "--", sys.executable, TRAIN]
    return _run([*cmd, "--mode", mode, "--steps", str(steps)])


def measure(mode: str, steps: int, pairs: int) -> dict[str, object]:
    """Ratios of watched runs to their bare neighbours, B W B W ... B."""
    with tempfile.TemporaryDirectory() as out:
        bares = [bare(mode, steps)]
        ratios, watch = [], []
        for i in range(pairs):
            w = watched(mode, steps, out, i)
            bares.append(bare(mode, steps))
            watch.append(w)
            ratios.append(w / ((bares[-2] + bares[-1]) / 2))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "mode": mode,
        "steps": steps,
        "median_ratio": round(statistics.median(ratios), 4),
        "quartiles": [round(q[0], 4), round(q[2], 4)],
        "bare_s": round(statistics.median(bares), 3),
        "watched_s": round(statistics.median(watch), 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--modes", default="fit,loop")
    a = p.parse_args()
    for mode in a.modes.split(","):
        print(json.dumps(measure(mode, a.steps, a.pairs)), flush=True)


if __name__ == "__main__":
    main()
