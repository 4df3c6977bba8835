"""Hung helpers (issue 31, items 1 and 2): a sampler or rule runner that is alive but
makes no progress (stopped with SIGSTOP, busy) is noticed while the job runs and
restarted, and never holds ``stepscope run`` past a bounded stop at the job's end; what
it was doing is recorded, the verdicts it could not finish are marked stale, and the
samples it did not take are a recorded sampling gap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

import stepscope
from conftest import BIN, env_for_tests
from stepscope.analysis.diagnosis import JobFacts, diagnose_verdicts
from stepscope.jobfolder import FaultLog, JobMeta, RuleVerdict, write_meta
from stepscope.launch._helpers import HUNG_ENV, seconds_from_env
from stepscope.launch._launcher import RunSpec
from stepscope.launch._stale import mark_stale
from stepscope.launch._supervise import RULES, SAMPLER, Helpers
from stepscope.process import ProgressFile, ProgressWriter
from stepscope.store import open_store
from test_fault_matrix import (
    STEPS,
    bare,  # noqa: F401  (the fixture)
    components,
    finish,
    helper,
    start,
    state_hash,
    unexplained_gaps,
    wait_for,
)

# A stand-in helper: beats once (the sampler's mark: a sample stored 5 s ago), then
# ignores SIGTERM and never beats again, as a hung helper.
FAKE = """
import signal, sys, time
from stepscope.process import ProgressWriter, dump_stack_on_signal
dump_stack_on_signal()
ProgressWriter(int(sys.argv[sys.argv.index("--progress-fd") + 1])).beat(time.time() - 5)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(0.02)
"""


def test_progress_file_round_trip() -> None:
    progress = ProgressFile()
    try:
        assert progress.read() == (None, None)  # nothing written yet
        ProgressWriter(progress.fd).beat(123.5)
        beat, mark = progress.read()
        assert beat is not None and abs(beat - time.monotonic()) < 5 and mark == 123.5
        ProgressWriter(None).beat(1.0)  # no file: nothing to write, nothing raised
    finally:
        progress.close()


def test_seconds_from_env(capsys: pytest.CaptureFixture[str]) -> None:
    assert seconds_from_env({HUNG_ENV: "2.5"}, HUNG_ENV, 15.0) == 2.5
    assert seconds_from_env({}, HUNG_ENV, 15.0) == 15.0
    assert capsys.readouterr().err == ""
    assert seconds_from_env({HUNG_ENV: "-1"}, HUNG_ENV, 15.0) == 15.0
    assert "is not a positive number" in capsys.readouterr().err


def _verdict(rule: str, status: str, verdict: str | None, **more: Any) -> RuleVerdict:
    body: dict[str, Any] = {"rule": rule, "status": status, "verdict": verdict}
    return {**body, "datapoints": 40, "message": "m", **more}  # type: ignore[typeddict-item]


@pytest.mark.parametrize("stale", [True, False])
def test_a_stale_diagnosis_never_says_no_problem_found(stale: bool) -> None:
    mark = {"stale": {"as_of": 6.7, "reason": "the rule runner did not finish"}} if stale else {}
    verdicts = [_verdict(r, "InProgress", "NoIssuesFound", **mark) for r in ("A", "B")]
    summary = diagnose_verdicts(verdicts, JobFacts(14.0, 10.0)).summary
    if stale:
        assert summary.startswith("the rule runner did not finish: verdicts as of 6.7 s")
        assert "no problem found" not in summary and "checked A (40 datapoints)" in summary
    else:  # the silent twin: same verdicts, not stale
        assert summary.startswith("no problem found in this 14 s job")


def test_mark_stale_marks_the_running_verdicts_only(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    meta = JobMeta.new("j", ["python", "t.py"], {}, ["n1"])
    write_meta(store, meta)
    t0 = meta.start_time
    store.write_json("rules/A.json", _verdict("A", "InProgress", "IssuesFound", updated=t0 + 6.7))
    store.write_json("rules/B.json", _verdict("B", "NoIssuesFound", None, updated=t0 + 9.0))
    assert mark_stale(store) == 6.7
    a, b = store.read_json("rules/A.json"), store.read_json("rules/B.json")
    assert a["stale"] == {"as_of": 6.7, "reason": "the rule runner did not finish"}
    assert "stale" not in b  # the final evaluation wrote it: not stale


def _fake_helpers(tmp_path: Path) -> tuple[Helpers, Any]:
    store = open_store(tmp_path)
    write_meta(store, JobMeta.new("j", ["python", "t.py"], {}, ["n1"]))
    spec = RunSpec(command=["x"], output=str(tmp_path), job="j", node="n1")
    helpers = Helpers(spec, store, os.getpid(), FaultLog(store, "n1", os.getpid()))
    assert [h.name for h in helpers.helpers] == [SAMPLER, RULES]
    for h in helpers.helpers:
        h.command = lambda extra: [sys.executable, "-c", FAKE, *extra]
    helpers.start()
    for h in helpers.helpers:
        wait_for(lambda h=h: h.last_progress()[0] is not None, f"{h.name}'s first beat", 60)
    return helpers, store


@pytest.mark.process
def test_stop_kills_a_stopped_and_a_busy_helper_within_its_deadline(tmp_path: Path) -> None:
    helpers, store = _fake_helpers(tmp_path)
    sampler, rules = helpers.helpers
    assert sampler.proc is not None and rules.proc is not None
    sampler.proc.send_signal(signal.SIGSTOP)  # the runner stays busy, ignoring the end
    store.write_json("rules/A.json", _verdict("A", "InProgress", "IssuesFound"))
    helpers.stop_s = 1.0
    began = time.monotonic()
    helpers.stop()
    took = time.monotonic() - began
    assert took < helpers.stop_s + 4, took  # the deadline, the stacks, the records
    assert sampler.proc.poll() is not None and rules.proc.poll() is not None
    faults = {d["component"]: d for d in map(store.read_json, store.list("faults/"))}
    stopped, busy = faults["helper-sampler"], faults["helper-rules-runner"]
    assert stopped["state"] == "T" and stopped["stack"] == [] and "stack_note" in stopped
    assert "did not finish within 1 s" in stopped["error"] and "SIGSTOP" in stopped["error"]
    assert any("most recent call first" in line for line in busy["stack"]), busy["stack"]
    assert "its verdicts are stale" in busy["error"]
    assert "stale" in store.read_json("rules/A.json")
    (gap,) = faults["sampling-gap"]["gaps"]  # from the newest stored sample (the mark)
    assert gap["end"] - gap["start"] > 4.5 and "hung at the end" in gap["cause"]


@pytest.mark.process
def test_a_helper_that_hangs_while_the_job_runs_is_restarted(tmp_path: Path) -> None:
    helpers, store = _fake_helpers(tmp_path)
    sampler = helpers.helpers[0]
    assert sampler.proc is not None
    first = sampler.proc.pid
    sampler.proc.send_signal(signal.SIGSTOP)
    helpers.hung_s, helpers.stop_s = 1.0, 0.5

    def restarted() -> bool:
        helpers.check(time.time())
        return sampler.proc is not None and sampler.proc.pid != first

    try:
        wait_for(restarted, "the hung sampler's restart", 30)
    finally:
        helpers.stop()
    doc = store.read_json(f"faults/helper-sampler-n1-{os.getpid()}.json")
    assert doc["signal"] == "SIGKILL" and doc["restarts"] == 1 and doc["state"] == "T"
    assert "sampler hung (stopped (SIGSTOP)" in doc["error"] and "restarted" in doc["error"]
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == "zombie"


def _stop_helpers(proc: subprocess.Popen[str], modules: list[str]) -> list[psutil.Process]:
    found = [h for m in modules if (h := helper(proc, m)) is not None]
    assert len(found) == len(modules)
    for h in found:
        h.send_signal(signal.SIGSTOP)
    return found


@pytest.mark.process
def test_helpers_stopped_until_the_end_hold_the_job_a_few_seconds(
    tmp_path: Path,
    bare: str,  # noqa: F811
) -> None:
    env = env_for_tests(**{HUNG_ENV: "300"})  # not noticed while it runs: the end's case
    proc = start(str(tmp_path), tmp_path, env=env, live=True)
    try:
        wait_for(lambda: list((tmp_path / "j" / "rules").glob("*.json")), "first verdicts")
        _stop_helpers(proc, ["stepscope.sampler.main", "stepscope.rules.runner"])
    finally:
        finish(proc)
    returned = time.time()
    assert proc.returncode == 0, (tmp_path / "stderr").read_text()
    assert state_hash(tmp_path / "traced.pt") == bare, "training changed under stepscope"
    job = stepscope.open(str(tmp_path / "j"))
    after = returned - job.meta["end_time"]
    assert after < 15, f"stepscope run returned {after:.1f} s after the training"
    assert job.meta["status"] == "Completed" and job.meta["exit_code"] == 0
    assert sorted(job.steps(phase="train")["step"]) == list(range(STEPS))
    faults = components(job)
    for name in (SAMPLER, RULES):
        assert "did not finish within" in faults[f"helper-{name}"]["error"]
        assert faults[f"helper-{name}"]["state"] == "T"
    verdicts = [json.loads(p.read_text()) for p in (tmp_path / "j" / "rules").glob("*.json")]
    assert verdicts and all(v["stale"]["as_of"] > 0 for v in verdicts)
    (gap,) = faults["sampling-gap"]["gaps"]  # from the last stored sample to the end
    newest = max(float(t) for t in job.system()["time"])
    assert gap["start"] <= newest + 0.01 and gap["end"] >= job.meta["end_time"] - 1
    shown = subprocess.run(
        [str(BIN / "stepscope"), "show", str(tmp_path / "j")], capture_output=True, text=True
    )
    assert "the rule runner did not finish: verdicts as of" in shown.stdout
    assert "no problem found" not in shown.stdout


@pytest.mark.process
@pytest.mark.parametrize(
    ("name", "module"), [(SAMPLER, "stepscope.sampler.main"), (RULES, "stepscope.rules.runner")]
)
def test_a_helper_stopped_mid_run_is_restarted(
    tmp_path: Path,
    bare: str,  # noqa: F811
    name: str,
    module: str,
) -> None:
    proc = start(str(tmp_path), tmp_path, env=env_for_tests(**{HUNG_ENV: "3"}), live=True)
    try:
        wait_for(lambda: list((tmp_path / "j" / "rules").glob("*.json")), "first verdicts")
        (first,) = _stop_helpers(proc, [module])
        wait_for(lambda: (h := helper(proc, module)) is not None and h.pid != first.pid, "restart")
    finally:
        finish(proc)
    assert proc.returncode == 0, (tmp_path / "stderr").read_text()
    assert state_hash(tmp_path / "traced.pt") == bare, "training changed under stepscope"
    job = stepscope.open(str(tmp_path / "j"))
    hung = components(job)[f"helper-{name}"]
    assert "hung (stopped (SIGSTOP)" in hung["error"] and hung["restarts"] >= 1, hung
    assert not unexplained_gaps(job)
    if name == SAMPLER:
        gaps = components(job)["sampling-gap"]["gaps"]
        assert any("hung" in g["cause"] and g["end"] - g["start"] > 3 for g in gaps), gaps
    verdicts = [json.loads(p.read_text()) for p in (tmp_path / "j" / "rules").glob("*.json")]
    assert verdicts and all(v["status"] != "InProgress" and "stale" not in v for v in verdicts)
