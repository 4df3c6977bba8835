"""A memory window and an out-of-memory fault on a real GPU, under ``stepscope run``
(skipped without an NVIDIA GPU; on CPU the same paths run with the allocator
stand-in: tests/test_memory_window.py)."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch.cuda import _memory_viz

import stepscope

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]

SCRIPT = """
import time, torch
m = torch.nn.Linear(1024, 1024).cuda(); o = torch.optim.SGD(m.parameters(), 0.1)
for step in range(30):
    loss = m(torch.randn(256, 1024, device='cuda')).sum()
    loss.backward(); o.step(); o.zero_grad()
    if {oom} and step == 20:
        torch.empty(1 << 50, dtype=torch.uint8, device='cuda')  # a petabyte: out of memory
    torch.cuda.synchronize(); time.sleep(0.06)  # every step timed
"""
CONFIG = "[profiler.framework_profile_params.memory_profiling_config]\nstart_step = 5\n"


def test_a_memory_window_keeps_the_real_snapshot(run_job, tmp_path):
    script, config = tmp_path / "gpu_mem.py", tmp_path / "mem.toml"
    script.write_text(SCRIPT.format(oom=False))
    config.write_text(CONFIG)
    r = run_job([str(script)], "--no-rules", "--config", str(config), job="mem")
    assert r.code == 0, r.stderr
    job = stepscope.open(r.job_path)
    (record,) = [w for w in job.profiling_artifacts() if w["kind"] == "memory"]
    snapshot = pickle.loads((r.job_path / record["path"]).read_bytes())
    assert record["segments"] == len(snapshot["segments"]) > 0
    assert record["trace_events"] > 0 and "total_reserved" in _memory_viz.segsum(snapshot)
    assert any(e["action"] == "alloc" for e in snapshot["device_traces"][0])
    assert not job.faults()


def test_out_of_memory_leaves_a_fault_and_the_error(run_job, tmp_path):
    script = tmp_path / "gpu_oom.py"
    script.write_text(SCRIPT.format(oom=True))
    r = run_job([str(script)], "--no-rules", job="oom")
    assert r.code != 0 and "OutOfMemoryError" in r.stderr
    (fault,) = [f for f in stepscope.open(r.job_path).faults() if f["component"] == "cuda-oom"]
    assert fault["memory_readings"] and fault["memory_stats"]["num_ooms"] >= 1
    assert fault["memory_readings"][-1]["cuda_allocated"] > 4 * 2**20  # the model, on it
