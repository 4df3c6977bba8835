"""The H200 jobs recorded with the sampled device timer (tests/data/h200-sampled, by
scripts/gpu-check; tests/data/README.md): the agent of issue 29 timed one step per
50 ms of training, so most steps have null ``gpu_*`` columns, and no step after the
stall job's profiling window stayed marked. The readers, the rules and the diagnosis
must say on these what they say on the jobs where every step was timed
(tests/data/h200, test_rules_h200.py): the stand-in for the untimed steps is the timed
steps' median (analysis/device.py, rules/_device.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import stepscope
from h200_jobs import h200_job
from stepscope.cli import main
from stepscope.rules import RuleResult, Status, evaluate_job

JOBS = ("stall", "loader", "leak", "healthy")
STALLS = set(range(45, 600, 50))  # recorded steps of the 12 planted host stalls


@dataclass(frozen=True)
class Judged:
    path: Path
    results: dict[str, RuleResult]

    def fired(self) -> set[str]:
        return {r for r, res in self.results.items() if res.status is Status.ISSUES_FOUND}


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Judged]:
    out = {}
    for name in JOBS:
        path = h200_job(tmp_path_factory.mktemp("sampled"), name, sampled=True)
        results = evaluate_job(stepscope.open(str(path)))
        out[name] = Judged(path, {r.rule: r for r in results})
    return out


def test_most_steps_are_untimed_and_none_stays_profiled_after_the_window(
    sampled: dict[str, Judged],
) -> None:
    for name in ("stall", "healthy"):  # 3 and 9 ms steps: one in 6 to 20 timed
        steps = stepscope.open(str(sampled[name].path)).steps(phase="train")
        timed = int(steps["gpu_forward"].notna().sum())
        assert 20 < timed < len(steps) / 5
    steps = stepscope.open(str(sampled["stall"].path)).steps(phase="train")
    marked = set(steps.loc[steps["profiled"].astype(bool), "step"])
    assert marked and min(marked) == 100 and max(marked) < 110  # the window was 100-102


def test_the_verdicts_are_those_of_the_fully_timed_jobs(sampled: dict[str, Judged]) -> None:
    assert sampled["healthy"].fired() == set()
    assert sampled["loader"].fired() == {"DataLoaderWorkers", "DataLoading", "BatchSize"}
    assert sampled["leak"].fired() == {"PythonOverhead", "GPUMemoryIncrease", "BatchSize"}
    # stall's detailed window shows its fp32 GEMMs on CUDA cores of an H200 (no TF32):
    # FP32MatMul's true finding; the healthy job (the same model) has no window
    assert sampled["stall"].fired() == {"StepOutlier", "FP32MatMul"}


def test_step_outlier_finds_the_stalls_after_the_window(sampled: dict[str, Judged]) -> None:
    res = sampled["stall"].results["StepOutlier"]
    flagged: set[int] = set()
    for f in res.findings:
        assert f.steps is not None
        flagged.update(range(f.steps[0], f.steps[1] + 1))
    assert len(flagged & STALLS) >= 11 and res.datapoints > 500
    silent = sampled["healthy"].results["StepOutlier"]  # its twin: same rule, no stalls
    assert silent.status is Status.NO_ISSUES_FOUND and silent.datapoints > 500


def test_python_overhead_reads_the_device_on_every_step(sampled: dict[str, Judged]) -> None:
    leak = sampled["leak"].results["PythonOverhead"]
    assert leak.status is Status.ISSUES_FOUND and "with the GPU idle" in leak.findings[0].message
    assert leak.details["device_steps"] == leak.datapoints  # untimed steps take the median
    for twin in ("healthy", "stall"):  # GPU-bound, most steps untimed: the host ran ahead
        res = sampled[twin].results["PythonOverhead"]
        assert res.status is Status.NO_ISSUES_FOUND and res.datapoints > 0
        assert res.details["device_steps"] == res.datapoints


def test_show_gives_the_timed_steps_split_and_every_steps_busy_share(
    sampled: dict[str, Judged], capsys: pytest.CaptureFixture[str]
) -> None:
    path = sampled["stall"].path
    assert main(["show", "--json", str(path)]) == 0
    device = json.loads(capsys.readouterr().out)["steps"]["phases"]["train"]["device"]
    steps = stepscope.open(str(path)).steps(phase="train")
    parts = steps[["gpu_forward", "gpu_backward", "gpu_optimizer"]].to_numpy(np.float64)
    timed = ~np.isnan(parts).any(axis=1)
    per_step = parts[timed].sum(axis=1)
    assert device["steps"] == int(timed.sum())
    assert device["forward"]["seconds"] == pytest.approx(np.median(parts[timed, 0]), abs=1e-6)
    busy = (per_step.sum() + np.median(per_step) * (~timed).sum()) / steps["duration"].sum()
    assert device["busy_share"] == pytest.approx(busy, abs=1e-5)
    assert 0.6 < device["busy_share"] < 0.9  # 12 stalls of 0.3 s idle the GPU
    assert device["ran_ahead"] is True
