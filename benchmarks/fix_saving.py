"""What a data-loader fix saves, claimed against measured (issue 30, item 3).

    python benchmarks/fix_saving.py [--reps 3] [--case decode] [--out DIR]

Each case is a slow job and its fixed twin, the same fixed number of steps of
``_diagnosis_train.py`` under ``stepscope run``, run one after the other (interleaved
pairs: a shared machine's load moves between runs). The claim is what the slow job's
diagnosis says its fix would save (``saving_seconds`` of its entries of the data-wait
rules, DataLoaderWorkers and DataLoading, as ``show --json`` gives them); the
measurement is the slow job's training-step time minus its twin's (first step's start
to last step's end). The cost the diagnosis gives the same entries (what the wait
cost, the old claim) is printed beside it. Target: claimed / measured within 1/1.5 to
1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "_diagnosis_train.py"
SRC = HERE.parent / "src"
WAIT_RULES = ("DataLoaderWorkers", "DataLoading")
# name: (slow job's arguments, its fixed twin's)
CASES = {
    # The case: decoding on the training thread, fixed with 2 workers on 2 cores.
    "decode": (
        "--steps 500 --workers 0 --decode-ms 0.43",
        "--steps 500 --workers 2 --decode-ms 0.43",
    ),
}


def run(out: Path, job: str, args: str) -> Path:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
    )
    cmd = [sys.executable, "-m", "stepscope.cli", "run", "-o", str(out), "--job", job,
           "--interval-ms", "100", "--", sys.executable, str(TRAIN), *args.split()]  # fmt: skip
    subprocess.run(cmd, env=env, capture_output=True, check=True, timeout=600)
    return out / job


def show(job: Path) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    cmd = [sys.executable, "-m", "stepscope.cli", "show", "--json", str(job)]
    done = subprocess.run(cmd, env=env, capture_output=True, check=True, text=True)
    summary: dict[str, object] = json.loads(done.stdout)
    return summary


def step_time(job: Path) -> float:
    import stepscope

    steps = stepscope.open(str(job)).steps()
    train = steps[steps["phase"] == "train"]
    return float(train["end"].max() - train["start"].min())


def claimed(job: Path) -> tuple[float, float]:
    """The diagnosis' saving and cost of the data-wait entries (folded ones included)."""
    entries = show(job)["diagnosis"]
    assert isinstance(entries, list)
    mine = [e for e in entries if e["rule"] in WAIT_RULES]
    return (sum(e["saving_seconds"] or 0.0 for e in mine),
            sum(e["cost_seconds"] or 0.0 for e in mine))  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--case", choices=sorted(CASES), action="append")
    p.add_argument("--out")
    a = p.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="stepscope-bench-saving-")).resolve()
    for case in a.case or sorted(CASES):
        slow_args, fixed_args = CASES[case]
        ratios = []
        print(f"{case}: slow `{slow_args}`, fixed `{fixed_args}`", flush=True)
        for i in range(a.reps):
            load = os.getloadavg()[0]
            slow = run(out, f"{case}-slow-{i}", slow_args)
            fixed = run(out, f"{case}-fixed-{i}", fixed_args)
            saving, cost = claimed(slow)
            measured = step_time(slow) - step_time(fixed)
            ratio = saving / measured if measured > 0 else float("nan")  # the twin was slower
            if measured > 0:
                ratios.append(ratio)
            line = (
                f"  rep {i + 1}: load {load:.1f}; steps {step_time(slow):.2f} s -> "
                f"{step_time(fixed):.2f} s: measured saving {measured:.2f} s; claimed "
                f"{saving:.2f} s (ratio {ratio:.2f}); the wait's cost {cost:.2f} s"
            )
            print(line, flush=True)
        if ratios:
            spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
            median = statistics.median(ratios)
            print(f"  claimed/measured: median {median:.2f}, spread {spread} ({len(ratios)} reps)")
    print(f"jobs in {out}")


if __name__ == "__main__":
    main()
