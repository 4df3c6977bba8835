"""The diagnosis: problems ranked by the time they cost, "no problem found" with what was
checked, the rules' costs behind it, and how ``show`` and the report open with it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import rules_data as rd
import stepscope
from rules_data import judge
from stepscope.cli import main
from stepscope.report import render_report
from stepscope.rules import (
    DataLoading,
    Finding,
    JobFacts,
    RuleInput,
    RuleResult,
    Status,
    diagnose,
    evaluate_input,
    evaluate_job,
)
from stepscope.rules._live import merge
from stepscope.rules.runner import write_results
from stepscope.rules.straggler import Straggler
from stepscope.testing import SyntheticJob, write_synthetic_job

DATA = Path(__file__).parent / "data"
FACTS = JobFacts(wall_seconds=1080.0, step_seconds=1000.0)  # an 18-minute job


def found(rule: str, cost: float | None, severity: float = 0.5, **kw: object) -> RuleResult:
    finding = Finding(f"{rule} finding", f"fix {rule}", severity, node="n", rank=0,
                      start=10.0, end=20.0, steps=(3, 9))  # fmt: skip
    status = kw.pop("status", Status.ISSUES_FOUND)
    return RuleResult(rule, status, 1, 10, f"{rule} fired", f"fix {rule}", findings=(finding,),
                      cost_seconds=cost, **kw)  # fmt: skip


def quiet(rule: str, datapoints: int = 50, **kw: object) -> RuleResult:
    return RuleResult(rule, kw.pop("status", Status.NO_ISSUES_FOUND), 0, datapoints, **kw)


def test_problems_are_ranked_by_cost_then_unknown_costs_by_severity() -> None:
    results = [
        found("Cheap", 10.0, severity=0.2),
        found("Unknown", None, severity=0.9),
        quiet("Fine"),
        found("Costly", 100.0, severity=0.1),
        found("Unsure", None, severity=0.3),
        found("TieB", 10.0, severity=0.8),
        found("TieA", 10.0, severity=0.8),  # same cost and severity as TieB: by name
    ]
    d = diagnose(results, FACTS)
    assert [e.rule for e in d.entries] == ["Costly", "TieA", "TieB", "Cheap", "Unknown", "Unsure"]
    assert [c.rule for c in d.checked] == ["Fine"] and not d.not_checked
    assert d.summary == "6 problems found in this 18.0 min job, most costly first"
    top = d.entries[0]
    assert top.cost_share == pytest.approx(100 / 1080)
    assert top.recommendation == "fix Costly"
    assert (top.evidence.anchor, top.evidence.steps, top.evidence.rank) == (
        "rule-Costly",
        (3, 9),
        0,
    )


def test_a_message_shows_the_cost_against_the_job_and_what_was_found() -> None:
    (e,) = diagnose([found("DataLoading", 240.0)], FACTS).entries
    assert e.message == (
        "waiting for data: about 4.0 min of this 18.0 min job (22%); DataLoading finding"
    )
    (u,) = diagnose([found("HostContention", None)], JobFacts()).entries
    assert u.message == "host contention (cost unknown): HostContention finding"
    assert u.cost_share is None
    (w,) = diagnose([found("X", 5.0)], JobFacts()).entries  # wall time unknown: no share
    assert w.cost_share is None and "about 5.0 s of the job;" in w.message


def test_nothing_fired_says_what_was_checked_and_what_could_not_be() -> None:
    results = [
        quiet("StepOutlier", 50),
        quiet("GPUMemoryIncrease", 0, status=Status.NOT_APPLICABLE, reason="no GPU on vm"),
        quiet("DataLoading", 59),
        quiet("Empty", 0),
        quiet("Broken", 0, status=Status.ERROR, reason="the rule failed: KeyError: 'x'"),
        quiet("Live", 7, status=Status.IN_PROGRESS, verdict=Status.NO_ISSUES_FOUND),
    ]
    d = diagnose(results, JobFacts(wall_seconds=27.0))
    assert d.entries == () and d.to_list() == []
    assert [(c.rule, c.datapoints) for c in d.checked] == [
        ("DataLoading", 59), ("Live", 7), ("StepOutlier", 50)
    ]  # fmt: skip
    reasons = {c.rule: c.reason for c in d.not_checked}
    assert reasons == {"Broken": "error: the rule failed: KeyError: 'x'", "Empty": "no datapoints",
                       "GPUMemoryIncrease": "no GPU on vm"}  # fmt: skip
    assert d.summary.startswith(
        "no problem found in this 27 s job: checked DataLoading (59 datapoints), Live (7 "
    )
    assert d.summary.endswith(
        "; not checked: Broken (error: the rule failed: KeyError: 'x'), Empty (no datapoints), "
        "GPUMemoryIncrease (no GPU on vm)"
    )
    same = [quiet(r, 0, status=Status.NOT_APPLICABLE, reason="no GPU") for r in ("A", "B")]
    assert diagnose([*same, quiet("C")], FACTS).summary.endswith("not checked: A, B (no GPU)")
    checks = d.checks()
    assert checks["problems"] == 0 and checks["not_checked"][2]["rule"] == "GPUMemoryIncrease"


def test_no_verdict_that_judged_data_is_never_no_problem_found() -> None:
    na = quiet("Straggler", 0, status=Status.NOT_APPLICABLE, reason="needs 2 ranks")
    assert diagnose([na], FACTS).summary == "nothing checked yet: Straggler (needs 2 ranks)"
    assert diagnose([], FACTS).summary == "nothing checked yet: no rule results in this job"


def test_a_provisional_verdict_of_a_running_job_is_a_problem() -> None:
    live = found("DataLoading", 3.0, status=Status.IN_PROGRESS, verdict=Status.ISSUES_FOUND)
    d = diagnose([live], FACTS)
    assert [(e.rule, e.status) for e in d.entries] == [("DataLoading", "InProgress")]
    assert d.to_list()[0]["cost_seconds"] == 3.0


# -- the rules' costs ------------------------------------------------------------------


def test_data_loading_costs_the_wait_above_the_allowance(tmp_path: Path) -> None:
    for name, wait in (("bad", 0.1), ("good", 0.005)):
        rd.write_steps(
            rd.new_job(tmp_path / name), rd.steps_frame(100, duration=0.2, data_wait=wait)
        )
    bad, good = judge(tmp_path / "bad", "DataLoading"), judge(tmp_path / "good", "DataLoading")
    assert bad.status is Status.ISSUES_FOUND and good.status is Status.NO_ISSUES_FOUND
    assert bad.cost_seconds == pytest.approx(99 * (0.1 - 0.05 * 0.2), rel=1e-4)  # steps 1-99
    assert good.cost_seconds is None and good.datapoints > 0


def test_nodes_side_by_side_cost_their_worst_not_their_sum() -> None:
    steps = pd.concat([
        rd.steps_frame(100, rank=0, node="a", duration=0.2, data_wait=0.1),
        rd.steps_frame(100, rank=1, node="b", duration=0.2, data_wait=0.15),
    ])  # fmt: skip
    (res,) = evaluate_input([DataLoading()], RuleInput(steps=steps, now=rd.T0 + 100))
    assert res.cost_seconds == pytest.approx(99 * (0.15 - 0.01), rel=1e-4)


def test_max_initialization_time_costs_the_start_beyond_the_threshold(tmp_path: Path) -> None:
    for name, first in (("slow", 30.0), ("fast", 2.0)):
        store = rd.new_job(tmp_path / name)
        rd.write_process_start(store, time=rd.T0)
        rd.write_steps(store, rd.steps_frame(20, start=rd.T0 + first))
    slow = judge(tmp_path / "slow", "MaxInitializationTime", threshold=0.25)  # 15 s
    fast = judge(tmp_path / "fast", "MaxInitializationTime", threshold=0.25)
    assert slow.status is Status.ISSUES_FOUND and slow.cost_seconds == pytest.approx(15.0)
    assert fast.status is Status.NO_ISSUES_FOUND and fast.cost_seconds is None


def _ranks(slow_wait: float, n: int = 60) -> pd.DataFrame:
    waits = {r: slow_wait if r == 2 else 0.001 for r in range(4)}
    frames = [
        rd.steps_frame(n, r, f"n{r // 2}", duration=0.1, data_wait=w) for r, w in waits.items()
    ]
    return pd.concat(frames)


def test_straggler_costs_what_its_peers_waited() -> None:
    slow = Straggler().evaluate(RuleInput(steps=_ranks(0.05)))
    assert [f.rank for f in slow.findings] == [2]
    assert slow.cost_seconds == pytest.approx(55 * 0.049, rel=1e-3)  # steps 5-59
    fair = Straggler().evaluate(RuleInput(steps=_ranks(0.001)))
    assert fair.status is Status.NO_ISSUES_FOUND and fair.cost_seconds is None


def test_live_chunks_add_their_costs() -> None:
    rule = DataLoading()
    a, b, none = found("DataLoading", 2.0), found("DataLoading", 3.0), found("DataLoading", None)
    assert merge(rule, a, b).cost_seconds == 5.0 and merge(rule, none, b).cost_seconds == 3.0
    assert merge(rule, none, none).cost_seconds is None


# -- show and the report ----------------------------------------------------------------


def rejudged(tmp_path: Path, name: str) -> Path:
    """A recorded job with its verdicts written again as the live runner's final scan
    writes them today (the recorded ones predate cost_seconds)."""
    job_dir = tmp_path / name
    shutil.copytree(DATA / name, job_dir)
    job = stepscope.open(str(job_dir))
    write_results(job.store, evaluate_job(job))
    return job_dir


def test_show_opens_with_the_diagnosis_of_a_starving_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_dir = rejudged(tmp_path, "starving")
    assert main(["show", str(job_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "diagnosis  2 problems found in this 27 s job, most costly first"
    assert lines[1] == (
        "  1. waiting for data: about 18 s of this 27 s job (68%); rank 0 waited for data 90% "
        "(> 35%) of its step time in steps 1-59"
    )
    assert lines[2].startswith("     fix: Feed the loop faster: DataLoader(num_workers=N)")
    assert lines[3].startswith("  2. slow steps")
    assert main(["show", "--json", str(job_dir)]) == 0
    summary = json.loads(capsys.readouterr().out)
    first = summary["diagnosis"][0]
    assert {"rule", "cost_seconds", "cost_share", "message", "recommendation"} <= set(first)
    assert first["rule"] == "DataLoading" and first["cost_seconds"] == pytest.approx(18.2, abs=0.1)
    assert first["cost_share"] == pytest.approx(first["cost_seconds"] / 26.967, rel=1e-3)
    assert first["evidence"]["anchor"] == "rule-DataLoading"
    assert summary["diagnosis_checks"]["problems"] == 2


def test_show_of_the_healthy_twin_finds_no_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_dir = rejudged(tmp_path, "healthy")
    assert main(["show", "--json", str(job_dir)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["diagnosis"] == []
    checks = summary["diagnosis_checks"]
    assert [c["rule"] for c in checks["checked"]] == ["DataLoading", "StepOutlier"]
    assert all(c["datapoints"] > 0 for c in checks["checked"])
    assert main(["show", str(job_dir)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == ("diagnosis  no problem found in this 4.8 s job: checked DataLoading "
                     "(59 datapoints), StepOutlier (50 datapoints)")  # fmt: skip


def test_recorded_verdicts_without_a_cost_are_ranked_by_severity(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["show", str(DATA / "starving")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("most severe first (no cost known)")
    assert lines[1].startswith("  1. slow steps (cost unknown): train step 40")


HOSTILE = '<img src=x onerror="window.__pwned=1">'


def test_the_report_opens_with_the_diagnosis_escaped_and_linked(tmp_path: Path) -> None:
    finding = {"message": "slow " + HOSTILE, "severity": 0.9, "start": 1_763_850_100.0,
               "end": 1_763_850_110.0, "node": "node-a", "rank": 0, "steps": [5, 8]}  # fmt: skip
    rules = [
        {"rule": "StepOutlier", "status": "IssuesFound", "triggers": 1, "datapoints": 9,
         "recommendation": "fix " + HOSTILE, "findings": [finding], "cost_seconds": 12.0},
        {"rule": "DataLoading", "status": "NoIssuesFound", "datapoints": 40},
    ]  # fmt: skip
    write_synthetic_job(str(tmp_path / "j"), SyntheticJob(name="j"), rules)
    page = render_report(stepscope.open(str(tmp_path / "j")))
    main_html = page[page.index("<main>") :]
    assert main_html.startswith('<main><section id="diagnosis"><h2>Diagnosis</h2>')
    section = main_html[: main_html.index("</section>")]
    assert HOSTILE not in page and "&lt;img src=x" in section
    assert (
        '<a href="#rule-StepOutlier">Evidence: StepOutlier</a> (1 finding, steps 5\u20138'
        in section
    )
    assert 'id="rule-StepOutlier"' in page  # the link's target
    assert "slow steps: about 12 s of this" in section
    assert '<a href="#diagnosis">Diagnosis</a>' in page


@pytest.mark.process
def test_show_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """`stepscope show JOB | head -1`: the reader closes the pipe; no traceback."""
    import os
    import subprocess
    import sys

    job_dir = rejudged(tmp_path, "starving")
    code = "import sys; from stepscope.cli import main; sys.exit(main(sys.argv[1:]))"
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    proc = subprocess.run(
        [sys.executable, "-c", code, "show", str(job_dir)],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr == ""


def test_show_says_how_much_cpu_other_processes_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every summary carries the others' CPU: node CPU minus the job's, of all cores."""
    for name, cpu in (("busy", 95.0), ("quiet", 40.0)):
        store = rd.new_job(tmp_path / name)
        rd.write_system(store, rd.system_frame(40, cpu=cpu))  # 4 cores, the job at 150%
        assert main(["show", str(tmp_path / name)]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if "other processes'" in x)
        others = max(cpu - 150.0 / 4, 0.0)  # 57.5% and 2.5% of the node
        assert line.split()[3:5] == [f"{others:.1f}", "%"], line
        assert main(["show", "--json", str(tmp_path / name)]) == 0
        summary = json.loads(capsys.readouterr().out)
        p50 = summary["system"]["nodes"][rd.NODE]["metrics"]["others_cpu"]["p50"]
        assert p50 == pytest.approx(others, abs=0.01)


