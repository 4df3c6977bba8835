"""A job whose data is incomplete (a rank ended without its agent's end, issue 31) is
said so everywhere: the diagnosis says what it found in the recorded part and never
"no problem found"; ``show``, the report and the dashboard's diagnosis say why and which
ranks. Each test has its twin: the same job, whole, says nothing of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.diagnosis import JobFacts, diagnose_verdicts
from stepscope.cli import main
from stepscope.jobfolder import RuleVerdict, update_meta
from stepscope.report import render_report
from stepscope.rules import evaluate_job
from stepscope.rules.runner import write_results
from stepscope.store import open_store

DATA = Path(__file__).parent / "data"
WHY = (
    "2 ranks (0, 1) ended without flushing; rank 0 exited with code 0 without its agent's "
    "end (os._exit, a signal or a native crash): ended without flushing; up to 2.0 s of "
    "steps lost"
)


def _verdict(rule: str, status: str, **more: Any) -> RuleVerdict:
    body: dict[str, Any] = {"rule": rule, "status": status, "datapoints": 40, "message": "m"}
    return {**body, **more}  # type: ignore[typeddict-item]


@pytest.mark.parametrize("incomplete", [WHY, None])
def test_an_incomplete_diagnosis_never_says_no_problem_found(incomplete: str | None) -> None:
    verdicts = [_verdict(r, "NoIssuesFound") for r in ("A", "B")]
    summary = diagnose_verdicts(verdicts, JobFacts(14.0, 10.0, incomplete)).summary
    if incomplete is None:  # the twin: the same verdicts on a whole job
        assert summary.startswith("no problem found in this 14 s job: checked A")
        return
    assert summary.startswith(f"the job's data is incomplete ({WHY}); ")
    assert "no problem found" not in summary
    assert "nothing found in the recorded part of this 14 s job: checked A (40 datapoints)" in (
        summary
    )


def test_an_incomplete_diagnosis_says_what_it_found_in_the_recorded_part() -> None:
    fired = _verdict("StepOutlier", "IssuesFound", cost_seconds=3.0, findings=[])
    d = diagnose_verdicts([fired, _verdict("A", "NoIssuesFound")], JobFacts(14.0, 10.0, WHY))
    assert d.summary.startswith(f"the job's data is incomplete ({WHY}); 1 problem found in ")
    assert "the recorded part of this 14 s job, most costly first" in d.summary
    assert [e.rule for e in d.entries] == ["StepOutlier"]


def test_stale_and_incomplete_say_both() -> None:
    mark = {"stale": {"as_of": 6.7, "reason": "the rule runner did not finish"}}
    verdicts = [_verdict("A", "InProgress", verdict="NoIssuesFound", **mark)]
    summary = diagnose_verdicts(verdicts, JobFacts(14.0, 10.0, WHY)).summary
    assert summary.startswith(f"the job's data is incomplete ({WHY}); the rule runner did not")
    assert "none had found a problem by then in the recorded part of this 14 s job" in summary
    assert "no problem found" not in summary


def _healthy(tmp_path: Path, incomplete: bool) -> Path:
    """The recorded healthy job, judged again; marked incomplete as its launcher would."""
    job_dir = tmp_path / "healthy"
    shutil.copytree(DATA / "healthy", job_dir)
    write_results(stepscope.open(str(job_dir)).store, evaluate_job(stepscope.open(str(job_dir))))
    if incomplete:
        update_meta(open_store(str(job_dir)), incomplete=True, incomplete_reason=WHY)
    return job_dir


@pytest.mark.parametrize("incomplete", [True, False])
def test_show_says_incomplete_with_why_and_which_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], incomplete: bool
) -> None:
    job_dir = _healthy(tmp_path, incomplete)
    assert main(["show", str(job_dir)]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert main(["show", "--json", str(job_dir)]) == 0
    shown = json.loads(capsys.readouterr().out)
    if not incomplete:  # the twin
        assert first.startswith("diagnosis  no problem found in this 4.8 s job: checked")
        assert "INCOMPLETE" not in out and shown["incomplete"] is None
        return
    assert first.startswith(f"diagnosis  the job's data is incomplete ({WHY}); nothing found")
    assert "no problem found" not in out
    assert f"data       INCOMPLETE: {WHY}" in out
    assert shown["incomplete"] == WHY
    assert shown["diagnosis_checks"]["summary"].startswith("the job's data is incomplete")


@pytest.mark.parametrize("incomplete", [True, False])
def test_the_report_says_incomplete_with_why_and_which_ranks(
    tmp_path: Path, incomplete: bool
) -> None:
    page = render_report(stepscope.open(str(_healthy(tmp_path, incomplete))))
    main_html = page[page.index("<main>") :]
    diagnosis = main_html[: main_html.index("</section>")]
    if not incomplete:  # the twin
        assert 'class="badge st-Incomplete"' not in page and "incomplete" not in diagnosis
        assert "no problem found in this 4.8 s job" in diagnosis
        return
    summary = main_html[main_html.index('<section id="summary"') :]
    summary = summary[: summary.index("</section>")]
    assert '<span class="badge st-Incomplete">Incomplete</span>' in summary
    escaped = WHY.replace("'", "&#x27;")
    assert escaped in summary and "ranks (0, 1)" in summary
    assert f"the job&#x27;s data is incomplete ({escaped}); nothing found" in diagnosis
    assert "no problem found" not in diagnosis
