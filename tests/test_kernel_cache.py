"""The kernel breakdown kept beside each trace (``<trace>.kernels.json``): read instead
of parsing while the trace is unchanged, made again when it changed or is damaged,
and never needed (a folder where it cannot be written still answers)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import stepscope
from h200_jobs import h200_job
from stepscope.analysis.summary import profiling_summary
from stepscope.read import KernelBreakdown

TRACE = "profiling/rank-0/detailed-100-102.pt.trace.json.gz"
DERIVED = TRACE + ".kernels.json"


def record(job: stepscope.read.Job) -> dict[str, object]:
    (window,) = job.profiling_artifacts()
    return window


def test_the_first_read_keeps_the_breakdown_and_the_next_reads_it(tmp_path):
    folder = h200_job(tmp_path, "stall")
    first = stepscope.open(folder).kernels(by="kind")
    doc = json.loads((folder / DERIVED).read_text())
    st = os.stat(folder / TRACE)
    assert doc["version"] == 1 and doc["trace"] == [st.st_size, st.st_mtime_ns]
    assert len(doc["breakdown"]["top"]) > 10  # every kernel: callers cut the top
    # what the file says is what the next reader answers (planted: 7 matmuls more)
    (matmul,) = [k for k in doc["breakdown"]["kinds"] if k["kind"] == "matmul"]
    matmul["count"] += 7
    (folder / DERIVED).write_text(json.dumps(doc))
    again = stepscope.open(folder).kernels(by="kind").set_index("kind")["count"]
    assert again["matmul"] == first.set_index("kind")["count"]["matmul"] + 7


def test_the_top_is_cut_from_the_kept_breakdown(tmp_path):
    job = stepscope.open(h200_job(tmp_path, "stall"))
    everything = job.window_kernels(record(job), 1_000)
    three = job.window_kernels(record(job), 3)
    assert isinstance(everything, KernelBreakdown) and isinstance(three, KernelBreakdown)
    assert three.top == everything.top[:3] and len(everything.top) > 3
    assert len(job.kernels(by="kernel", top=None)) == len(everything.top)


def test_a_changed_trace_is_parsed_again(tmp_path):
    folder = h200_job(tmp_path, "stall")
    before = stepscope.open(folder).kernels(by="kind")
    doc = json.loads((folder / DERIVED).read_text())
    doc["breakdown"]["kinds"][0]["count"] = 999_999
    doc["trace"][1] -= 1_000_000_000  # made from an older trace: stale
    (folder / DERIVED).write_text(json.dumps(doc))
    after = stepscope.open(folder).kernels(by="kind")
    assert 999_999 not in set(after["count"])
    assert after["count"].tolist() == before["count"].tolist()
    remade = json.loads((folder / DERIVED).read_text())
    assert remade["trace"][1] == os.stat(folder / TRACE).st_mtime_ns


def test_a_damaged_derived_file_is_made_again(tmp_path):
    folder = h200_job(tmp_path, "stall")
    (folder / DERIVED).write_text('{"version": 1, "trace": [')
    job = stepscope.open(folder)
    assert set(job.kernels()["kind"]) >= {"matmul"}
    assert json.loads((folder / DERIVED).read_text())["version"] == 1
    assert not job.warnings  # a derived file is no damage of the job


def test_a_folder_where_it_cannot_be_written_still_answers(tmp_path):
    folder = h200_job(tmp_path, "stall")
    Path(folder / DERIVED).mkdir()  # nothing can be written (or read) under that name
    job = stepscope.open(folder)
    (window,) = profiling_summary(job)
    kernels = window["kernels"]
    assert isinstance(kernels, dict) and kernels["kernels"] == 132
    assert (folder / DERIVED).is_dir()


def test_a_trace_is_parsed_once_per_process(tmp_path, monkeypatch):
    """The kernel rules, the breakdown and the efficiency share one parse; judging
    keeps nothing beside the trace (the readers do)."""
    import stepscope.read._trace_views as views
    from stepscope.rules import GPUIdleInSteps
    from stepscope.rules._trace_source import JobTraces

    parsed: list[int] = []

    def counting(data: bytes) -> object:
        parsed.append(len(data))
        return load(data)

    load = views.load_trace
    monkeypatch.setattr(views, "load_trace", counting)
    folder = h200_job(tmp_path, "stall")
    job = stepscope.open(folder)
    (window,) = JobTraces(job)()
    judged = GPUIdleInSteps().judge(window)
    assert judged is not None and judged.datapoints > 0
    assert not (folder / DERIVED).exists()  # judging a job writes nothing
    (summary,) = profiling_summary(job)
    assert summary["kernels"] is not None and summary["efficiency"] is not None
    assert (folder / DERIVED).exists()
    assert len(parsed) == 1


def test_the_kernel_rules_read_the_kept_breakdown(tmp_path):
    from stepscope.rules._trace_source import JobTraces

    folder = h200_job(tmp_path, "stall")
    stepscope.open(folder).kernels()  # keeps it
    doc = json.loads((folder / DERIVED).read_text())
    doc["breakdown"]["devices"][0]["idle_seconds"] = 12.5  # planted: only the file says so
    (folder / DERIVED).write_text(json.dumps(doc))
    (window,) = JobTraces(stepscope.open(folder))()
    kernels = window.kernels()
    assert isinstance(kernels, KernelBreakdown) and kernels.devices[0].idle_seconds == 12.5
