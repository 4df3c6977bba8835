"""A costly problem never hides below a rule's count threshold or absolute floor
(issue 30, item 1): evidence costing at least ``min_cost_share`` of the job's step
time fires the rule, and the diagnosis ranks it by that cost. Each firing job has a
silent twin with the same parameters whose evidence costs less than the share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import rules_data as rd
import stepscope
from rules_data import judge
from stepscope.rules import RuleInput, Status, evaluate_job
from stepscope.rules.diagnosis import JobFacts, diagnose
from stepscope.rules.straggler import Straggler


def jitter(n: int, base: float, spread: float, seed: int = 0) -> np.ndarray:
    """``n`` step durations around ``base`` (a robust deviation above zero)."""
    return base + np.random.default_rng(seed).uniform(-spread, spread, n)


def stalled_job(path: Path, step_s: float, stall_s: float, stalls: int = 4) -> Path:
    """200 steps of ``step_s`` with ``stalls`` steps ``stall_s`` longer (after skip_steps)."""
    store = rd.new_job(path)
    rd.node_info(store, gpus=0)
    d = jitter(200, step_s, step_s * 0.05)
    d[[40, 80, 120, 160][:stalls]] += stall_s
    rd.write_steps(store, rd.steps_frame(200, duration=d, data_wait=0.0001, forward=0.001))
    return path


def test_step_outlier_fires_on_cost_below_n_outliers(tmp_path: Path) -> None:
    # issue 30: four 0.5 s stalls in a 200-step job of ~14 ms steps: 2.0 s of 4.8 s
    res = judge(stalled_job(tmp_path / "stalls", 0.014, 0.5), "StepOutlier")
    assert res.status is Status.ISSUES_FOUND and res.triggers == 4
    assert res.parameters["n_outliers"] == 10 and res.parameters["min_cost_share"] == 5
    assert res.message.startswith(
        "4 outlier step(s), within the 10 tolerated, but they cost 2.0 s (42% of step time, >= 5%)"
    ), res.message
    assert res.details["fired_on_cost"] is True
    assert res.cost_seconds is not None and 1.9 < res.cost_seconds < 2.1


def test_step_outlier_silent_twin_costs_below_the_share(tmp_path: Path) -> None:
    # the same four stalls, 0.15 s each, in 200 steps of 0.2 s: 0.6 s of 40.6 s (1.5%)
    res = judge(stalled_job(tmp_path / "quiet", 0.2, 0.15), "StepOutlier")
    assert res.status is Status.NO_ISSUES_FOUND and res.datapoints > 0
    assert res.triggers == 4 and res.message == (
        "4 outlier step(s), within the 10 tolerated, costing 0.6 s (1% of step time, < 5%)."
    )
    assert "fired_on_cost" not in res.details


def test_step_outlier_min_cost_share_is_a_parameter(tmp_path: Path) -> None:
    path = stalled_job(tmp_path / "stalls", 0.014, 0.5)
    assert judge(path, "StepOutlier", min_cost_share=50).status is Status.NO_ISSUES_FOUND
    assert judge(path, "StepOutlier", n_outliers=3).message.startswith("4 trigger(s) in 4")


def overhead_job(path: Path, slow: slice, n: int = 400) -> Path:
    """``n`` training steps; those in ``slow`` take 4.6 ms with 1.8 ms of 'other' (42%,
    under PythonOverhead's 5 ms floor), the rest 2.9 ms with 0.1 ms."""
    store = rd.new_job(path)
    rd.node_info(store, gpus=0)
    other = np.full(n, 0.0001)
    other[slow] = 0.0018
    other *= jitter(n, 1.0, 0.02)
    frame = rd.steps_frame(n, duration=2.8e-3 + other)
    parts = {"data_wait": 1e-4, "forward": 1.5e-3, "backward": 1.0e-3, "optimizer": 2e-4}
    frame = frame.assign(**{k: np.float32(v) for k, v in parts.items()})
    frame["other"] = other.astype(np.float32)
    rd.write_steps(store, pd.DataFrame(frame))
    return path


def test_python_overhead_fires_on_cost_under_the_ms_floor(tmp_path: Path) -> None:
    res = judge(overhead_job(tmp_path / "small", slice(0, 400)), "PythonOverhead", window=20)
    assert res.status is Status.ISSUES_FOUND and res.triggers == 0
    assert res.details["under_floor_windows"] == 19  # steps 20-399 (5-19: too few)
    assert res.message.startswith(
        "1 finding(s) with a median 'other' under the 5 ms floor, but they cost "
    ), res.message
    assert "(33% of step time, >= 5%)" in res.message  # 1.57 ms over the 5% allowance
    assert "1.8 ms of 4.6 ms" in res.findings[0].message


def test_python_overhead_silent_twin_one_window_costs_below_the_share(tmp_path: Path) -> None:
    # the same overhead in steps 20-39 only: 31 ms of 1.2 s of step time (2.7%)
    res = judge(overhead_job(tmp_path / "brief", slice(20, 40)), "PythonOverhead", window=20)
    assert res.status is Status.NO_ISSUES_FOUND and res.datapoints > 0
    assert res.details["under_floor_windows"] == 1 and len(res.findings) == 1
    assert "fired_on_cost" not in res.details


def test_python_overhead_issue_case_with_the_default_parameters(tmp_path: Path) -> None:
    # issue 30: a 200-step job whose Python is 1.8 ms of a 4.6 ms step gets a finding
    res = judge(overhead_job(tmp_path / "small", slice(0, 200), n=200), "PythonOverhead")
    assert res.status is Status.ISSUES_FOUND and res.details["fired_on_cost"] is True
    assert res.parameters["min_other_s"] == 0.005 and res.parameters["window"] == 1000
    # its twin, same defaults: the same Python in steps 1000-1999 of 12,000 (4.3%)
    res = judge(overhead_job(tmp_path / "long", slice(1000, 2000), n=12_000), "PythonOverhead")
    assert res.status is Status.NO_ISSUES_FOUND and res.datapoints > 0
    assert res.details["under_floor_windows"] == 1 and len(res.findings) == 1


def test_the_diagnosis_ranks_a_cost_fired_rule(tmp_path: Path) -> None:
    path = stalled_job(tmp_path / "stalls", 0.014, 0.5)
    job = stepscope.open(str(path))
    results = evaluate_job(job, [{"name": "StepOutlier"}, {"name": "PythonOverhead"}])
    diagnosis = diagnose(results, JobFacts(wall_seconds=10.0))
    # the synthetic steps also spend 38% in 'other' (PythonOverhead, 1.4 s): ranked after
    assert [e.rule for e in diagnosis.entries] == ["StepOutlier", "PythonOverhead"]
    costs = [e.cost_seconds or 0.0 for e in diagnosis.entries]
    assert costs == sorted(costs, reverse=True) and costs[1] > 0


def ranks(step_s: float, slow_wait: float, steps: int = 100) -> pd.DataFrame:
    """4 ranks on 2 nodes, ``steps`` steps of ``step_s``; rank 2 waits ``slow_wait`` for
    data each step, its peers 1 ms."""
    waits = {0: 0.001, 1: 0.001, 2: slow_wait, 3: 0.001}
    frames = [
        rd.steps_frame(steps, r, f"n{r // 2}", duration=step_s, data_wait=w)
        for r, w in waits.items()
    ]
    return pd.concat(frames)


def test_straggler_under_min_excess_fires_on_cost() -> None:
    # a small model: rank 2 waits 4 ms of a 6 ms step for data, its peers 1 ms: the
    # excess (3 ms) is under min_excess_s (5 ms), but the peers wait 50% of the time
    res = Straggler().evaluate(RuleInput(steps=ranks(0.006, 0.004, 400)))
    assert res.status is Status.ISSUES_FOUND and res.details["fired_on_cost"] is True
    assert [f.rank for f in res.findings] == [2] and res.parameters["min_excess_s"] == 0.005
    assert res.message.startswith(
        "1 straggler finding(s) under min_excess_s, but they cost 1.2 s (50% of step time, >= 5%)"
    ), res.message
    # the twin, same parameters: the same 3 ms in steps of 0.1 s (3% of the step time)
    quiet = Straggler().evaluate(RuleInput(steps=ranks(0.1, 0.004, 400)))
    assert quiet.status is Status.NO_ISSUES_FOUND and quiet.datapoints > 0
    assert "fired_on_cost" not in quiet.details and not quiet.findings


def test_straggler_costing_under_min_cost_s_stays_silent() -> None:
    # the same 50% pattern over 100 steps: its peers lost 0.3 s in all, under
    # min_cost_s (0.5 s): a real pattern, too little to act on (a 2-rank run on a loaded
    # CI machine fired on 0.04 s)
    res = Straggler().evaluate(RuleInput(steps=ranks(0.006, 0.004)))
    assert res.status is Status.NO_ISSUES_FOUND and res.datapoints > 0
    assert res.details["below_min_cost_s"] is True and [f.rank for f in res.findings] == [2]
    assert res.message.endswith("but in all it costs 0.29 s (< 0.5 s)"), res.message
    # its twin with min_cost_s 0 fires on the same steps
    loud = Straggler(min_cost_s=0).evaluate(RuleInput(steps=ranks(0.006, 0.004)))
    assert loud.status is Status.ISSUES_FOUND and loud.cost_seconds == res.cost_seconds
