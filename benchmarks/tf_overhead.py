"""Overhead of `stepscope run` (default settings) on a small Keras MLP: ``fit`` and a custom
loop (issue 23). Target: training time watched at most 1.01x bare.

Two ways to interleave bare and watched (BENCHMARKS.md says why switched blocks):

* switched blocks (the default): each run is one training process under `stepscope
  run`, stepscope switched off and on between blocks of about a second
  (benchmarks/_tf_switched.py, the machinery of benchmarks/_switched.py) until each
  side has trained ``--seconds``; each watched block over the bare blocks beside it.
  Every round runs, per mode, the A/B run and the A/A run (nothing switched: the
  noise floor), in alternating order; their blocks are pooled over ``--rounds``.
  ``--parts hooks helpers writers`` adds a run per part, switched alone, to each round.
* whole runs (``--whole-runs``): bare and watched processes, interleaved B W B ... B
  per mode, each watched run over the mean of its bare neighbours.

    PYTHONPATH=src python benchmarks/tf_overhead.py --seconds 90 --rounds 2
    PYTHONPATH=src python benchmarks/tf_overhead.py --parts hooks helpers writers
    PYTHONPATH=src python benchmarks/tf_overhead.py --whole-runs --pairs 8 --steps 4000
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
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from overhead import median_ci

HERE = Path(__file__).parent
TRAIN = str(HERE / "_tf_train.py")
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")  # with PYTHONPATH=src: this tree's


def _json(cmd: list[str]) -> dict[str, Any]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _watched(out: str, job: str, script: list[str]) -> dict[str, Any]:
    return _json([STEPSCOPE, "run", "-o", out, "--job", job, "--", sys.executable, *script])


# -- switched blocks ------------------------------------------------------------------------
def switched(
    modes: list[str], variants: list[str], seconds: float, rounds: int, save: str | None
) -> None:
    """Per mode and variant ("all", "same", or one part), runs of switched blocks, pooled."""
    blocks = max(int(seconds), 2) // 2 * 2  # even: ratios come in pairs sharing neighbours
    pooled: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as out:
        for r in range(rounds):
            for mode in modes:
                for v in variants if r % 2 == 0 else variants[::-1]:
                    script = [str(HERE / "_tf_switched.py"), "--mode", mode]
                    script += ["--blocks", str(blocks)]
                    script += ["--same"] if v == "same" else [] if v == "all" else ["--parts", v]
                    res = _watched(out, f"{mode}-{v}-{r}", script)
                    pooled.setdefault((mode, v), []).append(res)
                    print(f"round {r} {mode} {v}: {_line(res)}", flush=True)
    if save:
        Path(save).write_text(json.dumps([[m, v, runs] for (m, v), runs in pooled.items()]))
    for (mode, v), runs in pooled.items():
        summary(mode, v, runs)


def _line(r: dict[str, Any]) -> str:
    return (
        f"median {statistics.median(r['ratios']):.4f}, cpu {statistics.median(r['cpu_ratios']):.4f}"
        f", {r['step_ms']:.2f} ms/step bare, {r['steps']} steps a block, "
        f"load {r['load'][0]:.1f}-{r['load'][1]:.1f}"
    )


def _stats(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    lo, hi = median_ci(values)
    med = statistics.median(values)
    return f"{med:.4f} (95% {lo:.4f}-{hi:.4f}; quartiles {q[0]:.4f}-{q[2]:.4f})"


def summary(mode: str, variant: str, runs: list[dict[str, Any]]) -> None:
    ratios = [x for r in runs for x in r["ratios"]]
    cpu = [x for r in runs for x in r["cpu_ratios"]]
    label = {"all": "A/B (everything)", "same": "A/A (nothing)"}.get(variant, f"{variant} alone")
    loads = [x for r in runs for x in r["load"]]
    bare = sum(r["bare_s"] for r in runs)
    helpers = [r["helpers_ms_per_s"] for r in runs]
    agent = [r["agent_threads_ms_per_s"] for r in runs]
    print(
        f"{mode} {label}: {len(ratios)} blocks a side, load {min(loads):.1f}-{max(loads):.1f}\n"
        f"  wall ratio {_stats(ratios)}\n  training CPU ratio {_stats(cpu)}\n"
        f"  bare {bare:.1f} s, watched {sum(r['watched_s'] for r in runs):.1f} s; "
        f"CPU bare / watched, ms per s: helpers "
        f"{statistics.mean(h['b'] for h in helpers):.1f} / "
        f"{statistics.mean(h['w'] for h in helpers):.1f}, agent threads "
        f"{statistics.mean(a['b'] for a in agent):.2f} / "
        f"{statistics.mean(a['w'] for a in agent):.2f}",
        flush=True,
    )


# -- whole runs -------------------------------------------------------------------------------
def _bare(mode: str, steps: int) -> float:
    return float(_json([sys.executable, TRAIN, "--mode", mode, "--steps", str(steps)])["loop_s"])


def whole_runs(mode: str, steps: int, pairs: int) -> dict[str, object]:
    """Ratios of watched runs to their bare neighbours, B W B W ... B."""
    script = [TRAIN, "--mode", mode, "--steps", str(steps)]
    with tempfile.TemporaryDirectory() as out:
        bares = [_bare(mode, steps)]
        ratios, watch = [], []
        for i in range(pairs):
            w = float(_watched(out, f"{mode}-{i}", script)["loop_s"])
            bares.append(_bare(mode, steps))
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
        "load": round(os.getloadavg()[0], 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default="fit,loop")
    p.add_argument("--seconds", type=float, default=60, help="switched: training a side, a run")
    p.add_argument("--rounds", type=int, default=2, help="switched: runs of each variant")
    p.add_argument("--parts", nargs="*", default=[], choices=["hooks", "helpers", "writers"])
    p.add_argument("--save", help="switched: write every run's JSON line to this file")
    p.add_argument("--whole-runs", action="store_true", help="interleave whole runs instead")
    p.add_argument("--pairs", type=int, default=6, help="whole runs: watched runs")
    p.add_argument("--steps", type=int, default=2000, help="whole runs: steps of a run")
    a = p.parse_args()
    modes = a.modes.split(",")
    if a.whole_runs:
        for mode in modes:
            print(json.dumps(whole_runs(mode, a.steps, a.pairs)), flush=True)
    else:
        variants = ["all", *a.parts, "same"]
        switched(modes, variants, a.seconds, a.rounds, a.save)


if __name__ == "__main__":
    main()
