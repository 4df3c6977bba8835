"""StepOutlier's contention excuse end to end: a real ``stepscope run`` of a small CPU
training beside several busy processes per core, with stalls every 40th step.

* The stalls sleep (``time.sleep``, as a checkpoint's write waits): the loop waits
  for a core most of the time around them, but not during them. They are the job's
  own and StepOutlier counts them.
* Its twin, with the same parameters and load: the stalls compute, and beside the
  busy processes the loop then spends most of a stall waiting for a core. Each is
  excused for that wait beyond a usual step's, no more ("it waited ... for a core";
  its own part counted when still an outlier).

The busy processes run from just before the job's first step to just after its last
(the script waits for them; beside them, the job's start-up and end took most of each
test), except in the first test, whose median of the wait counts the whole job.

The per-thread run-queue wait (``proc_thread_run_wait``) tells them apart: it is cut
at each step's ends (docs/rules.md). No wall-clock assertion: the verdicts, and the
wait the job folder records.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stepscope
from busy import BusyLoops, stepscope_run_beside
from conftest import SCRIPTS
from stepscope.analysis.host import run_wait_in

pytestmark = pytest.mark.process

STEPS, EVERY = 200, 40
STALLS = set(range(EVERY, STEPS, EVERY))  # 4 stalls
CONFIG = """
[[rules]]
name = "StepOutlier"
parameters = { n_outliers = 0 }
"""
LOOPS_PER_CORE = 4


@pytest.fixture
def many_busy_loops() -> Iterator[BusyLoops]:
    """Four busy-loop processes per core, each in a session of its own: with autogroup
    scheduling, the job's session then gets about a ninth of two cores, and its loop
    waits for a core most of the time. The test starts and stops them; it holds the
    machine alone from its setup on (conftest: the fixture's name)."""
    loops = BusyLoops(LOOPS_PER_CORE, own_session=True)
    try:
        yield loops
    finally:
        loops.stop()


def run(
    tmp_path: Path, load: BusyLoops | None, *stall: str
) -> tuple[dict[str, Any], stepscope.Job]:
    config = tmp_path / "stepscope.toml"
    config.write_text(CONFIG)
    script = [str(SCRIPTS / "mlp.py"), "--steps", str(STEPS), "--step-sleep", "0.02"]
    script += ["--stall-every", str(EVERY), *stall]
    done = stepscope_run_beside(tmp_path, script, load, "--config", str(config))
    assert done.code == 0, done.stderr
    verdict: dict[str, Any] = json.loads((done.job_path / "rules" / "StepOutlier.json").read_text())
    return verdict, stepscope.open(str(done.job_path))


def stall_waits(job: stepscope.Job) -> tuple[np.ndarray, np.ndarray]:
    """(wait for a core inside each stall, its duration), seconds."""
    steps = job.steps()
    stalls = steps[steps["step"].isin(STALLS) & (steps["phase"] == "train")]
    start, end = stalls["start"].to_numpy(np.float64), stalls["end"].to_numpy(np.float64)
    return run_wait_in(job.system(), start, end), end - start


def test_a_sleep_stall_beside_busy_processes_is_counted(
    tmp_path: Path, many_busy_loops: BusyLoops
) -> None:
    many_busy_loops.start()  # for the whole job: the median below counts its start and end
    res, job = run(tmp_path, None, "--stall-s", "0.8")
    found = {f["steps"][0] for f in res["findings"]}
    excused = {f["steps"][0] for f in res["findings"] if "not counted" in f["message"]}
    assert res["status"] == "IssuesFound" and res["datapoints"] > 0, res["message"]
    assert len(found & STALLS) >= 3, sorted(found)  # the stalls are outliers...
    assert not excused & STALLS, res["findings"]  # ...and none is excused
    assert res["cost_seconds"] >= 0.5 * 0.8 * len(found & STALLS)
    # the loop waited for a core around the stalls (the load), not inside them; beside
    # the loops, the job's start and end wait most (80 %), its 20 ms sleeping steps less
    system = job.system()
    assert np.nanmedian(system["proc_thread_run_wait"]) > 20, system["proc_thread_run_wait"]
    waits, durations = stall_waits(job)
    assert (waits < 0.5 * durations).all(), (waits, durations)


def test_a_stall_that_waits_for_a_core_is_excused_for_the_wait(
    tmp_path: Path, many_busy_loops: BusyLoops
) -> None:
    """The stalls compute 0.1 s (the job's own work) and wait for a core most of the
    time: each is excused for the wait inside it beyond a usual step's, no more; its own
    part counts when it is still an outlier (docs/rules.md, StepOutlier)."""
    res, job = run(tmp_path, many_busy_loops, "--stall-s", "0.1", "--stall-cpu")
    stalls = [f for f in res["findings"] if f["steps"][0] in STALLS]
    assert res["datapoints"] > 0, res["message"]
    assert len(stalls) >= 3, res["findings"]  # the stalls are outliers...
    waited = [f for f in stalls if "for a core" in f["message"]]
    assert len(waited) >= 3, stalls  # ...and each is seen to have waited for a core
    waits, durations = stall_waits(job)
    shares = np.sort(waits / durations)
    # a good part of a stall waits (the setup works; CI measured a median of 0.49 on a
    # loaded machine, 0.6-0.7 quiet), and each of the three that show it a real part
    assert np.median(shares) > 0.3 and (shares[-3:] > 0.25).all(), (waits, durations)
    # the wait is never counted: what the stalls cost is less than their time less half
    # of their waits (the sleeping twin above counts its stalls whole)
    cost = res["cost_seconds"] or 0.0
    assert cost < float(durations.sum() - 0.5 * waits.sum()), (cost, waits, durations)


WHOLE_JOB = """
[[rules]]
name = "HostContention"
parameters = { patience = 4, window = 10 }  # 5 s windows: a short job has several
[[rules]]
name = "StepOutlier"
parameters = { n_outliers = 0 }
"""


def diagnosed(tmp_path: Path, load: BusyLoops | None) -> tuple[list[dict[str, Any]], stepscope.Job]:
    """A job with one 1 s sleep stall (a checkpoint's worth), diagnosed by ``show``."""
    config = tmp_path / "stepscope.toml"
    config.write_text(WHOLE_JOB)
    script = [str(SCRIPTS / "mlp.py"), "--steps", "3000"]  # CPU-bound: no sleep a step
    script += ["--stall-at", "1500", "--stall-s", "1"]
    done = stepscope_run_beside(tmp_path, script, load, "--config", str(config))
    assert done.code == 0, done.stderr
    show = subprocess.run(
        [str(Path(sys.executable).parent / "stepscope"), "show", "--json", str(done.job_path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    entries: list[dict[str, Any]] = json.loads(show.stdout)["diagnosis"]
    return entries, stepscope.open(str(done.job_path))


def test_whole_job_contention_is_costed_and_ranked_above_a_stall(
    tmp_path: Path, many_busy_loops: BusyLoops
) -> None:
    """Busy processes from before the first step to the end: no step outside contention
    to compare with. Its cost is what the job's threads waited for a core, most of
    the step time, ranked above the 1 s stall (counted: the loop slept)."""
    # for the whole job, as the docstring says: with the loops during the steps only,
    # a CI run's steps (under 20 s) gave HostContention (4 windows of 5 s) too little
    many_busy_loops.start()
    entries, job = diagnosed(tmp_path, None)
    rules = [e["rule"] for e in entries]
    assert rules[:2] == ["HostContention", "StepOutlier"], entries
    contention, stall = entries[0]["cost_seconds"], entries[1]["cost_seconds"]
    steps = float(job.steps()["duration"].sum())
    assert stall == pytest.approx(1.0, abs=0.3)
    # four busy loops per core: the loop waits for a core most of the time it runs
    assert 0.5 * (steps - stall) <= contention <= steps, (contention, stall, steps)


def test_the_same_job_alone_has_only_the_stall(tmp_path: Path) -> None:
    """The twin, same parameters, without the busy processes: the stall is found (the
    rest of the machine's load is what other tests leave: contention may be found
    too, then costed by what the job waited)."""
    entries, job = diagnosed(tmp_path, None)
    assert "StepOutlier" in [e["rule"] for e in entries], entries
    assert len(job.steps()) > 0 and len(job.system()) > 0
    contention = [e for e in entries if e["rule"] == "HostContention"]
    if contention:
        print(f"busy machine: {contention[0]['message']}")
