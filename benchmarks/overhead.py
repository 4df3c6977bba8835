"""Overhead of `stepscope run` (default settings) on a ~2.5 ms/step CPU training loop.

Target: training-loop time under `stepscope run` at most 1.005x bare.
Everything that runs by default counts: the agent, the system sampler and the
live rule runner. The loop uses one torch thread by default (``--threads``): a
2.5 ms step, as the issue asks.

Two ways to interleave bare and watched (BENCHMARKS.md says why there are two):

* taking turns (the default): one bare and one watched process of the same loop,
  alive for the whole benchmark, run blocks of steps in turn (B W W B ...) until
  each has trained ``--seconds``; the watched job is stopped while the bare loop
  runs (benchmarks/_turns.py). Median and lower-quartile ratio of the blocks.
* whole runs (``--whole-runs``): bare and watched runs of ``--seconds`` each,
  interleaved B W B ... B, each watched run against the mean of its neighbours.

    python benchmarks/overhead.py --seconds 60
    python benchmarks/overhead.py --whole-runs --seconds 60 --pairs 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _turns import Server, take_turns

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


def turns(seconds: float, block_s: float, extra: list[str]) -> None:
    """The bare and the watched loop take turns until each has trained ``seconds``."""
    steps, per_step = calibrate(block_s)
    rounds = max(int(seconds / block_s), 2)
    loop = [sys.executable, LOOP, "--serve", *THREADS]
    print(f"loop: blocks of {steps} steps ({per_step * 1000:.2f} ms/step bare), {rounds} each")
    with tempfile.TemporaryDirectory() as out:
        bare_loop = Server(loop)
        watched_loop = Server([STEPSCOPE, "run", "-o", out, "--job", "turns", *extra, "--", *loop])
        try:
            warm = max(int(10 / block_s), 1)  # the helpers start and import in these 10 s
            take_turns(bare_loop, watched_loop, steps, warm)
            watched_loop.freeze_between_blocks()
            ratios = take_turns(bare_loop, watched_loop, steps, rounds)
        finally:
            bare_loop.close()
            watched_loop.close()
    q = statistics.quantiles(ratios, n=4)
    print(
        f"median ratio {statistics.median(ratios):.4f} over {rounds} blocks of each "
        f"(quartiles {q[0]:.4f} {q[2]:.4f}, min {min(ratios):.4f}, max {max(ratios):.4f})"
    )


def whole_runs(seconds: float, pairs: int, extra: list[str]) -> None:
    """B W B ... B runs of ``seconds`` each; ratio of each W to its neighbours' mean."""
    steps, per_step = calibrate(seconds)
    print(f"loop: {steps} steps, {per_step * 1000:.2f} ms/step bare (calibration)")
    ratios = []
    with tempfile.TemporaryDirectory() as out:
        before = bare(steps)
        for i in range(pairs):
            # B W B W ... B: each watched run against the mean of the bare runs on
            # either side of it, so that a machine drifting by minutes cancels out.
            w = watched(steps, out, i, extra)
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
        f"median ratio {statistics.median(ratios):.4f} over {pairs} pairs "
        f"(min {min(ratios):.4f}, max {max(ratios):.4f})"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=60, help="training time of each side")
    p.add_argument("--block-seconds", type=float, default=1.0, help="of a turn's block")
    p.add_argument("--whole-runs", action="store_true", help="interleave whole runs instead")
    p.add_argument("--pairs", type=int, default=8, help="of whole runs: watched runs")
    p.add_argument("--extra", nargs="*", default=[], help="extra `stepscope run` options")
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads of the loop (0: torch's default)"
    )
    a = p.parse_args()
    THREADS[1] = str(a.threads)
    if a.whole_runs:
        whole_runs(a.seconds, a.pairs, a.extra)
    else:
        turns(a.seconds, a.block_seconds, a.extra)


if __name__ == "__main__":
    main()
