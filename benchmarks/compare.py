"""Benchmark: is ``stepscope compare`` honest under noise (issue 34)?

    python benchmarks/compare.py [--pairs 20] [--runs 1] [--condition quiet|hog|both] [--out DIR]

Per pair, three sides of ``--runs K`` real short trainings each (tests/scripts/cpu_train.py
under ``stepscope run``), one after another so that the host's load drifts over the pair
as it would between CI runs: a baseline, a rerun of the same command, and a run with a
planted ``time.sleep`` of 10% of the first baseline run's median step per step. With
K > 1 the runs are interleaved in rounds (one run of each side per round, the order
rotated each round so that no side is always the first or the last to run) and each
side is given to compare as its K runs (``A1,A2 B1,B2``). Then:

* **noise**: baseline vs rerun should be "no difference" (the target: 19 of 20 pairs);
* **sensitivity**: baseline vs planted should be "slower" (19 of 20), mostly ``other``.

Under ``hog`` one busy process per usable core runs for the whole condition (always
stopped, also on Ctrl-C). Prints the rates per condition and writes compare.json in DIR.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRAIN = HERE.parent / "tests" / "scripts" / "cpu_train.py"
BIN = Path(sys.executable).parent
ARGS = ["--steps", "150", "--threads", "1", "--width", "768"]
PLANTED = 0.10  # the planted slowdown: a sleep of this share of the baseline's median step


def _burn() -> None:
    while True:
        pass


@contextmanager
def hog(on: bool) -> Iterator[None]:
    """One busy process per usable core while the block runs (none when ``on`` is false)."""
    cores = len(os.sched_getaffinity(0)) if on else 0
    procs = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(cores)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def run(out: Path, job: str, *extra: str) -> Path:
    cmd = [str(BIN / "stepscope"), "run", "-o", str(out), "--job", job, "--",
           sys.executable, str(TRAIN), *ARGS, *extra]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    return out / job


def compare(a: list[Path], b: list[Path]) -> dict[str, Any]:
    sides = [",".join(map(str, side)) for side in (a, b)]
    cmd = [str(BIN / "stepscope"), "compare", *sides, "--json"]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    phase: dict[str, Any] = json.loads(done.stdout)[0]["phases"][0]
    return phase


def pair(out: Path, i: int, runs: int) -> dict[str, Any]:
    sides: dict[str, list[Path]] = {"base": [], "rerun": [], "planted": []}
    median = 0.0
    for r in range(runs):
        order = list(sides)[r % 3 :] + list(sides)[: r % 3]  # round 0: the baseline first
        for side in order:
            extra = ["--step-sleep", f"{PLANTED * median:.5f}"] if side == "planted" else []
            sides[side].append(run(out, f"{side}-{i}-{r}" if runs > 1 else f"{side}-{i}", *extra))
            if side == "base" and not median:
                median = compare(sides["base"][:1], sides["base"][:1])["base_median"]
    noise, change = compare(sides["base"], sides["rerun"]), compare(sides["base"], sides["planted"])
    return {
        "pair": i,
        "runs": runs,
        "base_median_s": median,
        "noise": {k: noise[k] for k in ("direction", "verdict", "ratio", "runs")},
        "planted": {k: change[k] for k in ("direction", "mostly", "verdict", "ratio", "runs")},
    }


def condition(name: str, pairs: int, runs: int, out: Path) -> dict[str, Any]:
    rows = []
    with hog(name == "hog"):
        for i in range(pairs):
            rows.append(pair(out / name, i, runs))
            r = rows[-1]
            print(f"{name} {i}: noise {r['noise']['verdict']} | planted {r['planted']['verdict']}",
                  flush=True)  # fmt: skip
    quiet = sum(r["noise"]["direction"] == "same" for r in rows)
    found = sum(r["planted"]["direction"] == "slower" for r in rows)
    named = sum(r["planted"]["mostly"] == "other" for r in rows)
    return {"condition": name, "pairs": pairs, "runs": runs, "no_difference": quiet,
            "slower_found": found, "named_other": named, "rows": rows}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=20, help="pairs per condition (default 20)")
    p.add_argument("--runs", type=int, default=1,
                   help="runs a side: K baseline, rerun, planted runs (default 1)")  # fmt: skip
    p.add_argument("--condition", choices=("quiet", "hog", "both"), default="both",
                   help="quiet host, a CPU hog per core, or both (default both)")  # fmt: skip
    p.add_argument("--out", help="folder for the jobs and compare.json (default: a temp dir)")
    a = p.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="compare-bench-"))
    names = ("quiet", "hog") if a.condition == "both" else (a.condition,)
    if a.runs < 1 or a.pairs < 1:
        p.error("--pairs and --runs take a number >= 1")
    results = [condition(n, a.pairs, a.runs, out) for n in names]
    for r in results:
        n = r["pairs"]
        print(f"{r['condition']}, {r['runs']} run(s) a side: "
              f"no difference in {r['no_difference']} of {n} identical pairs; "
              f"slower found in {r['slower_found']} of {n} planted +{100 * PLANTED:.0f}% pairs "
              f"(named other: {r['named_other']})")  # fmt: skip
    (out / "compare.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {out / 'compare.json'}")


if __name__ == "__main__":
    main()
