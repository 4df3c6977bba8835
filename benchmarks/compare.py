"""Benchmark: is ``stepscope compare`` honest under noise (issue 34)?

    python benchmarks/compare.py [--pairs 20] [--condition quiet|hog|both] [--out DIR]

Per pair, three real short trainings (tests/scripts/cpu_train.py under ``stepscope
run``), one after another so that the host's load drifts over the pair as it would
between two CI runs: a baseline, a rerun of the same command, and a run with a planted
``time.sleep`` of 10% of the baseline's median step per step. Then:

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


def compare(a: Path, b: Path) -> dict[str, Any]:
    cmd = [str(BIN / "stepscope"), "compare", str(a), str(b), "--json"]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    phase: dict[str, Any] = json.loads(done.stdout)[0]["phases"][0]
    return phase


def pair(out: Path, i: int) -> dict[str, Any]:
    base = run(out, f"base-{i}")
    rerun = run(out, f"rerun-{i}")
    median = compare(base, base)["base_median"]
    planted = run(out, f"planted-{i}", "--step-sleep", f"{PLANTED * median:.5f}")
    noise, change = compare(base, rerun), compare(base, planted)
    return {
        "pair": i,
        "base_median_s": median,
        "noise": {k: noise[k] for k in ("direction", "verdict", "ratio")},
        "planted": {k: change[k] for k in ("direction", "mostly", "verdict", "ratio")},
    }


def condition(name: str, pairs: int, out: Path) -> dict[str, Any]:
    rows = []
    with hog(name == "hog"):
        for i in range(pairs):
            rows.append(pair(out / name, i))
            r = rows[-1]
            print(f"{name} {i}: noise {r['noise']['verdict']} | planted {r['planted']['verdict']}",
                  flush=True)  # fmt: skip
    quiet = sum(r["noise"]["direction"] == "same" for r in rows)
    found = sum(r["planted"]["direction"] == "slower" for r in rows)
    named = sum(r["planted"]["mostly"] == "other" for r in rows)
    return {"condition": name, "pairs": pairs, "no_difference": quiet, "slower_found": found,
            "named_other": named, "rows": rows}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=20, help="pairs per condition (default 20)")
    p.add_argument("--condition", choices=("quiet", "hog", "both"), default="both",
                   help="quiet host, a CPU hog per core, or both (default both)")  # fmt: skip
    p.add_argument("--out", help="folder for the jobs and compare.json (default: a temp dir)")
    a = p.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="compare-bench-"))
    names = ("quiet", "hog") if a.condition == "both" else (a.condition,)
    results = [condition(n, a.pairs, out) for n in names]
    for r in results:
        n = r["pairs"]
        print(f"{r['condition']}: no difference in {r['no_difference']} of {n} identical pairs; "
              f"slower found in {r['slower_found']} of {n} planted +{100 * PLANTED:.0f}% pairs "
              f"(named other: {r['named_other']})")  # fmt: skip
    (out / "compare.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {out / 'compare.json'}")


if __name__ == "__main__":
    main()
