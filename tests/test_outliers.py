"""The one outlier definition (analysis.outliers) that StepOutlier and the report share."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rules_data as rd
from stepscope.analysis.outliers import Definition, cost_by_rank, judge, judge_steps
from stepscope.errors import RuleConfigError
from stepscope.rules import build_rules

N = 4000
STEPS = np.arange(N)
STALLS = (STEPS % 40 == 0) & (STEPS > 0)  # a 0.6 s stall every 40th step


def noisy(n: int = N, seed: int = 0) -> np.ndarray:
    """Steps of 20 ms with a heavy right tail, as on a busy host (log-normal)."""
    return 0.02 * np.random.default_rng(seed).lognormal(0.0, 0.5, n)


@pytest.mark.parametrize("seed", range(3))
def test_periodic_stalls_in_heavy_tailed_noise_are_found(seed: int) -> None:
    found = judge(noisy(seed=seed) + 0.6 * STALLS, STEPS).outlier
    assert found[STALLS].all()
    assert found[~STALLS].sum() <= N // 1000  # a step 5x slower than its neighbours, rarely


@pytest.mark.parametrize("seed", range(3))
def test_a_healthy_noisy_series_has_few_outliers(seed: int) -> None:
    assert judge(noisy(seed=seed), STEPS).outlier.sum() <= N // 1000
    rng = np.random.default_rng(seed)  # 20% of steps delayed by a busy host, under 0.1 s
    busy = 0.2 + (rng.random(N) < 0.2) * rng.uniform(0, 0.08, N)
    assert judge(busy, STEPS).outlier.sum() == 0


@pytest.mark.parametrize("length", [1, 20, 35])
def test_a_burst_of_consecutive_slow_steps_is_found(length: int) -> None:
    d = 0.2 + np.random.default_rng(1).normal(0, 0.005, 500)
    d[200 : 200 + length] += 0.5
    assert np.flatnonzero(judge(d, np.arange(500)).outlier).tolist() == list(
        range(200, 200 + length)
    )


def test_a_constant_series_and_jitter_on_regular_steps() -> None:
    flat = np.full(300, 0.5)
    assert not judge(flat, np.arange(300), min_excess_s=0.0).outlier.any()
    flat[150] = 0.7  # 40% slower: an outlier even without min_excess_s
    assert np.flatnonzero(judge(flat, np.arange(300), min_excess_s=0.0).outlier).tolist() == [150]
    jitter = 0.5 * (1 + np.random.default_rng(2).uniform(-0.02, 0.02, 300))
    assert not judge(jitter, np.arange(300), min_excess_s=0.0).outlier.any()  # 2% floor


@pytest.mark.parametrize(
    "d",
    [
        np.tile([0.1, 1.0], 200),  # two kinds of steps, alternating
        np.r_[np.full(200, 0.1), np.full(200, 1.0)],  # a job that slows down
        np.random.default_rng(3).exponential(0.3, 400),
        np.random.default_rng(4).pareto(1.0, 400),
    ],
)
def test_most_steps_are_never_outliers(d: np.ndarray) -> None:
    found = judge(d, np.arange(len(d)), stddev=1.0, min_excess_s=0.0).outlier
    assert found.sum() * 2 <= len(d)


def test_stddev_below_one_is_refused() -> None:
    with pytest.raises(RuleConfigError, match="stddev"):
        build_rules([{"name": "StepOutlier", "parameters": {"stddev": 0.5}}])


def test_series_are_judged_apart_and_short_ones_not_at_all() -> None:
    d = np.r_[np.full(100, 1.0), np.full(100, 0.1), [0.1, 5.0]]
    steps = np.r_[np.arange(100), np.arange(100), [0, 1]]
    series = np.r_[np.zeros(100), np.ones(100), [2, 2]].astype(int)
    j = judge(d, steps, series)
    assert not j.outlier.any()  # rank 1's fast steps are not compared with rank 0's
    assert np.allclose(j.baseline[:200], np.r_[np.full(100, 1.0), np.full(100, 0.1)])


def test_judge_steps_skips_warm_up_and_profiled_steps_and_costs_the_excess() -> None:
    d = np.full(200, 0.2)
    d[[3, 50, 105, 120]] = 3.0
    profiled = np.zeros(200, dtype=bool)
    profiled[100:110] = True
    frame = pd.concat(
        [rd.steps_frame(200, duration=d, profiled=profiled), rd.steps_frame(200, rank=1)]
    )
    judged = judge_steps(frame)
    assert len(judged) == 2 * 190 - 10 and judged["rank"].is_monotonic_increasing
    flagged = judged[judged["outlier"]]
    assert flagged["step"].tolist() == [50, 120]
    assert cost_by_rank(judged) == pytest.approx({0: 2 * 2.8})
    assert judge_steps(frame, Definition(skip_steps=0))["outlier"].sum() == 3


def test_the_report_uses_the_parameters_of_the_jobs_verdict() -> None:
    verdict = {"rule": "StepOutlier", "parameters": {"stddev": 3, "window": "x"}}
    assert Definition.of_job([{"rule": "Other"}, verdict]) == Definition(stddev=3.0)  # type: ignore[list-item]
    assert Definition.of_job([]) == Definition()
