"""Benchmark: does stepscope name the problem a training run has, on an idle machine and
under a competing CPU load?

    python benchmarks/diagnosis.py [--only NAME ...] [--condition idle|load|both] [--out DIR]
                                   [--twin-runs K]

Each scenario (benchmarks/_diagnosis_scenarios.py, one line each) is a real short
training run, ``stepscope run -- python benchmarks/_diagnosis_train.py ARGS``, with one
planted problem, or none (healthy runs of several shapes). GPU problems, which this
CPU-only machine cannot produce, come from realistic fake NVML traces: the tests' fake
``pynvml`` (tests/fakes/pynvml.py), put first on the job's PYTHONPATH by a shim
(benchmarks/_fake_nvml/) that replays the scenario's traces.

Every run uses the same rules (``RULES``: ProfilerReport with patience and windows scaled
to 100 ms samples and 10-20 s jobs, and three tensor rules), so a healthy run is judged
with the sensitivity that finds the problems. Under ``load`` the benchmark starts one
busy process per core for the whole condition and always stops them (also on Ctrl-C).
It prints a scorecard (per scenario and condition: expected, found, missed, false
positives; recall and false positives per condition) and writes scorecard.json in DIR.

Issue 30: a scenario may start a CPU hog beside its run (both conditions), run
"fixed twins" (the same job with the problem fixed; K runs a side, interleaved with the
problem's) whose measured saving is compared with the saving the diagnosis claims
(within 1.5x, with the spread between runs: benchmarks/_diagnosis_twins.py),
or import a synthetic SageMaker job instead of running one
(benchmarks/_diagnosis_import.py). Each run records the load average before it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import _diagnosis_twins as twins
from _diagnosis_card import row, scorecard
from _diagnosis_import import import_one
from _diagnosis_scenarios import CONTENTION, GPUS, SCENARIOS, Scenario

from stepscope.rules import BUILTIN

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "_diagnosis_train.py"
FAKE_NVML = HERE / "_fake_nvml"
SRC = HERE.parent / "src"
INTERVAL_MS = 100
TENSOR_RULES = ("LossNotDecreasing", "ExplodingTensor", "VanishingGradient")
# 100 ms samples: patience 2 s, windows 5 s (the defaults assume jobs of hours).
SCALED = {"patience": 20, "window": 50}
SYSTEM_RULES = ("BatchSize", "CPUBottleneck", "IOBottleneck", "GPUMemoryIncrease",
                "LowGPUUtilization", "GPUIdleBetweenSteps")  # fmt: skip
# A start of 24 s is slow: healthy scenarios start in 3-15 s (torch import, loaded host).
PARAMS: dict[str, object] = {"MaxInitializationTime_threshold": 0.4}


def profiler_parameters() -> dict[str, object]:
    """ProfilerReport's overrides, for the rules (and parameters) of this build."""
    out = dict(PARAMS)
    for rule in SYSTEM_RULES:
        names = {p.name for p in BUILTIN[rule].params} if rule in BUILTIN else set()
        out.update({f"{rule}_{k}": v for k, v in SCALED.items() if k in names})
    return out


def config_text() -> str:
    params = ", ".join(f"{k} = {v}" for k, v in sorted(profiler_parameters().items()))
    lines = [
        "[debugger.hook_parameters]",
        "save_interval = 10",  # losses and gradients every 10 steps
        "[[rules]]",
        'name = "ProfilerReport"',
        f"parameters = {{ {params} }}",
    ]
    for rule in TENSOR_RULES:
        lines += ["[[rules]]", f'name = "{rule}"']
    return "\n".join(lines) + "\n"


def launch(sc: Scenario, args: str, job: str, out: Path, config: Path) -> tuple[int, float, str]:
    """``stepscope run`` of the training script with ``args``; exit code, wall, stderr
    (after the script's busy() calibration line, if it printed one)."""
    env = dict(os.environ, STEPSCOPE_BENCH_NVML=json.dumps(GPUS.get(sc.gpu or "", {})))
    paths = [str(SRC), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in ([str(FAKE_NVML)] if sc.gpu else []) + paths if p
    )
    if sc.sagemaker:
        return import_one(sc.sagemaker, out / job, env)
    cmd = [sys.executable, "-m", "stepscope.cli", "run", "-o", str(out), "--job", job,
           "--interval-ms", str(INTERVAL_MS), "--config", str(config)]  # fmt: skip
    if sc.nproc > 1:
        cmd += ["--nproc-per-node", str(sc.nproc)]
    cmd += ["--", *([sys.executable] if sc.nproc == 1 else []), str(TRAIN), *args.split()]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    # the training script's busy() calibration, when it planted CPU work: kept in the row
    calibrated = [x for x in done.stdout.splitlines() if x.startswith("busy(): calibrated")]
    tail = "\n".join([*calibrated, done.stderr[-2000:]])
    return done.returncode, time.monotonic() - t0, tail


