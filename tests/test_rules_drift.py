"""Slow drifts over long jobs: GPUMemoryIncrease judges the trend of the whole job.

A leak of 20% -> 70% over 24 hours on an 8-GPU node rises ~5.8 points in the
rule's look-back (20 windows of 500 samples at 1 s here; ~2.9 at 500 ms), never
the 10 that fire it; the same
leak over one hour is found by the windows alone. The whole-job trend (Theil-Sen
over per-window medians) finds both, offline and live; its silent twin is 24
hours of flat, noisy memory with the same parameters. Live, the runner keeps a
compacted summary of the chunks it drops, so a scan costs the same at any age.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rules_data as rd
import stepscope
from stepscope.rules import RuleResult, Status, build_rules, evaluate_job
from stepscope.rules._trend import CAP, compact, theil_sen, trend_rise
from stepscope.rules.runner import Runner
from stepscope.store import Store

DAY, HOUR = 86_400.0, 3_600.0
INTERVAL = 1.0  # s between samples: a day is 86 400 rows per GPU
GPUS = 8


def memory(n: int, rise: float, seed: int) -> np.ndarray:
    """GPU memory %: 20 % rising by ``rise`` points over ``n`` samples, with the
    noise of a training job (+-3 points between samples, a few spikes)."""
    rng = np.random.default_rng(seed)
    mem = 20.0 + rise * np.arange(n) / n + rng.normal(0.0, 3.0, n)
    mem[rng.integers(0, n, n // 500)] += 25.0  # short allocation spikes
    return np.clip(mem, 0.0, 100.0)


def samples(seconds: float, rise: float) -> pd.DataFrame:
    """The node's samples: 8 busy GPUs whose memory rises by ``rise`` points."""
    n = int(seconds / INTERVAL)
    return rd.system_frame(
        n,
        interval=INTERVAL,
        gpu_util=[rd.busy_gpu(n, seed=g) for g in range(GPUS)],
        gpu_mem=[memory(n, rise, seed=g) for g in range(GPUS)],
    )


def new_job(path: Path, status: str = "Running", end: float | None = None) -> Store:
    store = rd.new_job(path, status=status, end=end)
    rd.node_info(store, gpus=GPUS, interval_ms=int(INTERVAL * 1000))
    return store


def judge(path: Path, seconds: float, rise: float) -> RuleResult:
    """GPUMemoryIncrease (default parameters) on a finished job of ``seconds``."""
    store = new_job(path, "Completed", rd.T0 + seconds)
    rd.write_system(store, samples(seconds, rise), segment_rows=20_000)
    (res,) = evaluate_job(stepscope.open(str(path)), [{"name": "GPUMemoryIncrease"}])
    return res


def test_a_leak_over_a_day_is_found_like_one_over_an_hour(tmp_path: Path) -> None:
    day = judge(tmp_path / "day", DAY, 50.0)
    assert day.status is Status.ISSUES_FOUND, day.message
    assert {f.device for f in day.findings} == {f"gpu{g}" for g in range(GPUS)}
    worst = max(day.findings, key=lambda f: f.value or 0.0)
    assert worst.value == pytest.approx(50.0, abs=5.0)
    assert "over the job so far" in worst.message
    assert (worst.end or 0.0) - (worst.start or 0.0) > 23 * HOUR
    assert day.cost_seconds is None  # memory costs no job time one can state honestly

    hour = judge(tmp_path / "hour", HOUR, 50.0)
    assert hour.status is Status.ISSUES_FOUND
    assert {f.device for f in hour.findings} == {f"gpu{g}" for g in range(GPUS)}


def test_flat_noisy_memory_over_a_day_is_silent(tmp_path: Path) -> None:
    res = judge(tmp_path / "flat", DAY, 0.0)
    assert res.status is Status.NO_ISSUES_FOUND, res.message
    assert res.datapoints > 80_000 and not res.findings


def test_the_look_back_alone_misses_the_day_long_leak() -> None:
    """Why the trend is needed: 20 windows of 500 s see ~5.8 points of a 50-point day."""
    lookback_s = 20 * 500 * INTERVAL
    assert 50.0 * lookback_s / DAY < 10.0


@pytest.mark.parametrize("rise", [50.0, 0.0])
def test_live_finds_the_day_long_leak_with_a_bounded_summary(tmp_path: Path, rise: float) -> None:
    store, frame = new_job(tmp_path / "live"), samples(DAY, rise)
    now = rd.T0
    runner = Runner(
        stepscope.open(str(tmp_path / "live")),
        build_rules([{"name": "GPUMemoryIncrease"}]),
        lambda: now,
    )
    sizes = []
    for hour in range(1, 25):  # one scan an hour
        rows = frame[(frame["time"] >= now) & (frame["time"] < rd.T0 + hour * HOUR)]
        rd.write_system(store, rows.reset_index(drop=True))
        now = rd.T0 + hour * HOUR
        (res,) = runner.scan()
        kept = runner.state.history.get("GPUMemoryIncrease", {}).get(rd.NODE)
        sizes.append(0 if kept is None else len(kept))
    assert max(sizes) <= CAP * GPUS  # flat in the job's age
    assert sizes[-1] > 0  # dropped chunks are summarised, not forgotten
    expected = Status.ISSUES_FOUND if rise else Status.NO_ISSUES_FOUND
    assert res.verdict is expected, res.message
    assert res.datapoints > 0
    if rise:
        assert any("over the job so far" in f.message for f in res.findings)


def test_theil_sen_ignores_a_jump_and_compaction_keeps_the_slope() -> None:
    t = np.arange(300, dtype=np.float64)
    step = np.where(t < 5, 10.0, 60.0)  # a warm-up jump, then flat
    assert theil_sen(t, step) == 0.0
    line = 0.5 * t + np.random.default_rng(0).normal(0, 2, len(t))
    assert theil_sen(t, line) == pytest.approx(0.5, abs=0.02)
    frame = pd.DataFrame({"key": "gpu0", "time": t, "value": line, "n": 1})
    small = compact(frame, 64)
    assert len(small) <= 64 and small["n"].sum() == len(t)
    assert trend_rise(small) == pytest.approx(trend_rise(frame), rel=0.05)
