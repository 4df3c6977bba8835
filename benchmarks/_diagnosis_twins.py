"""Fixed twins of ``benchmarks/diagnosis.py``: does the diagnosis claim the saving a
fix truly brings (issue 30)?

A scenario with ``fixed`` runs ``K`` times with its problem and ``K`` times with the
arguments of the fix (its "fixed twin"), interleaved, in the same condition (``K``:
``--twin-runs``, default 3; the first problem run is the one scored). The **measured
saving** is the step time the fix removed: ``n * (mean_problem - mean_fixed)``, where a
run's value is its training steps' mean duration, each side's value the mean over its
runs and ``n`` the problem runs' median step count (the difference in total step time
when both ran the same steps; honest when ``--seconds`` ended a run earlier). Step
time, not the process' wall: start-up (torch's import) is not what the fix changes and
varies by seconds on a shared machine. Its 95% interval is a t interval over the runs
(pooled spread between runs, ``2K - 2`` degrees of freedom): on a loaded machine one
run's steps differ from the next one's by 20-40% (issue 34), more than many savings.

The **claimed saving** is the sum of the diagnosis' ``saving_seconds`` over the entries
of the rules the fix addresses (``show --json``; ``cost_seconds`` where
``saving_seconds`` is absent, and the result says so), per step, its median over the
problem runs, times ``n``; a rule that did not fire claims 0. The claim **holds** when
it is within a factor of 1.5 of the measured saving, or when both are under 5% of the
problem runs' step time (nothing to save and nothing claimed: the ratio of two noises
is no measure). It is **unsettled** when it misses 1.5x of the measured value but the
measured interval reaches 1.5x of it (the spread between runs cannot tell), and **off**
otherwise. A cell whose interval's half-width is over half the measured saving says
"wide": held or not, three runs a side did not pin that saving down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

FACTOR = 1.5
NEGLIGIBLE = 0.05  # of the problem run's step time


def diagnosis(job: Path, src: Path) -> list[dict[str, Any]] | None:
    """The job's diagnosis entries (``stepscope show --json``); None if it cannot tell."""
    cmd = [sys.executable, "-m", "stepscope.cli", "show", str(job), "--json"]
    env = dict(os.environ, PYTHONPATH=str(src))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode:
        return None
    entries: list[dict[str, Any]] = json.loads(done.stdout).get("diagnosis") or []
    return entries


