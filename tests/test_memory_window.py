"""CUDA memory windows and out-of-memory faults, on real training under ``stepscope run``
whose process looks, to the agent, like one that uses CUDA: the allocator stand-in
(tests/cuda_allocator.py) keeps the history ``torch.cuda.memory`` keeps and raises a
real ``torch.cuda.OutOfMemoryError`` past its capacity. PyTorch's own reader of the
snapshot (``torch.cuda._memory_viz``, what pytorch.org/memory_viz does in the browser)
reads the file the window keeps. On a real GPU: tests/test_memory_window_gpu.py."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
from torch.cuda import _memory_viz

import stepscope
from stepscope.analysis.summary import profiling_summary
from stepscope.report import render_report

pytestmark = pytest.mark.process

TESTS = Path(__file__).resolve().parent
SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
import torch
from cuda_allocator import MB, StandInAllocator, install

alloc = StandInAllocator(capacity={capacity} * MB)
if {cuda}:
    install(alloc)
model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
weights = alloc.malloc(40 * MB)
kept = []
for step in range(40):
    activations = alloc.malloc(30 * MB)
    model(torch.randn(4, 16)).sum().backward()
    alloc.free(activations)
    opt.step()
    opt.zero_grad()
    kept.append(alloc.malloc(4 * MB))  # a leak: it runs out of a small device
    time.sleep(0.06)  # every step timed: a reading at each
"""
MEMORY_WINDOW = "[profiler.framework_profile_params.memory_profiling_config]\n{span}\n"


def train(run_job, tmp_path: Path, name: str, *, capacity: int, cuda: bool = True, span=""):
    script = tmp_path / f"{name}.py"
    script.write_text(SCRIPT.format(tests=str(TESTS), capacity=capacity, cuda=cuda))
    opts = ["--no-rules"]
    if span:
        config = tmp_path / f"{name}.toml"
        config.write_text(MEMORY_WINDOW.format(span=span))
        opts += ["--config", str(config)]
    return run_job([str(script)], *opts, job=name)


def test_a_memory_window_keeps_a_snapshot_the_memory_viewer_reads(run_job, tmp_path):
    run = train(run_job, tmp_path, "mem", capacity=10_000, span="start_step = 3\nnum_steps = 4")
    assert run.code == 0, run.stderr[-2000:]
    job = stepscope.open(str(run.job_path))
    (record,) = [r for r in job.profiling_artifacts() if r["kind"] == "memory"]
    assert (record["start_step"], record["end_step"]) == (3, 6)
    assert record["path"] == "profiling/rank-0/memory-3-6.memory.pickle"
    snapshot = pickle.loads((run.job_path / record["path"]).read_bytes())
    assert set(snapshot) >= {"segments", "device_traces"}
    (events,) = snapshot["device_traces"]
    # 4 steps of alloc, free_requested, free_completed (activations) and one alloc kept
    allocs = [e for e in events if e["action"] == "alloc"]
    assert len(allocs) == 8 and record["trace_events"] == len(events) >= 16
    assert any(f["filename"].endswith("mem.py") for f in allocs[0]["frames"])
    assert record["segments"] == len(snapshot["segments"]) > 0 and not record["history_full"]
    # PyTorch's reader of the file: its accounting checks hold, and it replays the trace
    assert "total_reserved" in _memory_viz.segsum(snapshot)
    assert f"{len(events)} entries" in _memory_viz.trace(snapshot)
    assert not job.faults()
    # the report lists it with its record's figures, links it, and says how to open it
    html = render_report(job)
    m = re.search(r'<section id="profiles-memory">(.*?)</section>', html, re.S)
    assert m is not None, "no CUDA memory section"
    row = re.search(r"<tr><td>0</td><td>3\u20136</td><td>(\d+)</td>.*?</tr>", m.group(1), re.S)
    assert row is not None and int(row.group(1)) == record["segments"]
    assert f"{record['trace_events']:,} of at most" in row.group(0)
    assert 'href="profiling/rank-0/memory-3-6.memory.pickle"' in row.group(0)
    assert "memory snapshot" in row.group(0) and "https://pytorch.org/memory_viz" in m.group(1)


def test_a_memory_window_without_cuda_says_so_and_keeps_no_file(run_job, tmp_path):
    run = train(run_job, tmp_path, "cpu", capacity=10_000, cuda=False, span="start_step = 2")
    assert run.code == 0, run.stderr[-2000:]
    job = stepscope.open(str(run.job_path))
    (record,) = [r for r in job.profiling_artifacts() if r["kind"] == "memory"]
    assert record["path"] is None and record["files"] == []
    assert record["note"].startswith("not recorded: no CUDA device")
    assert not list((run.job_path / "profiling").rglob("*.pickle"))
    (shown,) = profiling_summary(job)  # what `stepscope show` prints for the window
    assert shown["path"] is None and shown["note"] == record["note"]
    m = re.search(r'<section id="profiles-memory">(.*?)</section>', render_report(job), re.S)
    assert m is not None and "not recorded: no CUDA device" in m.group(1)
    assert ".memory.pickle" not in m.group(1)


def test_out_of_memory_is_a_fault_with_the_last_readings_and_its_twin_has_none(run_job, tmp_path):
    run = train(run_job, tmp_path, "oom", capacity=200)
    assert run.code != 0  # the training's own error, unchanged
    assert "torch.OutOfMemoryError: CUDA out of memory" in run.stderr
    job = stepscope.open(str(run.job_path))
    (fault,) = [f for f in job.faults() if f["component"] == "cuda-oom"]
    assert fault["error"].startswith("OutOfMemoryError: CUDA out of memory. Tried to allocate")
    readings = fault["memory_readings"]
    assert 1 <= len(readings) <= 5
    steps = [r["after_steps"] for r in readings]
    assert steps == sorted(steps) and steps[-1] > 5
    last = readings[-1]
    assert last["cuda_allocated"] >= 40 * 2**20 + 4 * 2**20 * (steps[-1] - 1)
    stats = fault["memory_stats"]
    assert stats["num_ooms"] == 1 and stats["reserved_bytes"] <= 200 * 2**20
    assert stats["allocated_peak_bytes"] >= last["cuda_allocated"]

    twin = train(run_job, tmp_path, "no-oom", capacity=10_000)
    assert twin.code == 0, twin.stderr[-2000:]
    assert not stepscope.open(str(twin.job_path)).faults()
