"""The live runner's cadence: a steady short period, stretched only for costly scans;
incremental reads of rewritten segments; a live finding before the job ends."""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import rules_data as rd
import stepscope
from conftest import BIN, SCRIPTS, env_for_tests
from stepscope.jobfolder import STEPS_SCHEMA
from stepscope.rules import Status, _live, build_rules
from stepscope.rules._schedule import CPU_SHARE, next_delay
from stepscope.rules.runner import POLL_S, Runner
from stepscope.store import SegmentWriter
from test_rules_runner import append_steps, live_job

T0 = rd.T0


def test_the_delay_is_the_period_unless_scans_would_take_more_than_their_share() -> None:
    period, budget = 2.0, CPU_SHARE  # of one core, on a node of any size
    for cost in (0.0, 0.005, 0.02, 0.05, 0.2, 1.0, 5.0):
        delay = next_delay(period, cost)
        assert delay >= period
        assert cost / delay <= budget * (1 + 1e-9)  # never more than the share
        if cost <= budget * period:
            assert delay == period  # a cheap scan keeps the period
        else:
            assert delay == pytest.approx(cost / budget)  # no longer than the share needs


def test_a_negative_cost_is_no_cost() -> None:
    assert next_delay(2.0, -0.5) == 2.0  # a CPU clock read out of order


def cadence(
    tmp_path: Path,
    costs: dict[int, float],
    minutes: float,
    startup_cpu: float = 0.0,
    rule: dict[str, Any] | None = None,
) -> list[float]:
    """The job ages at which ``Runner.run`` scans, on a fake clock; scan i costs costs[i];
    the runner's process cost ``startup_cpu`` before ``run()``."""
    rules = [rule or {"name": "StepOutlier"}]
    store = live_job(tmp_path / "j", rules, T0)
    now, cpu, ages = [T0], [0.0], []
    runner = Runner(stepscope.open(str(store.root)), build_rules(rules), clock=lambda: now[0])
    runner.startup_cpu = startup_cpu

    def scan() -> list[object]:
        ages.append(now[0] - T0)
        cpu[0] += costs.get(len(ages) - 1, 0.01)
        return []

    def sleep(s: float) -> None:
        assert 0 <= s <= POLL_S  # the job's end is looked for at least every POLL_S
        now[0] += max(s, 1e-3)

    runner.scan, runner.sleep, runner.cpu = scan, sleep, lambda: cpu[0]  # type: ignore[method-assign]
    runner.job_over = lambda parent: now[0] - T0 >= minutes * 60  # type: ignore[method-assign]
    runner.final = lambda: []  # type: ignore[method-assign]
    runner.run(None)
    return ages


def test_scans_follow_the_period_from_the_start_at_any_age(tmp_path: Path) -> None:
    ages = cadence(tmp_path, {}, minutes=60)
    period = 2.0  # scan_interval_us's default
    assert ages[0] == pytest.approx(period, abs=1e-2)  # no long wait for a first scan
    gaps = [b - a for a, b in itertools.pairwise(ages)]
    assert len(ages) > 60 * 60 / period * 0.95
    assert max(gaps) <= period + 1e-2 and min(gaps) >= period - 1e-2  # steady, no back-off


def test_a_costly_scan_stretches_the_next_delay_only(tmp_path: Path) -> None:
    ages = cadence(tmp_path, {10: 0.2, 11: 0.01}, minutes=2)  # scan 10: 0.2 s of CPU
    gaps = [b - a for a, b in itertools.pairwise(ages)]
    assert gaps[10] == pytest.approx(0.2 / CPU_SHARE, abs=0.01)  # 1% of a core: 20 s
    assert gaps[9] == pytest.approx(2.0, abs=0.01) and gaps[11] == pytest.approx(2.0, abs=0.01)


def test_the_first_scan_waits_until_the_start_up_is_paid_back(tmp_path: Path) -> None:
    """The runner's imports (0.4 s of CPU here) count like a costly scan: at 1% of a
    core the first scan comes 40 s on, then the period resumes."""
    ages = cadence(tmp_path, {}, minutes=2, startup_cpu=0.4)
    assert ages[0] == pytest.approx(0.4 / CPU_SHARE, abs=0.01)
    assert ages[1] - ages[0] == pytest.approx(2.0, abs=0.01)


