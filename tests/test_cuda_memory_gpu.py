"""The real CUDA caching allocator's counters as step columns, and CUDAMemory on a real
leak, under ``stepscope run`` (skipped without an NVIDIA GPU; on CPU the same path is
tested with a stand-in: tests/test_cuda_memory.py, tests/test_cuda_memory_run.py)."""

from __future__ import annotations

import pytest
import torch

import stepscope
from stepscope.rules import Status, evaluate_job

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]

SCRIPT = """
import time, torch
m = torch.nn.Linear(1024, 1024).cuda(); o = torch.optim.SGD(m.parameters(), 0.1)
kept = []
for step in range(200):
    loss = m(torch.randn(256, 1024, device='cuda')).sum()
    loss.backward(); o.step(); o.zero_grad()
    if {leak}:
        kept.append(torch.empty(4 * 2**20, device='cuda'))  # 16 MiB a step, kept
    torch.cuda.synchronize(); time.sleep(0.06)  # every step timed
print(torch.cuda.max_memory_allocated())
"""


def _job(run_job, tmp_path, leak: bool) -> stepscope.read.Job:
    script = tmp_path / f"gpu_memory_{leak}.py"
    script.write_text(SCRIPT.format(leak=leak))
    r = run_job([str(script)], "--no-rules", job=f"mem-{leak}")
    assert r.code == 0, r.stderr
    return stepscope.open(r.job_path)


def test_the_allocator_columns_match_the_real_counters_and_judge_a_leak(run_job, tmp_path):
    job = _job(run_job, tmp_path, leak=True)
    steps = job.steps(phase="train")
    read = steps[steps["cuda_allocated"].notna()]
    assert len(read) >= len(steps) - 2  # 60 ms steps: all timed once CUDA started
    assert (read["cuda_reserved"] >= read["cuda_allocated"]).all()
    assert (read["cuda_peak"] >= read["cuda_allocated"]).all()
    grown = read["cuda_allocated"].iloc[-1] - read["cuda_allocated"].iloc[0]
    assert grown >= 150 * 16 * 2**20  # the kept tensors
    rule = [{"name": "CUDAMemory", "parameters": {}}]
    (res,) = evaluate_job(job, rule)
    assert res.status is Status.ISSUES_FOUND and "a leak" in res.findings[0].message
    (twin,) = evaluate_job(_job(run_job, tmp_path, leak=False), rule)
    assert twin.status is Status.NO_ISSUES_FOUND and twin.datapoints > 0
