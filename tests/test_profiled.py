"""Windows never blind the rules (issue 29, item 1).

A step is ``profiled`` only if a window could have slowed it: in-process, the reader's
cap (:mod:`stepscope.analysis.profiled`) on synthetic frames and on a job recorded by an
agent that left the mark on (the H200 ``stall`` job); under ``stepscope run``, an export
made slow on purpose that outlasts many steps, with stalls planted after the window.
The scheduler's own test (the mark comes off when the export ends) is in
test_profiling.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rules_data as rd
import stepscope
from conftest import SCRIPTS
from stepscope.analysis.diagnosis import job_facts
from stepscope.analysis.profiled import LEFT_OUT, cap_profiled, profiling_spans, standing
from stepscope.rules import StepOutlier, diagnose, evaluate_input, evaluate_rules
from stepscope.rules._input import RuleInput

H200 = Path(__file__).resolve().parent / "data/h200"
STALLS = set(range(45, 600, 50))  # the H200 stall job's planted stalls (its README)
# A detailed window on steps 20-22 whose export sleeps 0.5 s more on the background
# thread, beside steps of about 15 ms: it outlasts tens of steps.
WINDOW = """[profiler.framework_profile_params.detailed_profiling_config]
start_step = 20
num_steps = 3
"""
TRAIN = ["--steps", "300", "--step-sleep", "0.01", "--slow-export", "0.5"]
EVERY = 40  # a 0.3 s stall every 40th step: steps 40, 80, ..., 280


def events(*rows: tuple[float, str, dict[str, object]], rank: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "time": [t for t, _, _ in rows],
            "rank": np.int32(rank),
            "node": rd.NODE,
            "kind": [k for _, k, _ in rows],
            "detail": [json.dumps(d) for _, _, d in rows],
        }
    )


def window(opened: float, closed: float, exported: float, first: int, last: int):
    """The two events of a detailed window on steps ``first``-``last``."""
    start = {"profile_kind": "detailed", "first_step": first}
    record = {"profile_kind": "detailed", "start_step": first, "end_step": last,
              "start_time": opened, "end_time": closed}  # fmt: skip
    return (opened, "profiling_start", start), (exported, "profiling_window", record)


def stuck(n: int = 200, first: int = 50) -> pd.DataFrame:
    """Steps of 0.1 s from t=0, marked from ``first`` to the end (the old agent's bug)."""
    marked = np.arange(n) >= first
    return rd.steps_frame(n, start=0.0, duration=0.1, profiled=marked)


# -- the cap ------------------------------------------------------------------------------------


def test_a_mark_left_on_stands_until_the_export_ended_and_one_step_after() -> None:
    steps = stuck()
    # window on steps 50-52 (t=5.0-5.3); its export ends at t=6.05, during step 60
    ev = events(*window(5.0, 5.3, 6.05, 50, 52))
    kept = steps.loc[standing(steps, ev), "step"].tolist()
    assert kept == list(range(50, 62))  # 60 ran while the export ended, 61 is the one after
    capped = cap_profiled(steps, ev)
    assert int(capped["profiled"].sum()) == 12 and int(steps["profiled"].sum()) == 150


def test_a_window_still_open_or_exporting_keeps_its_marks() -> None:
    steps = stuck()
    opened, _ = window(5.0, 5.3, 6.05, 50, 52)
    assert standing(steps, events(opened)).sum() == 150  # no record yet: spans to the end
    assert standing(steps, events()).sum() == 150  # no profiling event: nothing says wrong
    other_rank = events(*window(5.0, 5.3, 6.05, 50, 52), rank=1)
    assert standing(steps, other_rank).sum() == 150  # rank 1's windows say nothing of rank 0


def test_windows_of_two_kinds_at_once_span_from_the_first_open_to_the_last_export() -> None:
    steps = stuck(first=20)
    python = (
        (2.0, "profiling_start", {"profile_kind": "python", "first_step": 20}),
        (9.05, "profiling_window", {"profile_kind": "python", "start_step": 20,
                                    "start_time": 2.0, "end_time": 3.0}),
    )  # fmt: skip
    ev = events(*window(2.5, 3.0, 4.05, 25, 29), *python)
    spans = profiling_spans(ev)
    assert spans.of(0) == ((2.0, 9.05),) and spans.of(1) is None
    assert steps.loc[standing(steps, spans), "step"].tolist() == list(range(20, 92))


def test_each_phase_keeps_its_first_step_after_the_export() -> None:
    train = rd.steps_frame(100, start=0.0, duration=0.1, profiled=True)
    evals = rd.steps_frame(10, start=6.12, duration=0.01, phase="eval", profiled=True)
    steps = pd.concat([train, evals], ignore_index=True)
    ev = events(*window(0.0, 0.3, 6.05, 0, 2))
    kept = steps[standing(steps, ev)]
    assert kept.loc[kept["phase"] == "train", "step"].tolist() == list(range(62))
    assert kept.loc[kept["phase"] == "eval", "step"].tolist() == [0]


def test_step_outlier_judges_the_steps_after_the_export_and_says_what_it_left_out() -> None:
    d = np.full(400, 0.1)
    stalls = list(range(150, 400, 50))
    d[stalls] = 1.0
    steps = rd.steps_frame(400, start=0.0, duration=d, profiled=np.arange(400) >= 100)
    ev = events(*window(10.0, 10.3, 11.05, 100, 102))
    data = RuleInput(steps=steps, events=ev, nodes={rd.NODE: {}}, now=100.0)
    (res,) = evaluate_input([StepOutlier(n_outliers=2)], data)
    assert sorted(f.steps[0] for f in res.findings) == stalls
    assert res.details[LEFT_OUT] == 12  # 100-110 ran until the export ended; 111 after it
    assert "(12 steps left out: inside or slowed by profiling windows)" in res.message
    # Without the job's events, the marks stand: every step from 100 is left out.
    (blind,) = evaluate_input([StepOutlier(n_outliers=2)], RuleInput(steps=steps, now=100.0))
    assert not blind.findings and blind.details[LEFT_OUT] == 300


def test_the_diagnosis_says_how_many_steps_a_rule_left_out_when_more_than_a_handful() -> None:
    from stepscope.analysis.diagnosis import JobFacts, diagnose_verdicts

    def summary(left_out: int) -> str:
        verdict = {"rule": "StepOutlier", "status": "NoIssuesFound", "datapoints": 90,
                   "details": {LEFT_OUT: left_out}}  # fmt: skip
        return diagnose_verdicts([verdict], JobFacts(20.0)).summary

    assert summary(520).endswith(
        "checked StepOutlier (90 datapoints; 520 steps left out: inside or slowed by "
        "profiling windows)"
    )
    assert summary(5).endswith("checked StepOutlier (90 datapoints)")  # a handful: not said


# -- a job recorded by an agent that left the mark on (H200) -------------------------------------


def h200_job(tmp_path: Path, name: str) -> Path:
    """A copy of one of the H200 job folders, never the original."""
    return Path(shutil.copytree(H200 / name, tmp_path / name))


def test_the_h200_stall_job_is_judged_after_its_window(tmp_path: Path) -> None:
    job = stepscope.open(h200_job(tmp_path, "stall"))
    steps, ev = job.steps(), job.events()
    assert int(steps["profiled"].sum()) == 520  # as recorded: 100 to 619
    kept = steps.loc[standing(steps, ev), "step"].tolist()
    (record,) = [json.loads(d) for d in ev.loc[ev["kind"] == "profiling_window", "detail"]]
    exported = float(ev.loc[ev["kind"] == "profiling_window", "time"].iloc[0])
    during = steps[(steps["end"] > record["start_time"]) & (steps["start"] < exported)]
    assert kept == [*during["step"], int(during["step"].max()) + 1] == list(range(100, 106))

    # The job's own rule set (job.json has none: the defaults, as rules/StepOutlier.json says).
    verdict = json.loads((Path(job.path) / "rules/StepOutlier.json").read_text())
    rule = StepOutlier(**{k: v for k, v in verdict["parameters"].items() if k != "mode"})
    results = evaluate_rules(job, [rule], now=float(job.meta["end_time"]))
    (res,) = results
    found = {f.steps[0] for f in res.findings}
    assert found >= STALLS and found - STALLS <= {20}, sorted(found)  # 20: the first timed step
    assert res.status.value == "IssuesFound" and res.datapoints == 620 - 10 - 6
    assert res.details[LEFT_OUT] == 6  # the window, its stop and its export: 100-105
    diagnosis = diagnose(results, job_facts(job.meta, steps, float(job.meta["end_time"])))
    assert not diagnosis.summary.startswith("no problem found"), diagnosis.summary
    (entry,) = diagnosis.entries
    assert entry.rule == "StepOutlier" and "6 steps left out" in entry.message


def test_the_report_and_the_dashboard_mark_the_h200_stalls(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from stepscope.analysis.outliers import Definition, judge_steps
    from stepscope.dashboard import create_app
    from stepscope.report._context import Context

    ctx = Context.load(stepscope.open(h200_job(tmp_path, "stall")), now=0.0)
    assert int(ctx.steps["profiled"].sum()) == 6  # read through the cap
    judged = judge_steps(ctx.steps, Definition.of_job(ctx.rules))
    assert set(judged.loc[judged["outlier"], "step"]) >= STALLS

    app = create_app(str(tmp_path), "127.0.0.1", "t0ken-for-the-tests-0123456789")
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        chart = client.get("/api/jobs/stall/steps", params={"rank": 0}).json()
    series = {s["label"]: s for s in chart["charts"]["step_duration"]["series"]}
    dots = [v for v in series["outliers"]["values"] if v is not None]
    assert len(dots) >= len(STALLS)  # the recorded marks hid all but 3 (steps 20, 45, 95)


# -- a real run whose export outlasts many steps -----------------------------------------------


def slow_export_run(tmp_path: Path, *stalls: str) -> tuple[stepscope.Job, pd.DataFrame]:
    from conftest import stepscope_run

    config = tmp_path / "window.toml"
    config.write_text(WINDOW)
    args = [str(SCRIPTS / "mlp.py"), *TRAIN, *stalls]
    run = stepscope_run(tmp_path, args, "--no-rules", "--config", str(config))
    assert run.code == 0, run.stderr
    job = stepscope.open(run.job_path)
    return job, job.steps(phase="train").sort_values("step", ignore_index=True)


def marked_by_the_export(job: stepscope.Job, steps: pd.DataFrame) -> set[int]:
    """Check the agent's marks against the recorded times; the steps it marked."""
    ev = job.events()
    (record,) = [r for r in job.profiling_artifacts() if r["kind"] == "detailed"]
    assert (record["start_step"], record["end_step"]) == (20, 22)
    exported = float(ev.loc[ev["kind"] == "profiling_window", "time"].iloc[0])
    # The steps that ran while the window was open or its export ran: all marked, and at
    # most the one step after them too. The export outlasted several steps.
    during = set(steps.loc[(steps["end"] > record["start_time"]) & (steps["start"] < exported),
                           "step"])  # fmt: skip
    after_close = steps[(steps["start"] >= record["end_time"]) & (steps["start"] < exported)]
    assert len(after_close) >= 5, len(after_close)
    marked = set(steps.loc[steps["profiled"], "step"])
    assert during <= marked <= during | {max(during) + 1}, (sorted(during), sorted(marked))
    assert (standing(steps, ev) == steps["profiled"].to_numpy()).all()  # the cap is a no-op
    return marked


@pytest.mark.process
def test_stalls_after_a_slow_export_are_found(tmp_path: Path) -> None:
    job, steps = slow_export_run(tmp_path, "--stall-every", str(EVERY), "--stall-s", "0.3")
    marked = marked_by_the_export(job, steps)
    stalls = set(range(EVERY, 300, EVERY)) - marked  # those during the export are left out
    assert len(stalls) >= 5, sorted(marked)
    (res,) = evaluate_rules(job, [StepOutlier(n_outliers=3)])
    found = {f.steps[0] for f in res.findings}
    # A step slowed by the other processes of a shared machine may be flagged too.
    assert found >= stalls and len(found - stalls) <= 2, (sorted(found), sorted(stalls))
    assert res.status.value == "IssuesFound" and res.datapoints == 300 - 10 - len(marked)


@pytest.mark.process
def test_the_same_run_without_stalls_is_silent(tmp_path: Path) -> None:
    job, steps = slow_export_run(tmp_path)
    marked = marked_by_the_export(job, steps)
    (res,) = evaluate_rules(job, [StepOutlier(n_outliers=3)])
    assert res.datapoints == 300 - 10 - len(marked) > 0
    # No finding, save a step the rule itself says ran while other processes took the
    # CPU (this machine is shared): none of the steps after the export stands out.
    assert res.status.value == "NoIssuesFound"
    contended = res.details.get("contended_outliers", 0)
    assert len(res.findings) == contended <= 2, [f.message for f in res.findings]
