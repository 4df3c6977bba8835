"""The live rule runner on a fake live job that the test appends to."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rules_data as rd
import stepscope
from stepscope.rules import Status, build_rules
from stepscope.rules.runner import Runner
from stepscope.store import Store

FAST = {"scan_interval_us": 1_000_000}


def live_job(path: Path, rules: list[dict[str, Any]], start: float) -> Store:
    store = rd.new_job(path, rules=rules, status="Running", start=start)
    store.write_json(f"heartbeat/{rd.NODE}.json", {"time": time.time(), "pid": 1, "interval_s": 2})
    rd.node_info(store, gpus=0)
    rd.write_process_start(store, time=start)
    return store


def append_steps(store: Store, first: int, n: int, start: float, stall: int | None = None) -> None:
    d = 0.2 + np.random.default_rng(first).normal(0, 0.004, n)
    if stall is not None:
        d[stall - first] = 5.0
    frame = rd.steps_frame(n, start=start, duration=d)
    frame["step"] = np.arange(first, first + n)
    rd.write_steps(store, frame)


def test_each_scan_reads_only_new_rows(tmp_path: Path) -> None:
    t0 = 1_760_000_000.0
    store = live_job(tmp_path / "j", [], t0)
    rules = build_rules([{"name": "StepOutlier"}, {"name": "DataLoading"}])
    clock = [t0 + 10]
    runner = Runner(stepscope.open(str(tmp_path / "j")), rules, clock=lambda: clock[0])
    reader = runner.readers["steps"]
    end = t0 + 1.0
    for scan in range(5):
        append_steps(store, scan * 100, 100, end)  # a new segment of 100 steps each time
        end += 100 * 0.2
        clock[0] = end
        before_rows, before_files = reader.rows_read, reader.files_read
        results = runner.scan()
        assert reader.rows_read - before_rows == 100
        assert reader.files_read - before_files <= 2  # the last segment seen and the new one
        assert all(r.status is Status.IN_PROGRESS for r in results)
    by_name = {r.rule: r for r in results}
    assert by_name["DataLoading"].verdict is Status.NO_ISSUES_FOUND
    assert by_name["StepOutlier"].datapoints == 490  # 500 steps less the 10 skipped, once each


def test_live_outlier_is_reported_once_and_stops_the_job(tmp_path: Path) -> None:
    t0 = 1_760_000_000.0
    entry = {"name": "StepOutlier", "parameters": {"n_outliers": 0}, "actions": ["stop"]}
    store = live_job(tmp_path / "j", [entry], t0)
    runner = Runner(stepscope.open(str(tmp_path / "j")), build_rules([entry]), clock=lambda: t0)
    append_steps(store, 0, 300, t0 + 1, stall=150)
    for _ in range(3):
        (res,) = runner.scan()
    assert res.verdict is Status.ISSUES_FOUND and [f.steps for f in res.findings] == [(150, 150)]
    assert res.cost_seconds == pytest.approx(4.8, abs=0.05)  # the stall's excess, once
    stops = store.list("control", suffix=".json")
    assert len(stops) == 1
    assert store.read_json(stops[0])["by"] == "rule:StepOutlier"


def statuses(store: Store) -> dict[str, str]:
    out = {}
    for key in store.list("rules", suffix=".json"):
        data = store.read_json(key)
        out[data["rule"]] = data["status"]
    return out


def wait_for(cond: Any, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


@pytest.mark.process
def test_runner_process_live_then_final(tmp_path: Path) -> None:
    now = time.time()
    rules = [
        {"name": "StepOutlier", "parameters": {**FAST, "n_outliers": 0}},
        {"name": "DataLoading", "parameters": FAST},
    ]
    store = live_job(tmp_path / "j", rules, now - 60)
    append_steps(store, 0, 100, now - 50)
    cmd = [sys.executable, "-m", "stepscope.rules.runner", "--job-url", str(tmp_path / "j")]
    proc = subprocess.Popen(cmd)
    try:
        wait_for(
            lambda: statuses(store) == {"StepOutlier": "InProgress", "DataLoading": "InProgress"}
        )
        append_steps(store, 100, 100, now - 30, stall=150)
        wait_for(lambda: store.read_json("rules/StepOutlier.json")["verdict"] == "IssuesFound")
        meta = store.read_json("job.json")
        store.write_json("job.json", {**meta, "status": "Completed", "end_time": time.time()})
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    assert statuses(store) == {"StepOutlier": "IssuesFound", "DataLoading": "NoIssuesFound"}
    final = json.loads((tmp_path / "j" / "rules" / "StepOutlier.json").read_text())
    assert [f["steps"] for f in final["findings"]] == [[150, 150]] and final["datapoints"] == 190


@pytest.mark.process
def test_runner_once_and_fault_file(tmp_path: Path) -> None:
    store = live_job(tmp_path / "j", [{"name": "Nope"}], 1_760_000_000.0)
    cmd = [
        sys.executable,
        "-m",
        "stepscope.rules.runner",
        "--job-url",
        str(tmp_path / "j"),
        "--once",
    ]
    assert subprocess.run(cmd, timeout=120).returncode == 1
    (fault,) = store.list("faults", suffix=".json")
    assert "Unknown rule 'Nope'" in store.read_json(fault)["error"]


def test_a_failing_scan_is_recorded_and_the_next_reads_its_rows_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    from stepscope.rules import _live

    t0 = 1_760_000_000.0
    store = live_job(tmp_path / "j", [], t0)
    rules = build_rules([{"name": "StepOutlier"}])
    runner = Runner(stepscope.open(str(tmp_path / "j")), rules, clock=lambda: t0 + 500)
    reader = runner.readers["steps"]
    append_steps(store, 0, 100, t0 + 1)
    runner.try_scan()
    append_steps(store, 100, 100, t0 + 30)  # two new segments, then a read that fails
    append_steps(store, 200, 100, t0 + 60)
    real = _live.read_segments

    def rewritten(*args: Any, **kw: Any) -> Any:
        raise duckdb.Error("TProtocolException: Invalid data")

    monkeypatch.setattr(_live, "read_segments", rewritten)
    runner.try_scan()  # recorded, not raised
    (fault,) = store.list("faults", suffix=".json")
    doc = store.read_json(fault)
    assert doc["component"] == "rules-scan" and "Invalid data" in doc["error"]
    monkeypatch.setattr(_live, "read_segments", real)
    runner.try_scan()
    assert reader.rows_read == 300  # the rows of the failed scan were read again
