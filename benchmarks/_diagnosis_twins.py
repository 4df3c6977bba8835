"""Fixed twins of ``benchmarks/diagnosis.py``: does the diagnosis claim the saving a
fix truly brings (issue 30)?

A scenario with ``fixed`` runs twice: with its problem, and with the arguments of the
fix (its "fixed twin"), in the same condition. The **measured saving** is the step time
the fix removed from the problem's run: ``n * (mean_problem - mean_fixed)`` over the
training steps' durations (``n``: the problem run's steps), which is the difference in
total step time when both ran the same steps and stays honest when ``--seconds`` ended
one earlier. Step time, not the process' wall: start-up (torch's import) is not what
the fix changes, and it varies by seconds on a shared machine. The **claimed saving**
is the sum of the diagnosis' ``saving_seconds`` over the entries of the rules the fix
addresses (``show --json``; ``cost_seconds`` where ``saving_seconds`` is absent, and
the result says so); a rule that did not fire claims 0. The claim holds when it is
within a factor of 1.5 of the measured saving, or when both are under 5% of the problem
run's step time (nothing to save and nothing claimed: the ratio of two noises is no
measure).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

FACTOR = 1.5
NEGLIGIBLE = 0.05  # of the problem run's step time


def diagnosis(job: Path, src: Path) -> list[dict[str, Any]]:
    """The job's diagnosis entries (``stepscope show --json``); [] if it cannot tell."""
    cmd = [sys.executable, "-m", "stepscope.cli", "show", str(job), "--json"]
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if done.returncode:
        return []
    entries: list[dict[str, Any]] = json.loads(done.stdout).get("diagnosis") or []
    return entries


def costs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rule, rank, cost and saving of each entry, as the scorecard records them."""
    return [
        {"rule": e.get("rule"), "rank": i + 1, "cost_seconds": e.get("cost_seconds"),
         "saving_seconds": e.get("saving_seconds")}
        for i, e in enumerate(entries)
    ]  # fmt: skip


def step_times(job: Path) -> tuple[int, float]:
    """The training steps' count and mean duration (s) of a finished job."""
    import stepscope

    steps = stepscope.open(job).steps(phase="train")
    return len(steps), float(steps["duration"].mean()) if len(steps) else 0.0


def claimed(entries: list[dict[str, Any]], fixes: frozenset[str]) -> tuple[float, str]:
    """The diagnosis' saving for the rules ``fixes``, and the key it was read from:
    ``saving_seconds`` where this build's diagnosis has it, else ``cost_seconds``."""
    mine = [e for e in entries if e.get("rule") in fixes]
    key = "saving_seconds" if any("saving_seconds" in e for e in entries) else "cost_seconds"
    return sum(float(e.get(key) or 0.0) for e in mine), key


def compare(
    problem: Path, fixed: Path, entries: list[dict[str, Any]], fixes: frozenset[str]
) -> dict[str, Any]:
    """The measured and claimed savings, their ratio and whether the claim holds."""
    n, mean = step_times(problem)
    n_fixed, mean_fixed = step_times(fixed)
    measured = n * (mean - mean_fixed) if n and n_fixed else float("nan")
    claim, key = claimed(entries, fixes)
    total = n * mean
    small = max(claim, measured) < NEGLIGIBLE * total if total else False
    ratio = claim / measured if measured > 0 else float("inf") if claim > 0 else float("nan")
    ok = small or (1 / FACTOR <= ratio <= FACTOR)
    return {"fixes": sorted(fixes), "claimed_s": round(claim, 3), "claim_key": key,
            "measured_s": round(measured, 3), "ratio": round(ratio, 2),
            "steps": [n, n_fixed], "step_s": round(total, 3), "ok": bool(ok),
            "negligible": bool(small)}  # fmt: skip


def text(t: dict[str, Any] | None) -> str:
    """One cell of the scorecard: "claimed 2.0 s vs saved 1.9 s = 1.05x ok"."""
    if not t:
        return "-"
    key = "" if t["claim_key"] == "saving_seconds" else " (cost: no saving_seconds)"
    verdict = "ok" if t["ok"] else f"OFF (> {FACTOR:g}x)"
    if t["negligible"]:
        verdict = "ok (both < 5% of step time)"
    return (f"claimed {t['claimed_s']:.2f} s{key} vs saved {t['measured_s']:.2f} s "
            f"= {t['ratio']:g}x {verdict}")  # fmt: skip
