"""Overhead of `stepscope run` (default settings) on a ~2.5 ms/step CPU training loop.

Runs the same loop bare and under `stepscope run`, interleaved (bare, watched,
bare, watched, ..., bare), and prints the median ratio of training-loop time of
each watched run to the mean of the two bare runs around it (target: <= 1.005).
Everything that runs by default counts: the agent, the system sampler and the
live rule runner. The loop uses one torch thread by default (``--threads``): a
2.5 ms step, as the issue asks, and runs that vary by ~1% instead of ~6% with
torch's two threads on this 2-core machine (BENCHMARKS.md).

    python benchmarks/overhead.py --seconds 60 --pairs 8
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
LOOP = str(HERE / "_mlp_loop.py")
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")


THREADS = ["--threads", "1"]  # set by --threads in main()


def _loop(cmd: list[str]) -> dict[str, float]:
    out = subprocess.run([*cmd, *THREADS], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def bare(steps: int) -> float:
    return _loop([sys.executable, LOOP, "--steps", str(steps)])["loop_s"]


def watched(steps: int, out: str, job: int | str, extra: list[str]) -> float:
    """Training-loop seconds under `stepscope run` (job `bench-<job>`, or `<job>` if a name)."""
    cmd = [
        STEPSCOPE,
        "run",
        "-o",
        out,
        "--job",
        job if isinstance(job, str) else f"bench-{job}",
        *extra,
        "--",
        sys.executable,
        LOOP,
        "--steps",
        str(steps),
    ]
    return _loop(cmd)["loop_s"]


def calibrate(seconds: float) -> tuple[int, float]:
    """Steps that take ``seconds`` bare, and the measured time per step."""
    t = bare(400)
    per_step = t / 400
    return max(int(seconds / per_step), 400), per_step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--pairs", type=int, default=8, help="watched runs, each between two bare")
    p.add_argument("--extra", nargs="*", default=[], help="extra `stepscope run` options")
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads of the loop (0: torch's default)"
    )
    a = p.parse_args()
    THREADS[1] = str(a.threads)
    steps, per_step = calibrate(a.seconds)
    print(f"loop: {steps} steps, {per_step * 1000:.2f} ms/step bare (calibration)")
    ratios = []
    with tempfile.TemporaryDirectory() as out:
        before = bare(steps)
        for i in range(a.pairs):
            # B W B W ... B: each watched run against the mean of the bare runs on
            # either side of it, so that a machine drifting by minutes cancels out.
            w = watched(steps, out, i, a.extra)
            after = bare(steps)
            ratio = w / ((before + after) / 2)
            ratios.append(ratio)
            print(
                f"pair {i}: bare {before:.2f} s, stepscope {w:.2f} s, bare {after:.2f} s: "
                f"ratio {ratio:.4f}",
                flush=True,
            )
            before = after
    print(
        f"median ratio {statistics.median(ratios):.4f} over {a.pairs} pairs "
        f"(min {min(ratios):.4f}, max {max(ratios):.4f})"
    )


if __name__ == "__main__":
    main()
