"""The step-part rules on a GPU job: host time counts only while the device idled.

Steps are ``rules_data.steps_frame``'s (0.2 s: backward 0.08 s, optimizer 0.002 s)
with the device's parts (CUDA-event spans) of a GPU-bound job, the device busy all
but 5 ms of each step (``BUSY``), or of a job whose device idles most of each step
(``IDLE``, 45 ms of device work). Each rule fires on the idle device and stays
silent, having judged the same steps with the same parameters, on the busy one;
CPU jobs keep the host's view (tests/test_rules_cpu.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import rules_data as rd
from rules_data import fires, judge
from stepscope.jobfolder import EVENTS_SCHEMA
from stepscope.rules import RuleResult
from stepscope.rules._device import device_idle, device_steps, waited_on

N = 400  # steps of 0.2 s: 80 s of training, 170 samples at 500 ms
BUSY = (0.06, 0.125, 0.01)  # device forward, backward, optimizer: 0.195 s of a 0.2 s step
IDLE = (0.01, 0.03, 0.005)  # 0.045 s: the device idles 0.155 s of each step
WAITING = {"data_wait": 0.1, "forward": 0.01}  # half of each step waits for data
PYTHON = {"forward": 0.01}  # 'other': 0.103 s of each 0.2 s step


def gpu_steps_job(
    path: Path,
    gpu: tuple[float, float, float],
    steps: dict[str, Any] | None = None,
    facts: list[tuple[str, dict[str, Any]]] | None = None,
) -> Path:
    """A one-node, one-GPU job: its steps with device parts, samples whose GPU
    utilization follows the device's share of a step, and the agent's facts."""
    store = rd.new_job(path, end=rd.T0 + 5 + N * 0.2)
    rd.node_info(store, gpus=1)
    m = int((N * 0.2 + 10) / 0.5)
    level = 100.0 * sum(gpu) / 0.2
    system = rd.system_frame(m, gpu_util=[rd.busy_gpu(m, level=level, dip_every=0)])
    system["proc_cpu_main"] = np.float32(100.0)
    rd.write_system(store, system)
    rd.write_steps(store, rd.steps_frame(N, gpu=gpu, **(steps or {})))
    rd.write_process_start(store)
    if facts:
        frame = pd.DataFrame(
            {
                "time": rd.T0 + 1.0 + np.arange(len(facts)),
                "rank": np.int32(0),
                "local_rank": np.int32(0),
                "node": rd.NODE,
                "pid": np.int32(1000),
                "kind": [k for k, _ in facts],
                "detail": [json.dumps(d) for _, d in facts],
            }
        )
        rd.write_rows(store, "events/rank-0", frame, EVENTS_SCHEMA)
    return path


def silent(res: RuleResult) -> None:
    rd.silent(res)
    assert res.cost_seconds is None  # a silent verdict costs nothing


THREADS = ("threads", {"intra_op": 8, "inter_op": 8, "affinity": 4, "cpu_count": 4})
NO_WORKERS = ("dataloader", {"num_workers": 0, "batch_size": 32, "pin_memory": False})


def test_python_overhead_is_the_host_time_the_device_waited_for(tmp_path: Path) -> None:
    """Half of each step in 'other' is overhead when the device idles meanwhile, and
    none when the device works through queued kernels (a GPU-bound job)."""
    idle = judge(gpu_steps_job(tmp_path / "idle", IDLE, PYTHON), "PythonOverhead")
    busy = judge(gpu_steps_job(tmp_path / "busy", BUSY, PYTHON), "PythonOverhead")
    fires(idle)
    assert idle.findings[0].value == pytest.approx(51.5, abs=0.1)  # 0.103 s of 0.2 s
    assert "with the GPU idle" in idle.findings[0].message
    assert idle.cost_seconds == pytest.approx((N - 5) * (0.103 - 0.01), rel=1e-3)
    assert idle.details == {"device_steps": N - 5, "step_seconds": pytest.approx(79.0)}
    silent(busy)  # 'other' is 0.103 s, but the device idled 5 ms a step: 2.5%
    assert busy.details == {"device_steps": N - 5, "step_seconds": pytest.approx(79.0)}


def test_data_loading_counts_the_wait_the_device_waited_for(tmp_path: Path) -> None:
    idle = judge(gpu_steps_job(tmp_path / "idle", IDLE, WAITING), "DataLoading")
    busy = judge(gpu_steps_job(tmp_path / "busy", BUSY, WAITING), "DataLoading")
    fires(idle)
    assert idle.findings[0].value == pytest.approx(50.0, abs=0.1)
    # the wait above 5% of step time, steps 1 to N-1 (skip_steps 1)
    assert idle.cost_seconds == pytest.approx((N - 1) * (0.1 - 0.01), rel=1e-3)
    silent(busy)  # the host waited 0.1 s for data while the device had 0.195 s of work


def test_data_loader_workers_counts_the_wait_the_device_waited_for(tmp_path: Path) -> None:
    facts = [THREADS, NO_WORKERS]
    idle = judge(gpu_steps_job(tmp_path / "idle", IDLE, WAITING, facts), "DataLoaderWorkers")
    busy = judge(gpu_steps_job(tmp_path / "busy", BUSY, WAITING, facts), "DataLoaderWorkers")
    fires(idle)
    assert "num_workers=0" in idle.findings[0].message
    assert idle.cost_seconds == pytest.approx((N - 5) * 0.1, rel=1e-3)
    silent(busy)


def test_cpu_bound_threads_judges_host_compute_only_while_the_device_idles(
    tmp_path: Path,
) -> None:
    """8 threads on 4 cores: oversubscribed where the host computes (the device waits),
    not where forward and backward only queue kernels for a busy device."""
    idle = judge(gpu_steps_job(tmp_path / "idle", IDLE, facts=[THREADS]), "CPUBoundThreads")
    busy = judge(gpu_steps_job(tmp_path / "busy", BUSY, facts=[THREADS]), "CPUBoundThreads")
    fires(idle)
    assert "oversubscribed: 8 torch thread(s) on 4 usable core(s)" in idle.findings[0].message
    silent(busy)
    assert busy.details["compute_share"] == pytest.approx(2.5, abs=0.1)
    assert busy.details["device_steps"] == N - 5


def test_a_step_without_an_optimizer_step_keeps_the_devices_view() -> None:
    """Gradient accumulation: a step without ``optimizer.step()`` has no device
    optimizer time (null) and no host one (0 s); its device idle is still known. A
    device part null while its host part ran is not timed: like a step the agent did
    not time (one per 50 ms), it takes the running median of the timed steps before it."""
    steps = rd.steps_frame(4, gpu=IDLE, **PYTHON)
    steps.loc[1, ["optimizer", "gpu_optimizer"]] = [0.0, np.nan]
    steps.loc[2, "gpu_optimizer"] = np.nan  # optimizer ran 2 ms on the host: not timed
    steps.loc[3, ["gpu_forward", "gpu_backward", "gpu_optimizer"]] = np.nan  # not timed
    idle = device_idle(steps)
    assert idle[0] == pytest.approx(0.2 - sum(IDLE), abs=1e-6)
    assert idle[1] == pytest.approx(0.2 - IDLE[0] - IDLE[1], abs=1e-6)
    before = np.median([sum(IDLE), IDLE[0] + IDLE[1]])
    assert idle[2] == pytest.approx(0.2 - before, abs=1e-6) and idle[3] == idle[2]
    other = steps["other"].to_numpy(np.float64)
    assert waited_on(steps, ("other",)) == pytest.approx(other)  # 0.103 s < idle
    assert device_steps(steps) == 4


def test_steps_between_timed_ones_take_their_neighbours_device_time() -> None:
    """The agent times one step per 50 ms: the steps between take the running median
    of the timed steps before them (the first timed one's before any), per rank; a
    rank with no timed step keeps the host's view."""
    steps = rd.steps_frame(12, gpu=IDLE, **PYTHON)
    untimed = [0, 1, 3, 4, 5, 7, 8, 9, 10, 11]
    steps.loc[untimed, ["gpu_forward", "gpu_backward", "gpu_optimizer"]] = np.nan
    steps.loc[6, "gpu_backward"] = IDLE[1] * 3  # one slower timed step
    idle = device_idle(steps)
    timed2, timed6 = sum(IDLE), sum(IDLE) + 2 * IDLE[1]
    assert idle[[0, 1, 2, 3, 4, 5]] == pytest.approx([0.2 - timed2] * 6)
    assert idle[6] == pytest.approx(0.2 - timed6)
    assert idle[7:] == pytest.approx([0.2 - (timed2 + timed6) / 2] * 5)
    cpu = rd.steps_frame(3, gpu=IDLE, **PYTHON)
    cpu.loc[:, ["gpu_forward", "gpu_backward", "gpu_optimizer"]] = np.nan
    assert np.isnan(device_idle(cpu)).all() and device_steps(cpu) == 0
