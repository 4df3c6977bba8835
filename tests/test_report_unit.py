"""The report without a browser: escaping, where it is written, edge cases, the CLI glue."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.report_data import histogram, rank_rules
from stepscope.cli import main
from stepscope.cli._report import ProgressBar, write_with_progress
from stepscope.report import render_report, write_report
from stepscope.report._html import script_json
from stepscope.store import open_store
from stepscope.testing import SyntheticJob, write_synthetic_job
from stepscope.webcharts import script_text, style_text

SMALL = SyntheticJob(hours=0.01)


def test_script_json_cannot_end_its_script_element() -> None:
    value = {"name": "</script><script>alert(1)</script>", "c": "<!-- & \u2028"}
    text = script_json(value)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == value


def test_chart_layer_is_inlinable() -> None:
    js = script_text()
    assert "var uPlot" in js and "StepscopeCharts" in js and "</script" not in js.lower()
    assert ".sc-chart" in style_text() and ".uplot" in style_text()


def test_report_is_self_contained(tmp_path: Path) -> None:
    write_synthetic_job(str(tmp_path), SMALL)
    html = render_report(stepscope.open(tmp_path))
    assert not any(s in html for s in ('src="http', 'href="http', "@import", "url(http"))
    assert "@media print" in html and 'id="stepscope-data"' in html


def test_write_report_default_and_explicit_paths(tmp_path: Path) -> None:
    write_synthetic_job(str(tmp_path / "job"), SMALL)
    job = stepscope.open(tmp_path / "job")
    stages: list[str] = []
    default = write_report(job, progress=lambda stage, f: stages.append(stage))
    assert (
        default == str(tmp_path / "job" / "report.html") and Path(default).stat().st_size > 50_000
    )
    assert stages[0] == "reading" and stages[-1] == "done"
    explicit = write_report(job, str(tmp_path / "elsewhere" / "r.html"))
    assert Path(explicit).read_text().startswith("<!doctype html>")
    assert not list((tmp_path / "elsewhere").glob("*.tmp-*"))


def test_write_report_through_a_memory_store() -> None:
    url = f"memory://report-test-{time.time_ns()}/job"
    write_synthetic_job(url, SMALL)
    path = write_report(stepscope.open(url))
    assert path == f"{url}/report.html"
    assert open_store(url).read_bytes("report.html").startswith(b"<!doctype html>")


def test_empty_running_job_renders(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    now = time.time()
    store.write_json(
        "job.json",
        {
            "format_version": 1,
            "name": "empty",
            "status": "Running",
            "start_time": now - 5,
            "command": ["python", "x.py"],
        },
    )
    store.write_json("heartbeat/n.json", {"time": now, "pid": 1, "interval_s": 2})
    html = render_report(stepscope.open(tmp_path))
    assert "still running" in html and "No steps were recorded" in html
    assert "No system metrics were recorded" in html and "No rule results" in html


def test_faults_and_profiles_sections(tmp_path: Path) -> None:
    store = write_synthetic_job(str(tmp_path), SMALL)
    store.write_json(
        "faults/steps-writer-node-a-1.json",
        {
            "component": "steps-writer",
            "node": "node-a",
            "rank": 0,
            "pid": 1,
            "time": 1_763_850_001.0,
            "error": "OSError: <disk> full",
            "count": 3,
        },
    )
    record = {
        "kind": "dataloader",
        "rank": 0,
        "start_step": 3,
        "end_step": 3,
        "summary": {"batches": 2, "wait_total_s": 0.5},
    }
    store.write_json("profiling/rank-0/dataloader-3-3.window.json", record)
    html = render_report(stepscope.open(tmp_path))
    assert 'id="faults"' in html and "OSError: &lt;disk&gt; full" in html
    assert 'id="profiles"' in html and "<td>Batches fetched</td><td>2</td>" in html


def test_rules_ranked_most_severe_first() -> None:
    results = [
        {"rule": "A", "status": "NoIssuesFound"},
        {"rule": "B", "status": "IssuesFound", "triggers": 1, "findings": [{"severity": 0.2}]},
        {"rule": "C", "status": "Error"},
        {"rule": "D", "status": "IssuesFound", "triggers": 1, "findings": [{"severity": 0.9}]},
        {"rule": "E", "status": "NotApplicable"},
        {"rule": "F", "status": "InProgress"},
    ]
    assert [r["rule"] for r in rank_rules(results)] == ["D", "B", "C", "F", "A", "E"]


def test_histogram() -> None:
    values = [1.0] * 100 + [10.0]  # outliers: tests/test_outliers.py
    hist = histogram([*values, float("nan")], bins=10)
    assert sum(hist["counts"]) == 101 and len(hist["edges"]) == 11


def test_report_command_prints_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_synthetic_job(str(tmp_path / "job"), SMALL)
    err = io.StringIO()
    path = write_with_progress(str(tmp_path / "job"), None, stderr=err)
    assert Path(path).exists() and err.getvalue() == ""  # not a terminal: no bar
    assert main(["report", str(tmp_path / "job")]) == 0
    assert capsys.readouterr().out == path + "\n"  # the path, once


def test_report_command_explains_a_missing_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path / "nope")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("stepscope: error: No stepscope job")


def test_progress_bar_shows_after_a_delay_and_erases_itself() -> None:
    ticks = iter([0.0, 0.1, 2.0, 3.0])
    stream = io.StringIO()
    bar = ProgressBar(stream, enabled=True, delay=0.5, clock=lambda: next(ticks))
    bar("reading", 0.0)  # at 0.1 s: too early
    assert stream.getvalue() == ""
    bar("system node-a", 0.5)
    assert "50%" in stream.getvalue() and "system node-a" in stream.getvalue()
    bar.close()
    assert stream.getvalue().endswith("\r")


@pytest.mark.parametrize("enabled", [False])
def test_progress_bar_disabled(enabled: bool) -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, enabled=enabled, delay=0.0)
    bar("x", 0.5)
    bar.close()
    assert stream.getvalue() == ""


def test_rule_list_follows_the_order_of_the_rule_sections(tmp_path: Path) -> None:
    rules = [
        {"rule": "AlphaCheck", "status": "NoIssuesFound", "findings": []},
        {"rule": "ZuluCheck", "status": "IssuesFound", "triggers": 1,
         "findings": [{"message": "slow", "severity": 0.8}]},
    ]  # fmt: skip
    write_synthetic_job(str(tmp_path), SMALL, rules)
    html = render_report(stepscope.open(tmp_path))
    toc = html[html.index('<nav class="toc">') : html.index("</nav>")]
    body = html[html.index("</nav>") :]
    listed = re.findall(r'href="#(rule-[^"]+)"', toc)
    sections = [a for a in re.findall(r'<section id="(rule-[^"]+)"', body) if a in listed]
    assert len(listed) == 2 and listed == sections


def test_table_numbers_are_rounded_to_what_matters(tmp_path: Path) -> None:
    finding = {
        "message": "m",
        "severity": 0.5,
        "value": 4.2359938621521,
        "threshold": 0.30000000000000004,
    }
    rules = [
        {"rule": "StepOutlier", "status": "IssuesFound", "triggers": 1, "findings": [finding],
         "parameters": {"stddev": 4.999999999, "window": 100}},
    ]  # fmt: skip
    write_synthetic_job(str(tmp_path), SMALL, rules)
    html = render_report(stepscope.open(tmp_path))
    assert "4.2359938621521" not in html.split('id="stepscope-data"')[0]
    assert "<td>4.24</td><td>0.3</td>" in html
    assert "stddev=5, window=100" in html
