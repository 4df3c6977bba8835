"""Kernel breakdown of a detailed window's PyTorch trace (issue 33, item 1).

On the real trace of the H200 ``stall`` job (132 kernels over steps 100-102), and on
small traces built here, in Kineto's own event layout, where every number is exact.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pandas as pd
import pytest

import stepscope
from h200_jobs import h200_job
from stepscope.analysis.summary import profiling_summary, summarize
from stepscope.cli._text import _kernels_line, render_show
from stepscope.errors import ConfigError
from stepscope.read import NO_KERNELS, KernelBreakdown, NoKernels, breakdown, kind_of, load_trace

PID, MAIN = 100, 100  # the host process and its main thread
STREAM_A, STREAM_B = 7, 8


def kernel(name: str, ts: float, dur: float, stream: int = STREAM_A, corr: int = 0) -> dict:
    args = {"device": 0, "stream": stream, "correlation": corr, "External id": corr}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts} | {
        "dur": dur,
        "args": args,
    }


def copy(name: str, ts: float, dur: float, nbytes: int) -> dict:
    args = {"device": 0, "stream": STREAM_A, "correlation": 0, "bytes": nbytes}
    return {"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": 0, "tid": STREAM_A} | {
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def host(name: str, ts: float, dur: float, cat: str = "cpu_op", corr: int | None = None) -> dict:
    args = {} if corr is None else {"correlation": corr}
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": MAIN, "ts": ts} | {
        "dur": dur,
        "args": args,
    }


def trace_bytes(events: list[dict], gz: bool = True) -> bytes:
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()
    return gzip.compress(text) if gz else text


def analyse(events: list[dict]) -> KernelBreakdown:
    result = breakdown(load_trace(trace_bytes(events)))
    assert isinstance(result, KernelBreakdown)
    return result


# -- the real trace ------------------------------------------------------------


@pytest.fixture(scope="module")
def stall(tmp_path_factory: pytest.TempPathFactory) -> stepscope.read.Job:
    return stepscope.open(h200_job(tmp_path_factory.mktemp("h200"), "stall"))


def test_h200_kinds_and_count(stall):
    (record,) = [r for r in stall.profiling_artifacts() if r["kind"] == "detailed"]
    result = stall.window_kernels(record)
    assert isinstance(result, KernelBreakdown)
    assert result.kernels == 132  # the fixture's README
    assert result.events == 132 + 24 + 3  # and 24 memsets, 3 device-to-device copies
    kinds = stall.kernels()
    assert set(kinds["kind"]) == {"matmul", "elementwise", "memset", "memcpy_dtod"}
    assert kinds.iloc[0]["kind"] == "matmul"  # the largest: 8 fp32 Linear(4096, 4096)
    assert kinds["share"].sum() == pytest.approx(1.0)
    assert (kinds["window"] == "detailed-100-102").all() and (kinds["rank"] == 0).all()
    dtod = kinds.set_index("kind").loc["memcpy_dtod"]
    assert dtod["bytes"] == 3 * 8388608 and dtod["gbps"] > 100  # on-device copies: fast
    assert dtod["pageable"] is None  # device to device: no host memory to say


def test_h200_top_kernels_and_their_operators(stall):
    top = stall.kernels(by="kernel", top=3)
    assert len(top) == 3
    assert top.iloc[0]["name"].startswith("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n")
    assert top.iloc[0]["operator"] == "aten::addmm"  # linked by the launch's correlation id
    assert list(top["seconds"]) == sorted(top["seconds"], reverse=True)
    assert set(top["kind"]) == {"matmul"}
    assert len(stall.kernels(by="kernel", top=None)) > 3


def test_h200_busy_share_and_gaps(stall):
    (row,) = stall.kernels(by="device").to_dict("records")
    assert 0 < row["busy_share"] <= 1
    assert row["busy_seconds"] + row["idle_seconds"] == pytest.approx(row["span_seconds"])
    assert row["gaps"] > 0
    assert 0 < row["longest_gap_seconds"] <= row["idle_seconds"]
    assert row["longest_gap_operator"]  # some host operator ran in the middle of it


def test_h200_show_json(stall):
    (window,) = profiling_summary(stall)
    kernels = json.loads(json.dumps(window["kernels"]))  # plain JSON, as show --json prints
    assert kernels["kernels"] == 132
    assert kernels["kinds"][0]["kind"] == "matmul"
    assert len(kernels["top"]) == 10
    assert 0 < kernels["devices"][0]["busy_share"] <= 1
    (line,) = [
        s for s in render_show(summarize(stall)).splitlines() if s.startswith("           device: ")
    ]
    assert line.split("device: ")[1].startswith("matmul 93%, elementwise 7%")
    assert "GPU 0 busy 93% of 28.61 ms, 158 gaps (longest 1.11 ms during aten::div)" in line


# -- built traces: exact numbers -------------------------------------------------


def test_copies_bandwidth_and_pageable_memory():
    result = analyse(
        [
            copy("Memcpy HtoD (Pageable -> Device)", 0, 100, 1_000_000),
            copy("Memcpy HtoD (Pinned -> Device)", 200, 100, 2_000_000),
            copy("Memcpy DtoH (Device -> Pinned)", 400, 50, 500_000),
        ]
    )
    kinds = {k.kind: k for k in result.kinds}
    htod, dtoh = kinds["memcpy_htod"], kinds["memcpy_dtoh"]
    assert (htod.count, htod.bytes, htod.pageable) == (2, 3_000_000, 1)
    assert htod.seconds == pytest.approx(200e-6)
    assert htod.gbps == pytest.approx(15.0)  # 3 MB in 200 us
    assert (dtoh.count, dtoh.pageable) == (1, 0)  # said, and pinned: 0, not unknown
    assert dtoh.gbps == pytest.approx(10.0)
    assert result.kernels == 0  # copies only: still a breakdown, without kernels


def test_overlapping_kernels_on_two_streams():
    result = analyse(
        [
            kernel("gemm_a", 0, 100, STREAM_A),
            kernel("gemm_b", 50, 150, STREAM_B),  # overlaps the first: counted once
            kernel("gemm_c", 300, 50, STREAM_A),
            host("step", 0, 400),
            host("aten::item", 220, 60),
            host("cudaStreamSynchronize", 230, 40, cat="cuda_runtime"),
        ]
    )
    (device,) = result.devices
    assert device.span_seconds == pytest.approx(350e-6)
    assert device.busy_seconds == pytest.approx(250e-6)
    assert device.busy_share == pytest.approx(250 / 350)
    assert device.idle_seconds == pytest.approx(100e-6)
    assert device.gaps == 1 and device.longest_gap_seconds == pytest.approx(100e-6)
    assert device.longest_gap_operator == "cudaStreamSynchronize"  # innermost at 250 us
    # device time by kind sums each kernel's own time (overlaps included)
    assert result.kinds[0].kind == "matmul" and result.kinds[0].seconds == pytest.approx(300e-6)


def test_nccl_kernel_is_communication():
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    reduce = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >()"
    result = analyse([kernel(nccl, 0, 400, STREAM_B), kernel(reduce, 0, 100)])
    kinds = {k.kind: (k.count, k.seconds) for k in result.kinds}
    assert kinds == {
        "communication": (1, pytest.approx(400e-6)),
        "elementwise": (1, pytest.approx(100e-6)),
    }
    assert [t.kind for t in result.top] == ["communication", "elementwise"]
    assert result.devices[0].busy_share == 1.0 and result.devices[0].gaps == 0


def test_launching_operator_is_the_innermost_around_the_launch():
    result = analyse(
        [
            host("aten::linear", 0, 30),
            host("aten::mm", 5, 15),
            host("cudaLaunchKernel", 10, 2, cat="cuda_runtime", corr=5),
            host("aten::relu", 40, 10),  # a sibling that ends before: not the launcher
            host("cudaLaunchKernel", 42, 2, cat="cuda_runtime", corr=6),
            kernel("sgemm_128x64", 20, 10, corr=5),
            kernel("vectorized_elementwise_kernel<relu>", 50, 5, corr=6),
            kernel("mystery_kernel", 60, 1, corr=99),  # no launch recorded: unknown
        ]
    )
    operators = {t.name: t.operator for t in result.top}
    assert operators == {
        "sgemm_128x64": "aten::mm",
        "vectorized_elementwise_kernel<relu>": "aten::relu",
        "mystery_kernel": None,
    }
    assert {t.name: t.kind for t in result.top}["mystery_kernel"] == "other"


@pytest.mark.parametrize(
    ("cat", "name", "kind"),
    [
        ("kernel", "flash_fwd_kernel<Flash_fwd_kernel_traits<cutlass::half_t>>", "attention"),
        ("kernel", "fmha_cutlassF_f16_aligned_64x64_rf_sm80", "attention"),
        ("kernel", "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT", "matmul"),
        ("kernel", "cudnn::cnn::conv2d_grouped_direct_kernel", "matmul"),
        ("kernel", "triton_poi_fused_add_0", "elementwise"),
        ("kernel", "ncclKernel_AllGather_RING_LL_Sum_int8_t", "communication"),
        ("gpu_memcpy", "Memcpy PtoP (Device -> Device)", "memcpy_dtod"),
        ("gpu_memset", "Memset (Device)", "memset"),
    ],
)
def test_classification_table(cat, name, kind):
    assert kind_of(cat, name) == kind


def test_a_span_of_zero_length_has_no_busy_share():
    (device,) = analyse([kernel("gemm", 10, 0), kernel("gemm", 10, 0)]).devices
    assert device.busy_share is None and device.span_seconds == 0 and device.gaps == 0
    line = _kernels_line(breakdown(load_trace(trace_bytes([kernel("gemm", 10, 0)]))).to_json())
    assert line == ["           device: matmul; GPU 0 busy - of 0.00 ms, no gaps"]


def test_plain_json_and_a_bare_event_list_parse_alike():
    events = [kernel("gemm", 0, 10), kernel("gemm", 20, 10)]
    plain = breakdown(load_trace(trace_bytes(events, gz=False)))
    bare = breakdown(load_trace(json.dumps(events).encode()))
    assert plain == bare == analyse(events)


# -- unknowns stay unknown ------------------------------------------------------


def add_window(job: stepscope.read.Job, rank: int, data: bytes) -> None:
    """A detailed window of ``rank`` whose trace is ``data``, beside the real one."""
    base = f"profiling/rank-{rank}/detailed-100-102"
    folder = Path(job.path, f"profiling/rank-{rank}")
    folder.mkdir(parents=True)
    (folder / "detailed-100-102.pt.trace.json.gz").write_bytes(data)
    record = json.loads(Path(job.path, "profiling/rank-0/detailed-100-102.window.json").read_text())
    record |= {
        "rank": rank,
        "path": f"{base}.pt.trace.json.gz",
        "files": [f"{base}.pt.trace.json.gz"],
    }
    Path(job.path, f"{base}.window.json").write_text(json.dumps(record))


def test_a_trace_without_device_activity_is_not_applicable(tmp_path):
    job = stepscope.open(h200_job(tmp_path, "stall"))
    add_window(job, 1, trace_bytes([host("aten::mm", 0, 10), host("aten::add", 20, 5)]))
    assert breakdown(load_trace(trace_bytes([host("aten::mm", 0, 10)]))) == NoKernels(NO_KERNELS)
    (row,) = job.kernels(rank=1).to_dict("records")
    assert row["not_applicable"] == "no kernel events: recorded without CUDA activity"
    assert math.isnan(row["seconds"]) and pd.isna(row["kind"])  # empty, never zero
    assert set(job.kernels(rank=0)["kind"]) >= {"matmul"}  # the other rank still answers
    windows = {w["rank"]: w["kernels"] for w in profiling_summary(job)}
    assert windows[1] == {"not_applicable": NO_KERNELS}


def test_a_damaged_trace_is_named_not_raised(tmp_path):
    job = stepscope.open(h200_job(tmp_path, "stall"))
    add_window(job, 2, gzip.compress(b'{"traceEvents": [{"ph": "X", "cat": "ker'))
    (row,) = job.kernels(rank=2).to_dict("records")
    assert row["not_applicable"].startswith("trace unreadable: ")
    assert any("rank-2/detailed-100-102.pt.trace.json.gz" in w for w in job.warnings)


def test_bad_arguments_say_the_choices(stall):
    with pytest.raises(ConfigError, match="choose one of kind, kernel, device"):
        stall.kernels(by="stream")
    with pytest.raises(ConfigError, match="positive integer"):
        stall.kernels(top=0)


def test_h200_report_block(stall):
    from stepscope.report import render_report

    html = render_report(stall)
    block = html[html.index('id="profiles-kernels"') :]
    block = block[: block.index("</section>")] if "</section>" in block else block
    assert "GPU 0 was busy 93% of its active 28.6 ms; idle 1.92 ms in 158 gaps" in block
    assert "the longest 1.11 ms while the host ran aten::div." in block
    assert "<td>matmul</td>" in block and "aten::addmm" in block
    assert "2465.1 GB/s" in block  # the device-to-device copies
