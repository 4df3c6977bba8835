"""Benchmark: does stepscope name the problem a training run has, on an idle machine and
under a competing CPU load?

    python benchmarks/diagnosis.py [--only NAME ...] [--condition idle|load|both] [--out DIR]

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


def run_one(sc: Scenario, condition: str, out: Path, config: Path) -> dict[str, Any]:
    """Run a scenario under ``stepscope run``; its final verdicts, timings and exit code."""
    job = f"{sc.name}-{condition}"
    env = dict(os.environ, STEPSCOPE_BENCH_NVML=json.dumps(GPUS.get(sc.gpu or "", {})))
    paths = [str(SRC), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in ([str(FAKE_NVML)] if sc.gpu else []) + paths if p
    )
    cmd = [sys.executable, "-m", "stepscope.cli", "run", "-o", str(out), "--job", job,
           "--interval-ms", str(INTERVAL_MS), "--config", str(config)]  # fmt: skip
    if sc.nproc > 1:
        cmd += ["--nproc-per-node", str(sc.nproc)]
    cmd += ["--", *([sys.executable] if sc.nproc == 1 else []), str(TRAIN), *sc.args.split()]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    statuses, messages = {}, {}
    for f in sorted((out / job / "rules").glob("*.json")):
        verdict = json.loads(f.read_text())
        statuses[f.stem], messages[f.stem] = verdict["status"], verdict.get("message", "")
    fired = {r for r, st in statuses.items() if st == "IssuesFound"}
    err = done.stderr[-2000:] if done.returncode else ""
    return {"scenario": sc.name, "condition": condition, "code": done.returncode,
            "wall_s": round(wall, 1), "fired": sorted(fired), "statuses": statuses,
            "messages": messages, "stderr": err}  # fmt: skip


def score(sc: Scenario, r: dict[str, Any]) -> dict[str, Any]:
    """Expected, hit, missed, pending (rule not in this build) and false positives."""
    load = r["condition"] == "load"
    expect = set(sc.expect) | (set(sc.expect_load) if load else set())
    allow = set(sc.allow) | {CONTENTION} | (set(sc.idle_only) if load else set())
    expect -= set(sc.idle_only) if load else set()  # tolerated under load, not expected
    built = {e for e in expect if e in BUILTIN}
    fired = set(r["fired"])
    return {
        "expected": sorted(built),
        "pending": sorted(expect - built),
        "hit": sorted(built & fired),
        "missed": sorted(built - fired),
        "false": sorted(fired - expect - allow),
        "side": sorted(fired & allow - expect),
    }


@contextmanager
def cpu_load(n: int) -> Iterator[None]:
    """One busy process per core until the block ends, whatever ends it."""
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


def names(xs: list[str]) -> str:
    return ", ".join(xs) or "-"


COLUMNS = (("scenario", 15), ("cond", 4), ("expected (pending)", 34), ("missed", 19),
           ("false positives", 34), ("wall", 5), ("also fired (tolerated)", 0))  # fmt: skip


def line(cells: list[str]) -> str:
    return " ".join(c.ljust(w) for c, (_, w) in zip(cells, COLUMNS, strict=True)).rstrip()


def row(r: dict[str, Any]) -> str:
    s = r["score"]
    expected = names(s["expected"] + [f"({x})" for x in s["pending"]])
    wall = f"{r['wall_s']:.0f} s" + ("" if r["code"] == 0 else f" exit {r['code']}")
    if not r["statuses"]:  # the product gave no verdict at all: say so, it is not a pass
        why = f"no rules/: see {r['scenario']}-{r['condition']}/faults"
        return line([r["scenario"], r["condition"], names(s["expected"]), "NO VERDICTS", why,
                     wall, ""])  # fmt: skip
    cells = [r["scenario"], r["condition"], expected, names(s["missed"]), names(s["false"])]
    return line([*cells, wall, names(s["side"])])


def summary(results: list[dict[str, Any]], condition: str) -> str:
    rs = [r for r in results if r["condition"] == condition]
    expected = sum(len(r["score"]["expected"]) for r in rs)
    hits = sum(len(r["score"]["hit"]) for r in rs)
    false = sum(len(r["score"]["false"]) for r in rs)
    healthy = [r for r in rs if r["healthy"]]
    bad = sum(1 for r in healthy if r["score"]["false"])
    pending = sorted({p for r in rs for p in r["score"]["pending"]})
    recall = f"{hits}/{expected} = {hits / expected:.0%}" if expected else "-"
    return (f"{condition}: recall {recall}; false positives {false} in {len(rs)} runs "
            f"({bad} of {len(healthy)} healthy runs); pending (not in this build): "
            f"{names(pending)}; wall {sum(r['wall_s'] for r in rs) / 60:.1f} min")  # fmt: skip


def scorecard(results: list[dict[str, Any]]) -> str:
    lines = [line([name for name, _ in COLUMNS]), *(row(r) for r in results), ""]
    conditions = dict.fromkeys(r["condition"] for r in results)
    return "\n".join(lines + [summary(results, c) for c in conditions])


def run_condition(
    condition: str, chosen: list[Scenario], out: Path, config: Path
) -> list[dict[str, Any]]:
    results = []
    for sc in chosen:
        r = run_one(sc, condition, out, config)
        r["score"], r["healthy"] = score(sc, r), sc.healthy
        print(row(r), flush=True)
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
    a = p.parse_args()
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
                results += run_condition(condition, chosen, out, config)
        else:
            results += run_condition(condition, chosen, out, config)
    card = scorecard(results)
    print("\n" + card)
    (out / "scorecard.json").write_text(json.dumps(results, indent=1))
    (out / "scorecard.txt").write_text(card + "\n")


if __name__ == "__main__":
    main()
