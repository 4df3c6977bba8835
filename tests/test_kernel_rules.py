"""The rules on a detailed window's kernels (issue 33, item 3): GPUIdleInSteps,
CopiesNotOverlapped, CommunicationNotOverlapped, FP32MatMul. Each fires on its
planted case and stays silent on a twin with the same parameters and data points.

Traces: the real H200 trace of the ``stall`` fixture (GPU-bound fp32 GEMMs: FP32MatMul
fires, GPUIdleInSteps is silent), a twin of it whose GEMM kernels are renamed to
cuBLAS's TF32 kernels (SYNTHETIC names, real times), and small traces built here in
Kineto's event layout (SYNTHETIC: launch-bound kernels, copies, NCCL kernels), where
every number is exact.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

import stepscope
from h200_jobs import H200
from stepscope.read import load_trace
from stepscope.rules import (
    BUILTIN,
    CommunicationNotOverlapped,
    CopiesNotOverlapped,
    FP32MatMul,
    GPUIdleInSteps,
    RuleInput,
    Status,
    TraceWindow,
    evaluate_rules,
)

TRACE = H200 / "stall/profiling/rank-0/detailed-100-102.pt.trace.json.gz"
RULES = (GPUIdleInSteps, CopiesNotOverlapped, CommunicationNotOverlapped, FP32MatMul)
STEPS = 10  # the rank's training steps in the job: the window's cost per step times these


def event(cat: str, name: str, ts: float, dur: float, stream: int = 7, **args: object) -> dict:
    body = {"device": 0, "stream": stream, "correlation": 0} | args
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur} | {
        "args": body
    }


def window(events: list[dict], card: str = "NVIDIA H200") -> TraceWindow:
    head = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": card}]}
    trace = load_trace(json.dumps(head | {"traceEvents": events}).encode())
    return TraceWindow(0, 100, 102, trace)


def judge(rule: object, *windows: TraceWindow) -> stepscope.rules.RuleResult:
    steps = pd.DataFrame({"rank": [0] * STEPS, "phase": ["train"] * STEPS, "step": range(STEPS)})
    data = RuleInput(steps=steps, traces=lambda: list(windows))
    return rule.evaluate(data)  # type: ignore[attr-defined]


def real(rename: bool = False) -> TraceWindow:
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    if rename:  # SYNTHETIC: cuBLAS's TF32 kernels in place of the fp32 ones
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel" and ("sgemm" in e["name"] or "ffma" in e["name"]):
                e["name"] = "sm80_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x16_cublas"
    return TraceWindow(0, 100, 102, load_trace(json.dumps(doc).encode()))


# -- GPUIdleInSteps --------------------------------------------------------------


def short_kernels(gap_us: float) -> list[dict]:
    """300 elementwise kernels of 4 us, ``gap_us`` apart."""
    name = "void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>"
    return [event("kernel", name, i * (4 + gap_us), 4) for i in range(300)]


def test_gpu_idle_in_steps_fires_when_launch_bound():
    result = judge(GPUIdleInSteps(), window(short_kernels(gap_us=16)))
    assert result.status is Status.ISSUES_FOUND and result.datapoints == 300
    (f,) = result.findings
    assert "launch-bound: 300 kernels of median 4.0 us" in f.message
    assert f.value == pytest.approx(100 * 16 * 299 / (300 * 20 - 16))
    idle = 16 * 299 * 1e-6  # seconds idle in the window's 3 steps
    assert result.cost_seconds == pytest.approx(idle / 3 * STEPS)


def test_gpu_idle_in_steps_silent_twin_back_to_back():
    result = judge(GPUIdleInSteps(), window(short_kernels(gap_us=0.5)))
    assert result.status is Status.NO_ISSUES_FOUND and result.datapoints == 300


def test_gpu_idle_in_steps_silent_on_the_gpu_bound_h200_trace():
    result = judge(GPUIdleInSteps(), real())
    assert result.status is Status.NO_ISSUES_FOUND and result.datapoints == 159
    assert result.cost_seconds is None


# -- CopiesNotOverlapped --------------------------------------------------------


def copies(memory: str, stream: int) -> list[dict]:
    """20 batches: a 200 us host-to-device copy (8 MB) and 300 us of compute on stream 7;
    on ``stream`` 7 they queue one after the other, on another stream the copy runs
    under the previous batch's compute."""
    out = []
    for i in range(20):
        t = i * 500.0
        at = t if stream == 7 else t + 300 - 500  # under the previous kernel
        name = f"Memcpy HtoD ({memory} -> Device)"
        out.append(event("gpu_memcpy", name, max(at, 0.0), 200, stream, bytes=8 << 20))
        out.append(event("kernel", "sm80_xmma_gemm_bf16bf16_bf16f32", t + 200, 300))
    return out


def test_copies_not_overlapped_fires_on_pageable_serial_copies():
    result = judge(CopiesNotOverlapped(), window(copies("Pageable", stream=7)))
    assert result.status is Status.ISSUES_FOUND and result.datapoints == 20
    (f,) = result.findings
    assert "20 host-device copies ran 4.00 ms alone" in f.message
    assert "20 of them from pageable memory" in f.message
    assert result.cost_seconds == pytest.approx(20 * 200e-6 / 3 * STEPS)