def test_the_same_data_wait_is_counted_once() -> None:
    """DataLoaderWorkers prices the typical steps' data wait, DataLoading the whole data
    wait, which contains it: the diagnosis counts DataLoading only beyond it, and the
    costs never add up to more than the job (a third rule's estimate is capped)."""
    facts = JobFacts(wall_seconds=100.0, step_seconds=95.0)
    results = [found("DataLoading", 60.0), found("DataLoaderWorkers", 45.0), found("Other", 50.0)]
    d = diagnose(results, facts)
    cost = {e.rule: e.cost_seconds for e in d.entries}
    assert [e.rule for e in d.entries] == ["Other", "DataLoaderWorkers", "DataLoading"]
    assert cost["Other"] == pytest.approx(50.0)
    assert cost["DataLoaderWorkers"] == pytest.approx(45.0)
    # 60 less the 45 counted already is 15, of which the job's 100 s leave 5
    assert cost["DataLoading"] == pytest.approx(5.0)
    assert sum(c or 0.0 for c in cost.values()) <= facts.wall_seconds
    (dl,) = [e for e in d.entries if e.rule == "DataLoading"]
    assert "beyond 45 s counted under DataLoaderWorkers (less 10 s" in dl.message
    two = diagnose([found("DataLoading", 60.0), found("DataLoaderWorkers", 45.0)], facts)
    assert [e.cost_seconds for e in two.entries] == [45.0, 15.0]
    # Alone, each keeps its own estimate (the twin: nothing overlaps, nothing capped).
    alone = diagnose([found("DataLoading", 60.0), found("Other", 30.0)], facts)
    assert {e.rule: e.cost_seconds for e in alone.entries} == {"DataLoading": 60.0, "Other": 30.0}
    assert all("beyond" not in e.message for e in alone.entries)
