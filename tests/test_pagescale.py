"""What the job page's charts share (stepscope.analysis.pagescale): the warm-up steps
left above a step chart's y-range, the one rounding of a share, legend words."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import stepscope
from h200_jobs import h200_job
from stepscope.analysis.device import DEVICE_INPUTS, device_parts, device_split, split_text
from stepscope.analysis.pagescale import (
    WARMUP_MAX,
    column_label,
    percent,
    percent_text,
    step_scale,
    warmup_count,
)

PACE = 0.009  # a 9 ms steady state, as the H200's healthy job


def steps(*lead: float, n: int = 200) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.concatenate([lead, PACE * (1 + 0.05 * rng.standard_normal(n))])


def test_a_slow_first_step_is_left_above_the_range_and_named() -> None:
    d = steps(0.2)
    scale = step_scale(np.arange(len(d)) + 100.0, d, np.arange(len(d)))
    assert scale["off_scale"] == [{"x": 100.0, "value": 0.2, "step": 0}]
    assert scale["top"] is not None and d[1:].max() < scale["top"] < 0.02


def test_a_job_without_a_slow_start_keeps_its_whole_range() -> None:
    d = steps()
    assert warmup_count(d) == 0
    assert step_scale(np.arange(len(d)), d, np.arange(len(d))) == {"top": None, "off_scale": []}


def test_a_stall_later_in_the_job_stays_in_range() -> None:
    d = steps(0.2)
    d[120] = 0.3  # a stall: higher than the warm-up, and not at the start
    scale = step_scale(np.arange(len(d)), d, np.arange(len(d)))
    assert warmup_count(d) == 1 and scale == {"top": None, "off_scale": []}  # nothing above


def test_only_the_first_few_steps_can_be_warm_up() -> None:
    slow = steps(*[0.1] * 12)  # a slow start of 12 steps: only WARMUP_MAX are warm-up
    assert warmup_count(slow) == WARMUP_MAX
    assert warmup_count(steps(0.2, n=5)) == 0  # too few steps to know the pace


def test_one_rounding_for_every_bar_table_and_line() -> None:
    assert percent(0.96149) == 96.1 and percent(0.9616) == 96.2
    assert percent_text(0.961999) == "96.2%" and percent_text(1.0) == "100.0%"
    assert percent_text(0.0) == "0.0%"


def test_the_device_line_prints_the_shares_the_bar_draws(tmp_path: Path) -> None:
    rows = stepscope.open(h200_job(tmp_path, "loader")).steps()
    split = device_split({c: rows[c].to_numpy(np.float64) for c in DEVICE_INPUTS})
    assert split is not None
    line = split_text(split)
    parts = device_parts(split)
    assert [name for name, _ in parts] == ["forward", "backward", "optimizer"]
    for name, part in parts:
        assert f"{name} " in line and f"({percent_text(part['share'])})" in line


def test_legends_name_metrics_in_words() -> None:
    assert column_label("gpu0_util") == "GPU 0 utilization"
    assert column_label("gpu3_mem_util") == "GPU 3 memory used"
    assert column_label("mem_percent") == "memory used"
    assert column_label("cpu_iowait") == "I/O wait"
    assert column_label("some_new_metric") == "some new metric"