@pytest.mark.parametrize(
    "rule",
    [
        {"name": "StepOutlier", "actions": ["stop"]},
        {"name": "StepOutlier", "parameters": {"scan_interval_us": 1_000_000}},
    ],
)
def test_a_job_that_asked_for_live_verdicts_is_scanned_from_the_start(
    tmp_path: Path, rule: dict[str, Any]
) -> None:
    """An action, or a shorter ``scan_interval_us`` than the default: no wait."""
    period = 2.0 if "actions" in rule else 1.0
    ages = cadence(tmp_path, {}, minutes=1, startup_cpu=0.4, rule=rule)
    assert ages[0] == pytest.approx(period, abs=0.01)


def test_a_rewritten_segment_is_read_again_and_an_unchanged_one_not(tmp_path: Path) -> None:
    """The writers rewrite their current segment at every flush: a scan reads the new
    rows of a rewritten segment once, and skips a segment that did not change."""
    store = live_job(tmp_path / "j", [], T0)
    runner = Runner(stepscope.open(str(tmp_path / "j")), build_rules([{"name": "StepOutlier"}]),
                    clock=lambda: T0 + 100)  # fmt: skip
    reader = runner.readers["steps"]
    writer = SegmentWriter(store, "steps/rank-0", clock=lambda: T0 + 1)
    for first in (0, 50, 100):
        frame = rd.steps_frame(50, start=T0 + 1 + first * 0.2)
        frame["step"] += first
        writer.append(pa.RecordBatch.from_pandas(frame, schema=STEPS_SCHEMA, preserve_index=False))
        writer.flush()  # the same segment, rewritten with every row so far
        rows, files = reader.rows_read, reader.files_read
        runner.scan()
        assert (reader.rows_read - rows, reader.files_read - files) == (50, 1)
        rows, files = reader.rows_read, reader.files_read
        runner.scan()  # nothing flushed since
        assert (reader.rows_read - rows, reader.files_read - files) == (0, 0)
    assert len(store.list("steps/rank-0", suffix=".parquet")) == 1
    (res,) = runner.scan()
    assert res.datapoints == 140  # 150 steps less the 10 skipped, each once


def test_new_steps_after_a_quiet_scan_are_read(tmp_path: Path) -> None:
    store = live_job(tmp_path / "j", [], T0)
    runner = Runner(stepscope.open(str(tmp_path / "j")), build_rules([{"name": "StepOutlier"}]),
                    clock=lambda: T0 + 100)  # fmt: skip
    append_steps(store, 0, 100, T0 + 1)
    runner.scan()
    runner.scan()
    append_steps(store, 100, 100, T0 + 21, stall=150)
    (res,) = runner.scan()
    assert res.datapoints == 190 and [f.steps for f in res.findings] == [(150, 150)]


