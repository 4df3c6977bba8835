"""CUDAMemory on the allocator's step columns: a leak, fragmentation and a peak near
the card's memory each fire on their planted job, and a twin with the same parameters
and as many readings stays silent. Jobs written as the agent writes them
(``AGENT_STEPS_SCHEMA``) on an 8x A100-40GB node (tests/rules_data.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rules_data import (
    MEM_TOTAL,
    fires,
    judge,
    new_job,
    node_info,
    silent,
    steps_frame,
    write_process_start,
    write_rows,
)
from stepscope.jobfolder import AGENT_STEPS_SCHEMA, STEPS_SCHEMA
from stepscope.rules import Status

GB, MB = 1e9, 1e6
N = 400
PARAMS = {"skip_steps": 10, "windows": 5, "growth": 10, "min_growth_mb": 256, "peak_share": 90}


def noise(seed: int, scale: float = 20 * MB) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, scale, N)


def memory_job(
    path: Path,
    allocated: np.ndarray,
    reserved: np.ndarray,
    peak: np.ndarray,
    gpus: int = 8,
) -> Path:
    store = new_job(path)
    if gpus:
        node_info(store, gpus=gpus)
    steps = steps_frame(N).assign(
        cuda_allocated=allocated.astype(np.int64),
        cuda_reserved=reserved.astype(np.int64),
        cuda_peak=np.maximum.accumulate(peak).astype(np.int64),  # the allocator's: never falls
        collective=np.float32(0.0),
    )
    write_rows(store, "steps/rank-0", steps, AGENT_STEPS_SCHEMA)
    write_process_start(store)
    return path


FLAT = 8 * GB + noise(1)
STEP = np.arange(N)


def leak(from_step: int) -> np.ndarray:
    return FLAT + 4 * MB * np.clip(STEP - from_step, 0, None)


def test_a_leak_fires_naming_the_step_it_began(tmp_path):
    allocated = leak(100)
    res = judge(memory_job(tmp_path / "j", allocated, allocated + 1 * GB, allocated + 2 * GB),
                "CUDAMemory", **PARAMS)  # fmt: skip
    fires(res)
    (f,) = res.findings
    assert "CUDA memory allocated grew by" in f.message and "a leak" in f.message
    assert f.steps is not None and 100 <= f.steps[0] <= 110, f.message
    assert f.value == pytest.approx(4 * MB * (361 - 100) / GB, rel=0.1)  # last group's middle
    assert f.rank == 0 and f.device == "gpu0" and "retain_graph" in f.recommendation


def test_a_flat_allocation_is_silent(tmp_path):
    res = judge(memory_job(tmp_path / "j", FLAT, FLAT + 1 * GB, FLAT + 2 * GB), "CUDAMemory",
                **PARAMS)  # fmt: skip
    silent(res)
    assert res.datapoints == N - 10


def test_a_growing_reserve_under_flat_allocations_is_fragmentation(tmp_path):
    reserved = FLAT + 1 * GB + 5 * MB * np.clip(STEP - 50, 0, None)
    res = judge(memory_job(tmp_path / "j", FLAT, reserved, FLAT + 2 * GB), "CUDAMemory", **PARAMS)
    fires(res)
    (f,) = res.findings
    assert "reserved grew by" in f.message and "fragments" in f.message
    assert f.steps is not None and 50 <= f.steps[0] <= 65, f.message  # within the noise
    assert "expandable_segments:True" in f.recommendation


def test_a_reserve_that_follows_a_leak_is_the_leak_only(tmp_path):
    allocated = leak(50)
    res = judge(memory_job(tmp_path / "j", allocated, allocated + 1 * GB, allocated + 2 * GB),
                "CUDAMemory", **PARAMS)  # fmt: skip
    assert [("leak" in f.message) for f in res.findings] == [True]


def test_a_peak_near_the_card_is_an_out_of_memory_risk(tmp_path):
    peak = np.where(STEP < 200, 0.70, 0.93) * MEM_TOTAL
    res = judge(memory_job(tmp_path / "j", FLAT, FLAT + 1 * GB, peak), "CUDAMemory", **PARAMS)
    fires(res)
    (f,) = res.findings
    assert "peak reached 93% of the card's 42.9 GB" in f.message
    assert f.steps == (200, N - 1) and "activation checkpointing" in f.recommendation


def test_a_peak_with_headroom_is_silent(tmp_path):
    peak = np.where(STEP < 200, 0.70, 0.85) * MEM_TOTAL
    silent(judge(memory_job(tmp_path / "j", FLAT, FLAT + 1 * GB, peak), "CUDAMemory", **PARAMS))


def test_without_the_card_size_the_peak_is_not_judged(tmp_path):
    peak = np.full(N, 0.99 * MEM_TOTAL)
    res = judge(memory_job(tmp_path / "j", FLAT, FLAT + 1 * GB, peak, gpus=0), "CUDAMemory",
                **PARAMS)  # fmt: skip
    silent(res)
    assert res.details["card_memory_unknown"] == [0]


def test_no_allocator_columns_is_not_applicable(tmp_path):
    store = new_job(tmp_path / "j")
    write_rows(store, "steps/rank-0", steps_frame(N), STEPS_SCHEMA)
    write_process_start(store)
    res = judge(tmp_path / "j", "CUDAMemory", **PARAMS)
    assert res.status is Status.NOT_APPLICABLE and "no CUDA allocator readings" in res.reason


def test_too_few_readings_is_not_applicable(tmp_path):
    allocated = leak(100)
    path = memory_job(tmp_path / "j", allocated, allocated, allocated)
    res = judge(path, "CUDAMemory", **{**PARAMS, "skip_steps": N - 5})  # 5 readings left
    assert res.status is Status.NOT_APPLICABLE and "fewer than 10 training steps" in res.reason


def test_growth_whose_last_reading_dips_begins_at_its_first_reading_above() -> None:
    """A leak whose last reading falls back (an accumulation step freed its buffers)
    is named where it first rose, never past the readings (an IndexError before)."""
    from stepscope.rules._cuda_memory import began_at

    values = np.array([100.0, 100, 100, 100, 150, 200, 250, 300, 100], np.float64)
    assert began_at(values, rise=200.0) == 4
    assert began_at(values[:-1], rise=200.0) == 4  # the twin without the dip
