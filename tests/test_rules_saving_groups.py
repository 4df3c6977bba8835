"""More workers on a node busy with other sessions (Linux's autogroup): the job's group
weighs as one group on each core its tasks run on, so more workers take back part
of the busy cores (issue 30; measured in docs/rules.md, "The fair share").

Jobs are ``test_rules_cpu``'s (4 cores, 400 steps of 0.2 s, half waiting for data)
with two workers that each run 55% of a core and wait 45% for one: no core idle,
the job at 1.4 cores (the loop 0.3, its run-queue wait 0.2), ``loops`` other
sessions each with one busy loop. Each firing test has its twin with the same
parameters where the load leaves the workers nothing to take.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rules_data as rd
from rules_data import fires, judge
from stepscope.rules import Status
from test_rules_cpu import WAITING, N, events, loader, threads

T = 395 * 0.2  # DataLoaderWorkers' steps (the first 5 skipped), seconds
JOB, MAIN = 140.0, 30.0  # the job's CPU and its loop's, % of one core


def grouped_job(path: Path, loops: int, pool_wait: float = 90.0, proc_cpu: float = JOB) -> Path:
    """No core idle; ``loops`` busy loops, each in a session of its own (none in the
    job's autogroup), at every 6th sample (a scan every 3 s)."""
    store = rd.new_job(path, end=rd.T0 + 5 + N * 0.2)
    rd.node_info(store, gpus=0, autogroup=True)
    system = rd.system_frame(int((N * 0.2 + 10) / 0.5), cpu=100.0)
    system["proc_cpu"], system["proc_cpu_main"] = np.float32(proc_cpu), np.float32(MAIN)
    system["proc_run_wait"], system["proc_pool_run_wait"] = np.float32(20.0), pool_wait
    system["proc_pool_run_wait"] = system["proc_pool_run_wait"].astype(np.float32)
    system["run_queue"] = np.int32(loops + 3)
    scans = np.arange(len(system)) % 6 == 5
    system["others_cpu_group"] = np.where(scans, 0.0, np.nan).astype(np.float32)
    system["others_groups"] = pd.array(np.where(scans, loops, 0), "Int32")
    system.loc[~scans, "others_groups"] = pd.NA
    rd.write_system(store, system)
    rd.write_steps(store, rd.steps_frame(N, **WAITING))
    events(store, [threads(1), loader(2)])
    return path


def test_workers_take_back_part_of_cores_busy_with_other_sessions(tmp_path: Path) -> None:
    """Four loops, one per core: with a worker per core the job's group is on every
    core beside one loop, and gets half of each (2 cores): its 1.4 cores of work take
    0.7 of the time. The twin: sixteen loops (four per core) leave it a fifth of each
    (0.8 core), less than it has: nothing to save, and the fix says so."""
    res = judge(grouped_job(tmp_path / "four", 4), "DataLoaderWorkers")
    fires(res)
    assert res.saving_seconds == pytest.approx(T * (1 - 1.4 / 2.0), rel=1e-3)
    assert "about 2.00 cores in all (its fair share in its session's autogroup)" in str(
        res.details["saving_bound"]
    )
    message = res.findings[0].message
    assert "add workers: no core is idle, but they would take a fair share" in message
    crowded = judge(grouped_job(tmp_path / "sixteen", 16), "DataLoaderWorkers")
    fires(crowded)
    assert crowded.saving_seconds == pytest.approx(0.0, abs=1e-6)
    assert "make the transforms cheaper: no core is idle" in crowded.findings[0].message


def test_a_worker_waiting_for_a_core_is_saturated(tmp_path: Path) -> None:
    """Workers starved by the load run only 20% of a core each, but wait 70% for one:
    busy 90%, saturated. The twin, the same workers waiting 5%: idle workers (slow
    storage, a lock), left to DataLoading."""
    starved = judge(grouped_job(tmp_path / "starved", 4, 140.0, 70.0), "DataLoaderWorkers")
    fires(starved)
    assert "each used a median 5% (0.20 core) and waited 18% (0.70 core) for a core" in (
        starved.findings[0].message
    )
    idle = judge(grouped_job(tmp_path / "idle", 4, 10.0, 70.0), "DataLoaderWorkers")
    assert idle.status is Status.NO_ISSUES_FOUND and idle.datapoints > 0
