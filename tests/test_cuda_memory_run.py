"""Real training under ``stepscope run`` whose process looks, to the agent, like one
that uses CUDA: the allocator stand-in (tests/cuda_allocator.py, the real counter
names) and CUDA event stand-ins installed in ``torch.cuda`` before the loop. One job
keeps a tensor per step from step 100 (a leak), its twin frees it: the allocator
columns are written on the timed steps, and CUDAMemory fires on the leak only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stepscope
from stepscope.rules import Status, evaluate_job

pytestmark = pytest.mark.process

TESTS = Path(__file__).resolve().parent
SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
import torch
from cuda_allocator import MB, StandInAllocator, install

alloc = StandInAllocator()
install(alloc)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
weights = alloc.malloc(600 * MB)  # the model and optimizer state on the device
kept = []
for step in range(260):
    activations = alloc.malloc(256 * MB)
    model(torch.randn(8, 32)).sum().backward()
    alloc.free(activations)
    opt.step()
    opt.zero_grad()
    kept.append(alloc.malloc(8 * MB))
    if not {leak} or step < 100:
        alloc.free(kept.pop())
    time.sleep(0.02)  # 20 ms steps: the device timer reads one in three
"""


def train(run_job, tmp_path: Path, leak: bool) -> stepscope.read.Job:
    script = tmp_path / f"train_{leak}.py"
    script.write_text(SCRIPT.format(tests=str(TESTS), leak=leak))
    run = run_job([str(script)], job=f"leak-{leak}")
    assert run.code == 0, run.stderr[-2000:]
    return stepscope.open(str(run.job_path))


def verdict(job: stepscope.read.Job) -> object:
    (res,) = evaluate_job(job, [{"name": "CUDAMemory", "parameters": {}}])
    return res


def test_a_leak_in_real_training_fires_and_its_twin_stays_silent(run_job, tmp_path):
    job = train(run_job, tmp_path, leak=True)
    steps = job.steps()
    read = steps[steps["cuda_allocated"].notna()]
    assert 30 <= len(read) < len(steps)  # the timed steps only; null, never 0, between
    assert not job.faults()
    step, allocated = read["step"].to_numpy(), read["cuda_allocated"].to_numpy(np.int64)
    # from step 100 each keeps 8 MiB, after its optimizer.step(): in the next step's time
    kept = np.clip(step - 100, 0, None)
    assert (allocated == 600 * 2**20 + 8 * 2**20 * kept).all()  # read at the step's end
    assert (read["cuda_peak"] >= read["cuda_allocated"] + 256 * 2**20 - 8 * 2**20).all()
    assert (read["cuda_reserved"] >= read["cuda_allocated"]).all()
    res = verdict(job)
    assert res.status is Status.ISSUES_FOUND and res.datapoints > 0, res
    (f,) = res.findings
    assert "allocated grew" in f.message and f.steps is not None and 100 <= f.steps[0] <= 115

    twin = verdict(train(run_job, tmp_path, leak=False))
    assert twin.status is Status.NO_ISSUES_FOUND and twin.datapoints > 0, twin
