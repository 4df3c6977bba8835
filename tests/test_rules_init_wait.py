"""MaxInitializationTime leaves out the time a start waited for a CPU core (the
sampler's ``proc_run_wait``): a busy machine stretches the CPU work of any start
(imports), which is not the start's own slowness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rules_data as rd
import stepscope
from stepscope.rules import RuleResult, Status, evaluate_job


def _job(path: Path, run_wait: float, late: float = 0.0) -> RuleResult:
    """First step 30 s after the process start; its main process waited ``run_wait`` %
    of that time for a core (the sampler's proc_run_wait), then none. The sampler's
    first sample comes ``late`` seconds after the process start."""
    store = rd.new_job(path)
    rd.write_process_start(store, time=rd.T0)
    rd.write_steps(store, rd.steps_frame(20, start=rd.T0 + 30.0))
    system = rd.system_frame(100, start=rd.T0 + late)  # 50 s at 500 ms
    system["proc_run_wait"] = np.where(system["time"] <= rd.T0 + 30.0, run_wait, 0.0)
    system["proc_run_wait"] = system["proc_run_wait"].astype(np.float32)
    rd.write_system(store, system)
    job = stepscope.open(str(path))
    (res,) = evaluate_job(
        job, [{"name": "MaxInitializationTime", "parameters": {"threshold": 0.25}}]
    )
    return res


def test_a_start_slow_for_want_of_a_core_does_not_fire(tmp_path: Path) -> None:
    res = _job(tmp_path / "busy", run_wait=80.0)  # 24 of the 30 s queued: 6 s its own
    assert res.status is Status.NO_ISSUES_FOUND and res.datapoints > 0, res


def test_the_same_start_without_waiting_fires(tmp_path: Path) -> None:
    res = _job(tmp_path / "own", run_wait=0.0)  # the silent twin's timing, all its own
    assert res.status is Status.ISSUES_FOUND and res.datapoints > 0, res
    assert res.findings[0].value == pytest.approx(0.5)
    assert "waiting for a CPU core" not in res.findings[0].message


def test_what_waited_is_said_when_the_rest_still_fires(tmp_path: Path) -> None:
    res = _job(tmp_path / "both", run_wait=20.0)  # 6 s queued, 24 s its own: over 15 s
    assert res.status is Status.ISSUES_FOUND
    (finding,) = res.findings
    assert finding.value == pytest.approx(0.4, abs=0.02)
    assert "(6 s waiting for a CPU core left out)" in finding.message
    assert finding.end == pytest.approx(rd.T0 + 30.0)  # the span is the start's, whole


def test_the_start_before_the_first_sample_waited_at_the_rate_measured_after() -> None:
    """The sampler reads a process only once both run (5 s measured on a busy machine):
    that head of the start is given the median rate of the rest."""
    from stepscope.analysis.host import run_wait_seconds

    system = rd.system_frame(20, start=rd.T0 + 5.5)  # from 5 to 15 s
    system["proc_run_wait"] = np.float32(80.0)
    assert run_wait_seconds(system, rd.T0, rd.T0 + 15.0) == pytest.approx(0.8 * 15.0)
    system.loc[0, "proc_run_wait"] = np.nan  # a process's first reading tells nothing
    assert run_wait_seconds(system, rd.T0, rd.T0 + 15.0) == pytest.approx(0.8 * 15.0)
    assert run_wait_seconds(system.iloc[:0], rd.T0, rd.T0 + 15.0) == 0.0


def test_a_late_sampler_still_leaves_the_wait_out(tmp_path: Path) -> None:
    res = _job(tmp_path / "late", run_wait=80.0, late=5.0)
    assert res.status is Status.NO_ISSUES_FOUND and res.datapoints > 0, res


def _unrecorded_start(path: Path, first_step_after: float) -> RuleResult:
    """An imported job (no ``process_start`` events): steps from ``first_step_after``
    seconds after the job's start; threshold 0.25 min (15 s)."""
    store = rd.new_job(path, status="Imported", start=rd.T0)
    rd.write_steps(store, rd.steps_frame(20, start=rd.T0 + first_step_after))
    rd.write_system(store, rd.system_frame(100, start=rd.T0))
    (res,) = evaluate_job(
        stepscope.open(str(path)),
        [{"name": "MaxInitializationTime", "parameters": {"threshold": 0.25}}],
    )
    return res


def test_without_process_starts_the_job_start_is_taken_and_said(tmp_path: Path) -> None:
    """An imported job records no process start: the start is the job's, as the report's
    Initialization takes it, and the message says so."""
    res = _unrecorded_start(tmp_path / "slow", 30.0)
    assert res.status is Status.ISSUES_FOUND and res.datapoints == 1, res
    assert res.findings[0].value == pytest.approx(0.5)
    assert "from the job's start (its processes' starts were not recorded)" in (
        res.findings[0].message
    )


def test_without_process_starts_a_quick_start_is_silent(tmp_path: Path) -> None:
    res = _unrecorded_start(tmp_path / "quick", 5.0)  # the twin: same threshold, 5 s
    assert res.status is Status.NO_ISSUES_FOUND and res.datapoints == 1, res


def test_a_recorded_job_without_process_starts_stays_unknown(tmp_path: Path) -> None:
    """Only an import lacks process starts by nature: a recorded job whose agent could
    not read its start is NotApplicable, not judged from the launcher's start."""
    store = rd.new_job(tmp_path / "j", start=rd.T0)
    rd.write_steps(store, rd.steps_frame(20, start=rd.T0 + 30.0))
    rd.write_system(store, rd.system_frame(100, start=rd.T0))
    (res,) = evaluate_job(stepscope.open(str(tmp_path / "j")), [{"name": "MaxInitializationTime"}])
    assert res.status is Status.NOT_APPLICABLE and "no process_start" in res.message
