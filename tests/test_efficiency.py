"""Efficiency against the hardware (issue 33, item 2): achieved TFLOP/s and TB/s of a
window's operators against a table of card peaks, compute- or memory-bound.

Three traces: one recorded here by the PyTorch profiler on CPU (real, with shapes;
its FLOPs are checked against the profiler's own ``with_flops`` counts); the real
H200 trace of the ``stall`` fixture (recorded without shapes: unknown, never a
guess); and a GPU stand-in made from that H200 trace, its structure and kernel times
real, with SYNTHETIC shapes (or a "flops" argument) added to its ``aten::mm``
operators: the shapes the fixture's model has (batch 512 x Linear(4096, 4096), fp32).
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

import stepscope
from h200_jobs import h200_job
from stepscope.analysis.summary import profiling_summary
from stepscope.read import (
    NO_SHAPES,
    UNKNOWN_CARD,
    Efficiency,
    NoEfficiency,
    efficiency,
    load_trace,
    peaks_of,
)

torch = pytest.importorskip("torch")
TRACE = "profiling/rank-0/detailed-100-102.pt.trace.json.gz"
MM_FLOPS = 2.0 * 512 * 4096 * 4096  # one Linear(4096, 4096) product at batch 512


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, float]]:
    """A real CPU trace with shapes, and the profiler's own FLOPs per operator name."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)
    )
    conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x, image = torch.randn(32, 128), torch.randn(2, 3, 16, 16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        for _ in range(2):
            model(x).sum().backward()
            conv(image).sum().backward()
    counted: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.flops:
            counted[e.name] += e.flops
    path = tmp_path_factory.mktemp("cpu") / "t.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return path.read_bytes(), dict(counted)


def test_a_cpu_trace_has_the_profilers_flop_counts(cpu_trace):
    data, counted = cpu_trace
    result = efficiency(load_trace(data))
    assert isinstance(result, Efficiency) and result.timed_on == "host"
    flops: dict[str, float] = defaultdict(float)
    for op in result.operators:
        flops[op.operator] += op.flops or 0.0
    assert flops["aten::addmm"] == counted["aten::addmm"] > 0
    assert flops["aten::mm"] == counted["aten::mm"] > 0
    assert flops["aten::convolution"] == counted["aten::conv2d"] > 0
    mm = next(op for op in result.operators if op.operator == "aten::addmm")
    assert mm.tflops and mm.tflops > 0 and mm.bytes and mm.intensity
    # no peak for a CPU: every operator says so, none is labelled
    assert {op.bound for op in result.operators} == {UNKNOWN_CARD}
    relu = next(op for op in result.operators if op.operator == "aten::relu")
    assert relu.kind == "elementwise" and relu.flops is None and relu.tbps


def test_the_h200_trace_without_shapes_is_unknown(tmp_path):
    job = stepscope.open(h200_job(tmp_path, "stall"))
    assert efficiency(load_trace(Path(job.path, TRACE).read_bytes())) == NoEfficiency(NO_SHAPES)
    (row,) = job.efficiency().to_dict("records")
    assert row["not_applicable"] == NO_SHAPES
    (window,) = profiling_summary(job)
    assert window["efficiency"] == {"not_applicable": NO_SHAPES}


def h200_with(tmp_path: Path, args: dict[str, object]) -> stepscope.read.Job:
    """The H200 ``stall`` job, its trace's ``aten::mm`` operators given ``args``
    (SYNTHETIC: the real trace recorded no shapes)."""
    job = stepscope.open(h200_job(tmp_path, "stall"))
    path = Path(job.path, TRACE)
    doc = json.loads(gzip.decompress(path.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm":
            e["args"] |= args
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return job


SHAPES = {"Input Dims": [[512, 4096], [4096, 4096]], "Input type": ["float", "float"]}


def test_a_gpu_stand_in_is_compute_bound_fp32_on_the_h200(tmp_path):
    job = h200_with(tmp_path, SHAPES)
    rows = job.efficiency()
    mm = rows[rows["operator"] == "aten::mm"].iloc[0]
    assert mm["card"] == "NVIDIA H200" and mm["timed_on"] == "device"
    assert mm["count"] == 45 and mm["flops"] == 45 * MM_FLOPS  # 15 products x 3 steps
    assert mm["precision"] == "fp32" and mm["peak_tflops"] == 67.0  # no TF32 kernels
    # ~205 FLOPs a byte, far above the fp32 ridge (67 TFLOP/s / 4.8 TB/s = 14)
    assert mm["intensity"] > 100 > 14 > mm["ridge"] - 0.1
    assert mm["bound"] == "compute"
    # the kernels' real time: 16.2 ms of device time for 45 products
    assert 30 < mm["tflops"] < 67 and mm["share_of_peak"] == pytest.approx(mm["tflops"] / 67.0)


def test_the_profilers_flops_argument_is_used_as_is(tmp_path):
    job = h200_with(tmp_path, {"flops": MM_FLOPS})
    rows = job.efficiency()
    mm = rows[rows["operator"] == "aten::mm"].iloc[0]
    assert mm["flops"] == 45 * MM_FLOPS and mm["kind"] == "matmul"
    assert mm["bound"] == "unknown (bytes not known)"  # no shapes: no intensity, no guess


@pytest.mark.parametrize(
    ("name", "card"),
    [
        ("NVIDIA H200", "NVIDIA H200 SXM"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM 80GB"),
        ("NVIDIA L4", "NVIDIA L4"),
        ("NVIDIA L40S", "NVIDIA L40S"),
        ("Tesla T4", "NVIDIA T4"),
        ("NVIDIA A10G", None),  # not the A10: unknown, never its neighbour's figures
        ("Some Future GPU", None),
    ],
)
def test_the_peak_table(name, card):
    found = peaks_of(name)
    assert (found.card if found else None) == card


def test_bad_top_says_the_choices(tmp_path):
    job = stepscope.open(h200_job(tmp_path, "stall"))
    with pytest.raises(stepscope.errors.ConfigError, match="positive integer"):
        job.efficiency(top=0)


def _block(html: str) -> str:
    block = html[html.index('id="profiles-efficiency"') :]
    return block[: block.index("</section>")] if "</section>" in block else block


def test_the_report_block(tmp_path):
    from stepscope.report import render_report

    block = _block(render_report(h200_with(tmp_path / "a", SHAPES)))
    assert "against the peaks of the NVIDIA H200 SXM" in block
    assert "<td>aten::mm</td>" in block and "<td>compute</td>" in block
    plain = _block(render_report(stepscope.open(h200_job(tmp_path / "b", "stall"))))
    assert "Efficiency against the hardware: unknown (shapes not recorded)." in plain
