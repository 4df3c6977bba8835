"""Golden job folders (tests/data/, real recorded jobs): read, judged and shown as recorded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.summary import summarize
from stepscope.jobfolder import FORMAT_VERSION, paths
from stepscope.report import write_report
from stepscope.rules import Status, evaluate_job

DATA = Path(__file__).parent / "data"
FOUND = {"starving": {"StepOutlier", "DataLoading"}, "healthy": set()}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_the_recorded_job_reads_as_written(name: str) -> None:
    job = stepscope.open(str(DATA / name))
    meta = job.meta
    assert meta["format_version"] == FORMAT_VERSION and meta["status"] == "Completed"
    assert not meta["alive"] and meta["exit_code"] == 0  # ended: no heartbeat needed
    steps = job.steps(phase="train")
    assert list(steps["step"]) == list(range(60)) and job.ranks() == [0]
    assert (steps["duration"] > 0).all() and job.nodes() and not job.faults()
    assert len(job.system()) > 0 and len(job.events(kinds=["agent_start"])) == 1


@pytest.mark.parametrize("name", sorted(FOUND))
def test_the_rules_find_what_was_planted_and_agree_with_the_live_verdicts(name: str) -> None:
    job = stepscope.open(str(DATA / name))
    results = {r.rule: r for r in evaluate_job(job)}
    assert set(results) == {"StepOutlier", "DataLoading"}  # the job's own [[rules]]
    fired = {n for n, r in results.items() if r.status is Status.ISSUES_FOUND}
    assert fired == FOUND[name]
    for rule, res in results.items():
        assert res.datapoints > 0, rule
        live = json.loads((DATA / name / paths.rule_key(rule)).read_text())
        assert (live["status"], live["triggers"]) == (res.status.value, res.triggers), rule
    if name == "starving":
        (stall,) = results["StepOutlier"].findings
        assert stall.steps == (40, 40) and stall.value is not None and stall.value > 2.0


def test_the_summary_and_the_report_of_a_recorded_job(tmp_path: Path) -> None:
    job_dir = tmp_path / "starving"
    shutil.copytree(DATA / "starving", job_dir)  # the report is written into the job
    summary = summarize(stepscope.open(str(job_dir)))
    train = summary["steps"]["phases"]["train"]
    assert train["count"] == 60 and train["split"]["data_wait"] > 0.5  # the starving loader
    page = Path(write_report(stepscope.open(str(job_dir)))).read_text()
    assert "DataLoading" in page and "StepOutlier" in page and "<script" in page