def costs(entries: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Rule, rank, cost and saving of each entry, as the scorecard records them."""
    return [
        {"rule": e.get("rule"), "rank": i + 1, "cost_seconds": e.get("cost_seconds"),
         "saving_seconds": e.get("saving_seconds")}
        for i, e in enumerate(entries or [])
    ]  # fmt: skip


def step_times(job: Path) -> tuple[int, float]:
    """The training steps' count and mean duration (s) of a finished job."""
    import stepscope

    steps = stepscope.open(job).steps(phase="train")
    return len(steps), float(steps["duration"].mean()) if len(steps) else 0.0


def claim_key(runs: list[list[dict[str, Any]]]) -> str:
    """``saving_seconds`` where this build's diagnosis has it, else ``cost_seconds``."""
    has = any("saving_seconds" in e for entries in runs for e in entries)
    return "saving_seconds" if has else "cost_seconds"


def claimed(entries: list[dict[str, Any]], fixes: frozenset[str], key: str) -> float:
    """The diagnosis' saving (``key``) for the rules ``fixes``: 0 where none fired."""
    return sum(float(e.get(key) or 0.0) for e in entries if e.get("rule") in fixes)


def interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """95% t interval of ``mean(a) - mean(b)`` over runs (pooled variance, as
    ``stepscope compare``'s; nan, nan while no spread is known: one run a side)."""
    from stepscope.analysis.compare_runs import pooled

    if len(a) < 2 or len(b) < 2:  # pooled() would give 1 df against one run: no spread
        return float("nan"), float("nan")
    d = pooled(np.asarray(b, np.float64), np.asarray(a, np.float64), 0.95)
    return d.low, d.high


def compare(
    problems: list[Path],
    fixed: list[Path],
    entries: list[list[dict[str, Any]] | None],
    fixes: frozenset[str],
) -> dict[str, Any]:
    """The measured (with its interval) and claimed savings, their ratio, the verdict.
    A run without steps or without a diagnosis (``entries`` None) is left out."""
    p_runs, f_runs = [step_times(j) for j in problems], [step_times(j) for j in fixed]
    p_means, f_means = [m for k, m in p_runs if k], [m for k, m in f_runs if k]
    n = float(np.median([k for k, _ in p_runs if k])) if p_means else 0.0
    nan = float("nan")
    measured = (
        n * (float(np.mean(p_means)) - float(np.mean(f_means))) if p_means and f_means else nan
    )
    lo, hi = (n * x for x in interval(p_means, f_means))
    told = [(e, k) for e, (k, _) in zip(entries, p_runs, strict=True) if e is not None and k]
    key = claim_key([e for e, _ in told])
    claims = [claimed(e, fixes, key) for e, _ in told]
    per_step = [c / k for c, (_, k) in zip(claims, told, strict=True)]
    claim = n * float(np.median(per_step)) if per_step else float("nan")
    total = n * float(np.mean(p_means)) if p_means else 0.0
    small = max(claim, measured) < NEGLIGIBLE * total if total else False
    ratio = claim / measured if measured > 0 else float("inf") if claim > 0 else nan
    ok = small or (1 / FACTOR <= ratio <= FACTOR)
    reach = np.isfinite(lo) and hi >= claim / FACTOR and lo <= claim * FACTOR
    verdict = "ok" if ok else "unsettled" if reach else "off"
    return {"fixes": sorted(fixes), "claimed_s": round(claim, 3), "claim_key": key,
            "claims_s": [round(c, 3) for c in claims],
            "measured_s": round(measured, 3), "measured_95": [round(lo, 3), round(hi, 3)],
            "ratio": round(ratio, 2), "runs": [len(told), len(f_means)],
            "steps": [[k for k, _ in p_runs], [k for k, _ in f_runs]],
            "step_s": round(total, 3), "ok": bool(ok), "verdict": verdict,
            "negligible": bool(small)}  # fmt: skip


def wide(t: dict[str, Any]) -> bool:
    """Whether the runs' spread is over half the measured saving (no confirmation)."""
    lo, hi = t.get("measured_95", [float("nan")] * 2)
    # against the negligible share where the saving is about 0 (nothing to measure)
    scale = max(abs(t["measured_s"]), NEGLIGIBLE * t["step_s"])
    return bool(np.isfinite(lo) and (hi - lo) / 2 > scale / 2)


def text(t: dict[str, Any] | None) -> str:
    """One cell of the scorecard: "claimed 2.0 s vs saved 1.9 s (1.2-2.6) = 1.05x ok"."""
    if not t:
        return "-"
    key = "" if t["claim_key"] == "saving_seconds" else " (cost: no saving_seconds)"
    words = {"ok": "ok", "off": f"OFF (> {FACTOR:g}x)",
             "unsettled": "unsettled (the runs' spread reaches it)"}  # fmt: skip
    verdict = words[t.get("verdict", "ok" if t["ok"] else "off")]
    if t["negligible"]:
        verdict = "ok (both < 5% of step time)"
    lo, hi = t.get("measured_95", [float("nan")] * 2)
    spread = f" ({lo:.2f} to {hi:.2f})" if np.isfinite(lo) else ""
    if wide(t):
        spread += " wide"
    runs = "x".join(str(k) for k in t.get("runs", [1, 1]))
    return (f"claimed {t['claimed_s']:.2f} s{key} vs saved {t['measured_s']:.2f} s{spread}"
            f" = {t['ratio']:g}x {verdict} [{runs} runs]")  # fmt: skip