def test_a_read_racing_a_flush_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment replaced while DuckDB reads it fails the query once; the runner (it
    died of it before, scanning every 2 s) reads again and loses nothing."""
    store = live_job(tmp_path / "j", [], T0)
    runner = Runner(stepscope.open(str(tmp_path / "j")), build_rules([{"name": "StepOutlier"}]),
                    clock=lambda: T0 + 100)  # fmt: skip
    append_steps(store, 0, 100, T0 + 1, stall=50)
    real, calls = _live.read_segments, []

    def racing(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise duckdb.Error("TProtocolException: Exceeded size limit")
        return real(*args, **kw)

    monkeypatch.setattr(_live, "read_segments", racing)
    (res,) = runner.scan()
    assert res.datapoints == 90 and [f.steps for f in res.findings] == [(50, 50)]
    monkeypatch.setattr(_live, "read_segments", lambda *a, **k: (_ for _ in ()).throw(
        duckdb.Error("broken")))  # fmt: skip
    append_steps(store, 100, 10, T0 + 30)
    with pytest.raises(duckdb.Error):
        runner.scan()  # a file that stays unreadable is an error, not a silent gap


# min_cost_share = 100: the count alone decides (a 3 s stall in this short job costs
# well over 5% of its step time, and would fire on cost: test_rules_cost.py).
# A scan_interval_us below the default asks for live verdicts from the start (without
# it, the first scan waits until the runner's start-up is paid back: 30-50 s).
CONFIG = (
    '[[rules]]\nname = "StepOutlier"\n'
    "parameters = { n_outliers = 3, min_excess_s = 1.0, min_cost_share = 100, "
    "scan_interval_us = 1_000_000 }\n"
)


@pytest.mark.process
@pytest.mark.parametrize("stall", [True, False])
def test_a_live_job_shows_its_finding_in_progress_before_it_ends(
    tmp_path: Path, stall: bool
) -> None:
    """One stall, three tolerated: the rule's running verdict stays NoIssuesFound, but
    the finding is listed while the job runs (its silent twin lists none)."""
    config = tmp_path / "stepscope.toml"
    config.write_text(CONFIG)
    script = [str(SCRIPTS / "mlp.py"), "--steps", "60", "--sleep-after", "12"]
    if stall:
        script += ["--stall-at", "40", "--stall-s", "3"]
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp_path), "--job", "job",
           "--config", str(config), "--", str(BIN / "python"), *script]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env_for_tests(), stdout=subprocess.DEVNULL)
    rule, seen = tmp_path / "job" / "rules" / "StepOutlier.json", []
    try:
        while proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):  # not written yet
                seen.append(json.loads(rule.read_text()))
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.wait() == 0
    live = [v for v in seen if v["status"] == "InProgress" and v["datapoints"] > 0]
    assert live, "no running verdict with data while the job ran"
    found = [v for v in live if v["findings"]]
    if stall:
        assert found and [f["steps"] for f in found[0]["findings"]] == [[40, 40]]
        assert found[0]["verdict"] == "NoIssuesFound"  # 1 outlier, 3 tolerated
    else:
        assert not found
    final = json.loads(rule.read_text())
    assert final["status"] == "NoIssuesFound" and len(final["findings"]) == int(stall)


def test_a_scan_with_no_new_row_keeps_the_verdicts_and_writes_nothing(tmp_path: Path) -> None:
    """Nothing new: the rules' input is the same, so the last verdicts stand (not judged
    again, not written again); the next new rows are judged as before."""
    store = live_job(tmp_path / "j", [], T0)
    runner = Runner(stepscope.open(str(tmp_path / "j")), build_rules([{"name": "StepOutlier"}]),
                    clock=lambda: T0 + 100)  # fmt: skip
    append_steps(store, 0, 100, T0 + 1)
    (first,) = runner.scan()
    assert first.datapoints == 90 and not first.findings
    written = (tmp_path / "j" / "rules" / "StepOutlier.json").stat().st_mtime_ns
    (again,) = runner.scan()
    assert again is first and runner.quiet_scans == 1
    assert (tmp_path / "j" / "rules" / "StepOutlier.json").stat().st_mtime_ns == written
    append_steps(store, 100, 100, T0 + 21, stall=150)
    (res,) = runner.scan()
    assert runner.quiet_scans == 1 and res.datapoints == 190
    assert [f.steps for f in res.findings] == [(150, 150)]


@pytest.mark.parametrize("waited", [40.0, 10.0])
def test_a_rule_that_reads_the_clock_is_judged_at_every_scan(tmp_path: Path, waited: float) -> None:
    """StalledTrainingRule fires on time alone (no step for ``threshold`` s): the scans
    that read nothing new still judge it with their "now"; its silent twin waits less."""
    entries = [{"name": "StepOutlier"}, {"name": "StalledTrainingRule",
                                          "parameters": {"threshold": 30}}]  # fmt: skip
    store = live_job(tmp_path / "j", entries, T0)
    now = [T0 + 25.0]
    runner = Runner(stepscope.open(str(tmp_path / "j")), build_rules(entries),
                    clock=lambda: now[0])  # fmt: skip
    append_steps(store, 0, 100, T0 + 1)  # the last step ends about 21 s into the job
    outlier, stalled = runner.scan()
    assert stalled.verdict is Status.NO_ISSUES_FOUND and stalled.datapoints > 0
    now[0] += waited
    kept, judged = runner.scan()
    assert runner.quiet_scans == 1 and kept is outlier and judged is not stalled
    assert judged.datapoints == stalled.datapoints
    fired = judged.verdict is Status.ISSUES_FOUND
    assert fired == (waited > 30.0)
    written = json.loads((tmp_path / "j" / "rules" / "StalledTrainingRule.json").read_text())
    assert written["verdict"] == judged.verdict.value
