"""Short GPU jobs: the diagnosis says what the training loop's GPU samples show when
LowGPUUtilization (and GPUIdleBetweenSteps) are too short for their patience.

Synthetic jobs sample at 100 ms (NVML's rate on the H200 fixtures): 60 s of
training loop is 600 samples, short of LowGPUUtilization's patience of 1,000;
300 s is past it, and the rule judges the job itself (no note).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rules_data as rd
import stepscope
from stepscope.analysis.diagnosis import diagnose_verdicts
from stepscope.analysis.diagnosis_gpu import gpu_notes
from stepscope.jobfolder import RuleVerdict
from stepscope.rules import JobFacts, RuleResult, Status, diagnose, evaluate_job

GPU_RULES = [{"name": "LowGPUUtilization"}, {"name": "GPUIdleBetweenSteps"}]


def short_gpu_job(path: Path, seconds: float, util: np.ndarray) -> Path:
    """One GPU sampled every 100 ms for ``seconds``, 0.2 s steps filling the loop."""
    n = int(seconds / 0.1)
    store = rd.new_job(path, end=rd.T0 + seconds)
    rd.node_info(store, gpus=1, interval_ms=100)
    rd.write_system(store, rd.system_frame(n, interval=0.1, gpu_util=[util[:n]]))
    rd.write_steps(store, rd.steps_frame(int((seconds - 10) / 0.2), gpu=(0.05, 0.1, 0.01)))
    rd.write_process_start(store)
    return path


def results(path: Path) -> list[RuleResult]:
    return evaluate_job(stepscope.open(str(path)), GPU_RULES)


STARVED = rd.busy_gpu(3000, level=8.0, dip_every=0)  # p95 about 13%
BUSY = rd.busy_gpu(3000, level=95.0, dip_every=50)  # a dip to 0 every 5 s


def test_a_short_starved_gpu_job_says_the_gpu_starved(tmp_path: Path) -> None:
    res = results(short_gpu_job(tmp_path / "short", 60.0, STARVED))
    low = next(r for r in res if r.rule == "LowGPUUtilization")
    assert low.status is Status.NOT_APPLICABLE and "not enough data yet" in (low.reason or "")
    (gpu,) = low.details["loop_gpus"]
    assert gpu["device"] == "gpu0" and gpu["samples"] == pytest.approx(500, abs=2)  # the loop
    d = diagnose(res, JobFacts(60.0, 50.0))
    (note,) = d.notes
    assert note.startswith("GPU starved: gpu0 on node-a idle 92% of the training loop")
    assert "(median utilization 8%, p95 13% < 70%)" in note
    assert note.endswith("too short for LowGPUUtilization's patience (1,000 samples)")
    assert d.summary.endswith(note) and d.checks()["notes"] == [note]
    # the same GPU over 300 s: LowGPUUtilization judges it itself, no note
    long = results(short_gpu_job(tmp_path / "long", 300.0, STARVED))
    assert next(r for r in long if r.rule == "LowGPUUtilization").status is Status.ISSUES_FOUND
    assert diagnose(long, JobFacts(300.0, 290.0)).notes == ()


def test_a_short_busy_gpu_job_says_nothing_alarming(tmp_path: Path) -> None:
    res = results(short_gpu_job(tmp_path / "short", 60.0, BUSY))
    (note,) = diagnose(res, JobFacts(60.0, 50.0)).notes
    assert note.startswith("GPU busy: gpu0 on node-a busy 93% of the training loop")
    assert "not starved" in note and "idle" not in note
    long = results(short_gpu_job(tmp_path / "long", 300.0, BUSY))
    assert next(r for r in long if r.rule == "LowGPUUtilization").status is Status.NO_ISSUES_FOUND
    assert diagnose(long, JobFacts(300.0, 290.0)).notes == ()


def test_a_cpu_job_gets_no_gpu_note(tmp_path: Path) -> None:
    path = tmp_path / "cpu"
    store = rd.new_job(path, end=rd.T0 + 60)
    rd.node_info(store, gpus=0, interval_ms=100)
    rd.write_system(store, rd.system_frame(600, interval=0.1))
    rd.write_steps(store, rd.steps_frame(250))
    res = results(path)
    assert {r.status for r in res} == {Status.NOT_APPLICABLE}
    d = diagnose(res, JobFacts(60.0, 50.0))
    assert d.notes == () and "training loop" not in d.summary


def verdict(rule: str, status: str, gpus: list[dict[str, object]], **params: float) -> RuleVerdict:
    defaults = {"LowGPUUtilization": {"threshold_p95": 70, "threshold_p5": 10, "patience": 1000}}
    return {"rule": rule, "status": status, "datapoints": 0,
            "parameters": {**defaults.get(rule, {"patience": 100}), **params},
            "details": {"loop_gpus": gpus}}  # fmt: skip


def gpu(device: str, busy: float, p5: float, p50: float, p95: float) -> dict[str, object]:
    return {"node": "n1", "device": device, "samples": 76, "loop_seconds": 7.6,
            "busy": busy, "p5": p5, "p50": p50, "p95": p95}  # fmt: skip


def test_the_note_judges_the_least_busy_gpu_with_lowgpuutilizations_thresholds() -> None:
    gpus = [gpu("gpu0", 97, 100, 100, 100), gpu("gpu1", 75, 0, 89, 100)]
    both = [verdict("LowGPUUtilization", "NotApplicable", gpus),
            verdict("GPUIdleBetweenSteps", "NotApplicable", gpus)]  # fmt: skip
    (note,) = gpu_notes(both)
    assert note == (
        "GPU idle in bursts: gpu1 on n1 idle 25% of the training loop (p5 utilization 0% < "
        "10%, median 89%), the least busy of 2 GPUs; 76 samples in 8 s of training loop: too "
        "short for LowGPUUtilization's and GPUIdleBetweenSteps' patience (1,000 and 100 samples)"
    )
    # the job's own thresholds: p95 100% is underused below a threshold_p95 of 101
    strict = [verdict("LowGPUUtilization", "NotApplicable", gpus, threshold_p95=101)]
    assert gpu_notes(strict)[0].startswith("GPU starved: gpu1 on n1 idle 25%")
    # a rule that judged the job, or a verdict without the loop's samples: no note
    assert gpu_notes([verdict("LowGPUUtilization", "NoIssuesFound", gpus)]) == ()
    assert gpu_notes([verdict("LowGPUUtilization", "NotApplicable", [])]) == ()
    live = verdict("LowGPUUtilization", "InProgress", gpus)
    live["verdict"] = "NotApplicable"
    assert len(gpu_notes([live])) == 1


def test_the_note_follows_the_problems_in_the_summary_and_json() -> None:
    issue: RuleVerdict = {"rule": "DataLoading", "status": "IssuesFound", "datapoints": 9,
                          "cost_seconds": 3.0, "findings": []}  # fmt: skip
    starved = verdict("LowGPUUtilization", "NotApplicable", [gpu("gpu0", 7, 4, 7, 8)])
    d = diagnose_verdicts([issue, starved], JobFacts(20.0, 10.0))
    assert d.summary.startswith("1 problem found in this 20 s job, most costly first; GPU starved:")
    assert [c["rule"] for c in d.checks()["not_checked"]] == ["LowGPUUtilization"]
    assert d.checks()["notes"] == [d.notes[0]] and len(d.entries) == 1


def test_a_short_job_of_two_nodes_names_the_least_busy_gpu(tmp_path: Path) -> None:
    """Each node's GPUs are in the NotApplicable verdict (its nodes' lists joined)."""
    path = short_gpu_job(tmp_path / "two", 60.0, BUSY)
    store = stepscope.open(str(path)).store
    rd.node_info(store, node="node-b", gpus=1, interval_ms=100)
    system = rd.system_frame(600, node="node-b", interval=0.1, gpu_util=[STARVED[:600]])
    rd.write_system(store, system, node="node-b")
    rd.write_steps(store, rd.steps_frame(250, rank=1, node="node-b", gpu=(0.05, 0.1, 0.01)))
    res = results(path)
    low = next(r for r in res if r.rule == "LowGPUUtilization")
    assert [g["node"] for g in low.details["loop_gpus"]] == ["node-a", "node-b"]
    (note,) = diagnose(res, JobFacts(60.0, 50.0)).notes
    assert note.startswith("GPU starved: gpu0 on node-b idle 92%")
    assert ", the least busy of 2 GPUs;" in note