def test_copies_not_overlapped_silent_twin_pinned_on_a_side_stream():
    result = judge(CopiesNotOverlapped(), window(copies("Pinned", stream=8)))
    # the first copy has no kernel before it: 200 us of 10 ms alone, 2% < 5%
    assert result.status is Status.NO_ISSUES_FOUND and result.datapoints == 20


# -- CommunicationNotOverlapped ---------------------------------------------------


def collectives(overlapped: bool) -> list[dict]:
    """10 steps: 1 ms of compute on stream 7, a 400 us NCCL all-reduce on stream 20
    after it (exposed) or under it (overlapped)."""
    out = []
    for i in range(10):
        t = i * 1500.0
        out.append(event("kernel", "sm80_xmma_gemm_bf16bf16_bf16f32", t, 1000))
        at = t + 500 if overlapped else t + 1000
        out.append(event("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", at, 400, 20))
    return out


def test_communication_not_overlapped_fires_when_collectives_run_alone():
    result = judge(CommunicationNotOverlapped(), window(collectives(overlapped=False)))
    assert result.status is Status.ISSUES_FOUND and result.datapoints == 10
    assert "10 collective kernels ran 4.00 ms, 4.00 ms of it" in result.findings[0].message
    assert result.cost_seconds == pytest.approx(4e-3 / 3 * STEPS)


def test_communication_not_overlapped_silent_twin_under_compute():
    result = judge(CommunicationNotOverlapped(), window(collectives(overlapped=True)))
    assert result.status is Status.NO_ISSUES_FOUND and result.datapoints == 10


# -- FP32MatMul ----------------------------------------------------------------------


def test_fp32_matmul_fires_on_the_real_h200_trace():
    result = judge(FP32MatMul(), real())
    assert result.status is Status.ISSUES_FOUND and result.datapoints == 69
    (f,) = result.findings
    assert "NVIDIA H200 SXM" in f.message and "fp32 matrix multiplies on CUDA cores" in f.message
    # 24.86 ms of CUDA-core GEMMs; TF32 at the same share of its peak saves 1 - 67/494.5
    assert f.value == pytest.approx(93, abs=1)
    assert result.cost_seconds == pytest.approx(24.857e-3 * (1 - 67 / 494.5) / 3 * STEPS, rel=1e-3)


def test_fp32_matmul_silent_twin_on_tf32_kernels():
    result = judge(FP32MatMul(), real(rename=True))
    assert result.status is Status.NO_ISSUES_FOUND and result.datapoints == 69


def test_fp32_matmul_on_an_unknown_card_is_not_applicable():
    result = judge(FP32MatMul(), window(short_kernels(16), card="Some Future GPU"))
    assert result.status is Status.NOT_APPLICABLE and "unknown card" in result.message


# -- missing data -------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES)
def test_no_trace_is_not_applicable(rule):
    assert judge(rule()).status is Status.NOT_APPLICABLE
    cpu_only = window(
        [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1}
            | {"ts": 0, "dur": 5, "args": {}}
        ]
    )
    result = judge(rule(), cpu_only)
    assert result.status is Status.NOT_APPLICABLE and "no kernel events" in result.message
    data = RuleInput()  # no trace source at all (frames in memory)
    assert rule().evaluate(data).status is Status.NOT_APPLICABLE


def test_the_job_evaluation_reads_the_windows_trace(tmp_path: Path):
    import shutil

    job = stepscope.open(shutil.copytree(H200 / "stall", tmp_path / "stall"))
    results = {r.rule: r for r in evaluate_rules(job, [c() for c in RULES], now=0.0)}
    fp32 = results["FP32MatMul"]
    assert fp32.status is Status.ISSUES_FOUND
    # the job's 620 training steps of rank 0, at 7.2 ms of CUDA-core GEMM time saved each
    assert fp32.cost_seconds == pytest.approx(24.857e-3 * (1 - 67 / 494.5) / 3 * 620, rel=1e-3)
    assert results["GPUIdleInSteps"].status is Status.NO_ISSUES_FOUND
    assert all(name in BUILTIN for name in results)  # ProfilerReport runs them


@pytest.mark.parametrize("rule", RULES)
def test_docs_list_every_parameter_with_its_default(rule):
    doc = (Path(__file__).parents[1] / "docs" / "rules.md").read_text()
    (row,) = [line for line in doc.splitlines() if line.startswith(f"| **{rule.name}** |")]
    for param in rule.params:
        assert f"`{param.name}` ({param.default:g}" in row, param.name


def test_the_job_traces_are_parsed_once_and_listed_again_later(tmp_path: Path):
    import shutil

    from stepscope.rules._trace_source import RELIST_S, JobTraces

    job = stepscope.open(shutil.copytree(H200 / "stall", tmp_path / "stall"))
    now = [0.0]
    traces = JobTraces(job, clock=lambda: now[0])
    (first,) = traces()
    record = Path(job.path, "profiling/rank-0/detailed-100-102.window.json")
    copy = json.loads(record.read_text()) | {"start_step": 200, "end_step": 202}
    Path(job.path, "profiling/rank-0/detailed-200-202.window.json").write_text(json.dumps(copy))
    assert len(traces()) == 1  # within RELIST_S: the listing is kept
    now[0] = RELIST_S
    windows = traces()
    assert [w.start_step for w in windows] == [100, 200]
    assert windows[0].trace is first.trace and windows[1].trace is first.trace  # parsed once