def run_one(
    sc: Scenario, condition: str, out: Path, config: Path, twin_runs: int
) -> dict[str, Any]:
    """Run a scenario under ``stepscope run`` (beside its hog, if any), and its fixed
    twins; its final verdicts, diagnosis costs, timings and exit code."""
    job, load = f"{sc.name}-{condition}", os.getloadavg()[0]
    with cpu_load(sc.hog):
        code, wall, err = launch(sc, sc.args, job, out, config)
    statuses, messages = {}, {}
    for f in sorted((out / job / "rules").glob("*.json")):
        verdict = json.loads(f.read_text())
        statuses[f.stem], messages[f.stem] = verdict["status"], verdict.get("message", "")
    fired = {r for r, st in statuses.items() if st == "IssuesFound"}
    entries = twins.diagnosis(out / job, SRC)
    twin = None
    if sc.fixed is not None and condition in sc.fixed_in:
        twin = fixed_twins(sc, job, entries, out, config, twin_runs)
    return {"scenario": sc.name, "condition": condition, "code": code, "load_before": load,
            "wall_s": round(wall, 1), "fired": sorted(fired), "statuses": statuses,
            "messages": messages, "stderr": err if code else "",
            "calibration": err.split("\n")[0] if err.startswith("busy()") else None,
            "diagnosis": twins.costs(entries), "twin": twin}  # fmt: skip


def fixed_twins(
    sc: Scenario, job: str, entries: list[dict[str, Any]] | None, out: Path, config: Path, k: int
) -> dict[str, Any]:
    """``k`` fixed twins, interleaved with ``k - 1`` more problem runs (the first, scored,
    has run): their claimed and measured savings (benchmarks/_diagnosis_twins.py)."""
    problems, fixed, claims, wall = [out / job], [], [entries], 0.0
    for i in range(k):
        name = f"{job}-fixed" + (f"-{i + 1}" if i else "")
        # No hog: where there is one, it is the problem.
        wall += launch(sc, sc.fixed or "", name, out, config)[1]
        fixed.append(out / name)
        if i + 1 < k:
            again = f"{job}-{i + 2}"
            with cpu_load(sc.hog):
                wall += launch(sc, sc.args, again, out, config)[1]
            problems.append(out / again)
            claims.append(twins.diagnosis(out / again, SRC))
    twin = twins.compare(problems, fixed, claims, sc.fixes)
    twin["wall_s"] = round(wall, 1)
    return twin


def score(sc: Scenario, r: dict[str, Any]) -> dict[str, Any]:
    """Expected, hit, missed, pending (rule not in this build) and false positives."""
    load = r["condition"] == "load"
    expect = set(sc.expect) | (set(sc.expect_load) if load else set())
    allow = set(sc.allow) | {CONTENTION} | (set(sc.idle_only) if load else set())
    expect -= set(sc.idle_only) if load else set()  # tolerated under load, not expected
    built = {e for e in expect if e in BUILTIN}
    fired = set(r["fired"])
    # A rule that must carry a cost and fired without one is missed: it ranks by nothing.
    costed = {d["rule"] for d in r.get("diagnosis", []) if d["cost_seconds"] is not None}
    uncosted = {e for e in sc.costed & fired if e not in costed}
    return {
        "expected": sorted(built),
        "pending": sorted(expect - built),
        "hit": sorted(built & fired - uncosted),
        "missed": sorted(built - fired | {f"{e} (no cost)" for e in uncosted}),
        "false": sorted(fired - expect - allow),
        "side": sorted(fired & allow - expect),
    }


@contextmanager
def cpu_load(n: int) -> Iterator[None]:
    """``n`` busy processes (one per core: a load) until the block ends, whatever ends it."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_condition(
    condition: str, chosen: list[Scenario], out: Path, config: Path, twin_runs: int
) -> list[dict[str, Any]]:
    results = []
    for sc in chosen:
        r = run_one(sc, condition, out, config, twin_runs)
        r["score"], r["healthy"] = score(sc, r), sc.healthy
        print(row(r) + (f"\n    {r['calibration']}" if r["calibration"] else ""), flush=True)
        results.append(r)
    return results


def choose(only: list[str] | None) -> list[Scenario]:
    by_name = {sc.name: sc for sc in SCENARIOS}
    if not only:
        return [sc for sc in SCENARIOS if not sc.opt_in]
    unknown = [n for n in only if n not in by_name]
    if unknown:
        sys.exit(f"diagnosis.py: unknown scenario {unknown[0]!r}; valid: {', '.join(by_name)}")
    return [by_name[n] for n in only]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", help="run only this scenario (repeatable)")
    p.add_argument("--condition", choices=("idle", "load", "both"), default="both")
    p.add_argument("--out", help="folder for the jobs and scorecard.json (default: a temp dir)")
    twin = "runs a side of each fixed-twin check (default 3; 1: one pair)"
    p.add_argument("--twin-runs", type=int, default=3, metavar="K", help=twin)
    a = p.parse_args()
    if a.twin_runs < 1:
        sys.exit(f"diagnosis.py: --twin-runs {a.twin_runs}: give 1 or more runs a side")
    chosen = choose(a.only)
    out = Path(a.out or tempfile.mkdtemp(prefix="stepscope-bench-diagnosis-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = out / "rules.toml"
    config.write_text(config_text())
    # SIGTERM ends the benchmark as Ctrl-C does: through the finally blocks (the load stops).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    conditions = ["idle", "load"] if a.condition == "both" else [a.condition]
    cores = os.cpu_count() or 1
    print(f"{len(chosen)} scenarios x {conditions}, {cores} cores, jobs in {out}")
    print(f"load average before: {load_average()}", flush=True)
    results: list[dict[str, Any]] = []
    for condition in conditions:
        if condition == "load":
            with cpu_load(cores):
                results += run_condition(condition, chosen, out, config, a.twin_runs)
        else:
            results += run_condition(condition, chosen, out, config, a.twin_runs)
    card = scorecard(results)
    print("\n" + card)
    (out / "scorecard.json").write_text(json.dumps(results, indent=1))
    (out / "scorecard.txt").write_text(card + "\n")


if __name__ == "__main__":
    main()
