"""A rule whose input column is absent or null in every sample is NotApplicable, with
the column named in its reason: never NoIssuesFound on what was never measured.

Issue 30: IOBottleneck said NoIssuesFound on 6,200 samples of an imported job whose
I/O-wait column was entirely null. One case per family of system and host rules;
each twin has the same parameters and data but the column recorded, and is judged
(datapoints > 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rules_data as rd
import stepscope
from stepscope.rules import RuleResult, Status, evaluate_job

N = 1200
GPU = {"patience": 10, "window": 200}
LOW = [rd.busy_gpu(N, level=20)] * 2
NAN = [np.full(N, np.nan)] * 2
HIGH, FLAT = [np.full(N, 90.0)] * 2, [np.full(N, 20.0)] * 2


def judge(path: Path, rule: str, params: dict[str, Any]) -> RuleResult:
    (res,) = evaluate_job(stepscope.open(str(path)), [{"name": rule, "parameters": params}])
    return res


@pytest.mark.parametrize(
    ("rule", "params", "unrecorded", "recorded", "column"),
    [
        ("IOBottleneck", GPU, {"iowait": np.nan}, {"iowait": 1.0}, "cpu_iowait"),
        ("CPUBottleneck", GPU, {"cpu": np.nan}, {"cpu": 45.0}, "cpu"),
        ("BatchSize", GPU, {"gpu_mem": NAN}, {"gpu_mem": HIGH}, "gpu0_mem_util"),
        ("GPUMemoryIncrease", GPU, {"gpu_mem": NAN}, {"gpu_mem": FLAT}, "gpu0_mem_util"),
    ],
)  # fmt: skip
def test_system_rule_on_a_null_column_is_not_applicable_and_names_it(
    tmp_path: Path,
    rule: str,
    params: dict[str, Any],
    unrecorded: dict[str, Any],
    recorded: dict[str, Any],
    column: str,
) -> None:
    rd.gpu_job(tmp_path / "null", N, gpu_util=LOW, **unrecorded)
    rd.gpu_job(tmp_path / "twin", N, gpu_util=LOW, **recorded)
    res = judge(tmp_path / "null", rule, params)
    assert res.status is Status.NOT_APPLICABLE, res
    assert column in res.message and "null" in res.message and res.datapoints == 0
    twin = judge(tmp_path / "twin", rule, params)
    assert twin.status is Status.NO_ISSUES_FOUND and twin.datapoints > 0, twin


def test_io_bottleneck_reason_names_both_io_wait_columns(tmp_path: Path) -> None:
    """The job's own I/O wait (proc_io_wait) would do as well as the node's."""
    rd.gpu_job(tmp_path / "null", N, gpu_util=LOW, iowait=np.nan)
    res = judge(tmp_path / "null", "IOBottleneck", GPU)
    assert "proc_io_wait or cpu_iowait" in res.message


@pytest.mark.parametrize("mem_percent", [np.nan, 30.0])
def test_host_rule_on_a_null_column_is_not_applicable_and_names_it(
    tmp_path: Path, mem_percent: float
) -> None:
    store = rd.new_job(tmp_path / "job", end=rd.T0 + N * 0.5)
    rd.node_info(store)
    rd.write_system(store, rd.system_frame(N).assign(mem_percent=np.float32(mem_percent)))
    rd.write_steps(store, rd.steps_frame(100))
    res = judge(tmp_path / "job", "MemoryPressure", {"patience": 10, "window": 20})
    if np.isnan(mem_percent):
        assert res.status is Status.NOT_APPLICABLE and res.datapoints == 0, res
        assert "mem_percent" in res.message and "null" in res.message
    else:
        assert res.status is Status.NO_ISSUES_FOUND and res.datapoints > 0, res
