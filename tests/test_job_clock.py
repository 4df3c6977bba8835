"""The job's one clock (docs/format.md, "One clock"), on injected clocks: a step of the
wall clock is noticed once with its size and moves no time of the job; durations are
never negative; the live rule runner schedules its scans on the monotonic clock.
The end-to-end runs, with a real step, are in test_clock_step.py."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import rules_data as rd
import stepscope
from stepscope.jobfolder import STEP_FAULT_S, JobClock, job_seconds, job_timeline
from stepscope.rules import build_rules
from stepscope.rules.runner import Runner
from test_rules_runner import live_job

T0 = rd.T0


def test_a_step_of_the_wall_clock_moves_no_time_and_is_noticed_once() -> None:
    wall, mono = [T0], [100.0]
    clock = JobClock(wall=lambda: wall[0], mono=lambda: mono[0])
    assert clock.start == T0 and clock.offset_s == T0 - 100.0
    wall[0] += 10 + STEP_FAULT_S / 2
    mono[0] += 10  # a drift below STEP_FAULT_S is no step
    assert clock.step() is None and clock.now() == T0 + 10
    wall[0] -= 3600
    # measured against the job's timeline: the drift before counts in
    assert clock.step() == pytest.approx(-3600 + STEP_FAULT_S / 2)
    assert clock.step() is None  # noticed once
    mono[0] += 5
    wall[0] += 5
    assert clock.now() == T0 + 15 and clock.elapsed() == 15  # the job's time went on
    wall[0] += 3600  # stepped back again: a second step
    assert clock.step() == pytest.approx(3600)


def test_a_job_lasts_its_measured_duration_and_never_less_than_nothing() -> None:
    meta = {"start_time": T0, "end_time": T0 + 3635.2, "duration_s": 35.2}
    assert job_seconds(meta, T0) == 35.2  # measured on the monotonic clock: preferred
    assert job_seconds({"start_time": T0, "end_time": T0 + 20}, 0) == 20  # older jobs
    assert job_seconds({"start_time": T0, "end_time": None}, T0 - 3600) == 0  # running
    assert job_seconds({"start_time": T0, "end_time": None}, T0 + 7) == 7
    assert job_seconds({"end_time": T0}, T0) is None


def test_the_job_timeline_of_a_job_without_an_offset_is_the_wall_clock() -> None:
    assert job_timeline({}) is time.time
    offset = 1000.0
    assert job_timeline({"monotonic_offset_s": offset})() == pytest.approx(
        time.monotonic() + offset, abs=1.0
    )


def test_the_runner_scans_on_at_its_period_when_the_wall_clock_steps_back(
    tmp_path: Path,
) -> None:
    """Scheduled on the wall clock, a step of -1 h stopped the scans (and the reads of
    job.json that end the runner) for an hour; on the monotonic clock nothing changes."""
    live_job(tmp_path / "j", [{"name": "StepOutlier"}], T0)
    wall, mono, ages = [T0], [0.0], []
    runner = Runner(stepscope.open(str(tmp_path / "j")), build_rules([{"name": "StepOutlier"}]),
                    clock=lambda: wall[0], mono=lambda: mono[0])  # fmt: skip

    def scan() -> list[object]:
        ages.append(mono[0])
        return []

    def sleep(s: float) -> None:
        mono[0] += max(s, 1e-3)
        wall[0] += max(s, 1e-3) - (3600 if len(ages) == 5 and wall[0] > T0 else 0)

    runner.scan, runner.sleep, runner.cpu = scan, sleep, lambda: 0.0  # type: ignore[method-assign]
    looks: list[float] = []

    def job_over(parent: object) -> bool:
        looks.append(mono[0])
        return mono[0] >= 60

    runner.job_over = job_over  # type: ignore[method-assign]
    runner.final = lambda: []  # type: ignore[method-assign]
    runner.run(None)
    assert wall[0] < T0  # the wall clock did step back, past the start
    assert len(ages) >= 60 / 2.0 - 1  # a scan every 2 s throughout
    assert max(b - a for a, b in itertools.pairwise(ages)) <= 2.0 + 1e-2
    assert looks[-1] >= 60  # and the job's end was seen


def test_the_agent_and_the_sampler_take_the_launchers_timeline(tmp_path: Path) -> None:
    """Given the job clock's offset, the agent's and the sampler's times are the
    launcher's (an hour-stepped wall clock read at their start would move every row);
    without one, their own wall read. A fault record takes this process's job clock."""
    from stepscope.agent._clock import Clock
    from stepscope.jobfolder import FaultLog, use_clock
    from stepscope.sampler._sampler import Sampler
    from stepscope.store import open_store

    launcher = JobClock(wall=lambda: time.time() + 3600.0)  # its start: an hour ahead
    agent = Clock(offset_s=2.0, timeline_s=launcher.offset_s)  # + the node's offset
    assert agent.now() - 2.0 == pytest.approx(launcher.now(), abs=0.05)
    # a reading of the (unstepped) wall clock lands on the job's timeline, offset included
    assert agent.aligned(time.time()) == pytest.approx(agent.now(), abs=0.05)
    assert Clock().now() == pytest.approx(time.time(), abs=0.05)  # the twin: no timeline
    store = open_store(str(tmp_path))
    probe = SimpleNamespace(gpus=None)  # no sampling here: only the sampler's clock
    sampler = Sampler(store, "n", timeline_s=launcher.offset_s, probe=probe)  # type: ignore[arg-type]
    try:
        assert sampler.now() == pytest.approx(launcher.now(), abs=0.05)
        sampler.faults.record(OSError("x"))
        assert sampler.faults.doc["time"] == pytest.approx(launcher.now(), abs=0.05)
    finally:
        sampler.close()
    use_clock(launcher.now)
    try:
        doc = FaultLog(None, "n", 1).record("control", "refused")
        assert doc["time"] == pytest.approx(launcher.now(), abs=0.05)
    finally:
        use_clock(time.time)
    assert FaultLog(None, "n", 1).record("c", "e")["time"] == pytest.approx(time.time(), abs=0.05)
