"""The HTML report rendered in headless Chromium: drawn, offline, faithful to the data, escaped."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stepscope
from conftest import CHROMIUM
from stepscope.analysis.report_data import per_step, split_totals
from stepscope.report import write_report
from stepscope.testing import SyntheticJob, write_synthetic_job

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
SCRIPTS = Path(__file__).parent / "scripts"

pytestmark = [
    pytest.mark.process,  # Chromium
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]

FINDINGS_RULES = [
    {
        "rule": "LowGPUUtilization",
        "status": "IssuesFound",
        "triggers": 2,
        "datapoints": 1400,
        "message": "GPU 0 was idle for 40 s",
        "recommendation": "Increase the batch size.",
        "parameters": {"threshold_p95": 70, "window": 500},
        "description": "Checks GPU utilization.",
        "updated": 1_763_850_300.0,
        "findings": [
            {
                "message": "GPU 0 below 10 % for 40 s",
                "recommendation": "Check the data loader.",
                "severity": 0.9,
                "node": "node-a",
                "device": "gpu0",
                "rank": None,
                "start": 1_763_850_100.0,
                "end": 1_763_850_140.0,
                "steps": [200, 300],
                "value": 4.0,
                "threshold": 10.0,
            },
            {
                "message": "GPU 1 below 10 % for 5 s",
                "recommendation": "",
                "severity": 0.3,
                "node": "node-a",
                "device": "gpu1",
                "rank": None,
                "start": 1_763_850_200.0,
                "end": 1_763_850_205.0,
                "steps": [400, 410],
                "value": 8.0,
                "threshold": 10.0,
            },
        ],
    },
    {
        "rule": "StepOutlier",
        "status": "IssuesFound",
        "triggers": 1,
        "datapoints": 700,
        "message": "1 slow step",
        "recommendation": "Look at what ran at that time.",
        "parameters": {"sigmas": 3},
        "description": "Finds steps much slower than the others.",
        "findings": [
            {
                "message": "step 15 took 2.4 s",
                "severity": 0.5,
                "node": "node-a",
                "rank": 0,
                "start": 1_763_850_060.0,
                "end": 1_763_850_062.4,
                "steps": [15, 15],
                "value": 2.4,
                "threshold": 0.6,
            }
        ],
    },
    {
        "rule": "CPUBottleneck",
        "status": "NoIssuesFound",
        "triggers": 0,
        "datapoints": 1400,
        "message": "",
        "recommendation": "",
        "parameters": {},
        "description": "CPU vs GPU.",
        "findings": [],
    },
    {
        "rule": "Broken",
        "status": "Error",
        "triggers": 0,
        "datapoints": 0,
        "message": "KeyError: 'gpu0_util'",
        "description": "A rule that failed.",
        "findings": [],
    },
]


@dataclass
class Page:
    """What a rendered report showed and did."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    registry: dict[str, Any] = field(default_factory=dict)
    specs: dict[str, Any] = field(default_factory=dict)
    drawn: list[str] = field(default_factory=list)
    chart_ids: list[str] = field(default_factory=list)
    text: str = ""
    pwned: Any = None
    alts: dict[str, str] = field(default_factory=dict)


def render(browser: Any, report: str, shot: str) -> Page:
    """Open the report file, wait for its charts, and collect what happened."""
    out = Page()
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.on(
        "console", lambda m: out.errors.append(m.text) if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: out.errors.append(str(e)))
    page.on("request", lambda r: out.requests.append(r.url))
    page.on("requestfailed", lambda r: out.failed.append(r.url))
    page.goto(Path(report).as_uri())
    page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=30_000)
    out.registry = page.evaluate("StepscopeCharts.registry")
    out.specs = json.loads(page.eval_on_selector("#stepscope-data", "e => e.textContent"))["charts"]
    out.chart_ids = page.eval_on_selector_all("[data-chart]", "es => es.map(e => e.dataset.chart)")
    out.drawn = page.eval_on_selector_all("[data-drawn='1']", "es => es.map(e => e.dataset.chart)")
    out.alts = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('[data-chart]')].map((e) => "
        "[e.dataset.chart, e.querySelector('[role=img]')?.getAttribute('aria-label') || '']))"
    )
    out.text = page.inner_text("body")
    out.pwned = page.evaluate("window.__pwned")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    page.close()
    return out


def assert_clean(page: Page, report: str) -> None:
    """No console error, no failed request, no request but the file itself; every chart drawn."""
    assert page.errors == []
    assert page.failed == []
    assert [
        u for u in page.requests if u != Path(report).as_uri() and not u.startswith("data:")
    ] == []
    assert page.chart_ids and sorted(page.drawn) == sorted(page.chart_ids)
    for cid in page.chart_ids:
        assert page.registry[cid]["drawn"] and page.registry[cid]["points"] > 0, cid
        # a text alternative: the chart's title, then what it shows
        assert page.alts[cid].startswith(page.specs[cid]["title"] + ": "), (cid, page.alts[cid])


def close(a: float | None, b: float, digits: int = 4) -> bool:
    """Equal up to the report's rounding (4 significant digits of the series' largest value)."""
    return a is not None and math.isclose(a, b, rel_tol=10 ** (1 - digits), abs_tol=1e-9)


def check_system_charts(page: Page, job: Any) -> int:
    """Each system time series holds the exact extremes of the columns it shows."""
    checked = 0
    for cid, spec in page.specs.items():
        if spec["kind"] != "timeseries" or "node" not in spec:
            continue
        raw = job.system(nodes=[spec["node"]])
        series = page.registry[cid]["series"]
        for metric, s in zip(spec["metrics"], series, strict=False):
            if metric not in raw:
                continue
            col = raw[metric].dropna().to_numpy(np.float64)
            top = max(abs(col.max()), abs(col.min()))
            assert math.isclose(s["max"], col.max(), abs_tol=top * 1e-3), (spec["title"], metric)
            assert math.isclose(s["min"], col.min(), abs_tol=top * 1e-3), (spec["title"], metric)
            checked += 1
    return checked


def check_step_charts(page: Page, job: Any) -> None:
    steps = job.steps()
    for cid, spec in page.specs.items():
        if "phase" not in spec or "rule" in spec:
            continue
        agg = per_step(steps[steps["phase"] == spec["phase"]])
        reg = page.registry[cid]
        if spec["kind"] == "histogram":
            assert reg["total"] == len(agg)
        elif spec["kind"] == "timeseries":
            assert close(reg["series"][0]["max"], float(agg["duration"].max()))
            assert close(reg["series"][0]["min"], float(agg["duration"].min()))
        elif spec["kind"] == "stacked":
            assert [s["label"] for s in reg["series"]][:2] == ["data_wait", "forward"]
    shares = [c for c, s in page.specs.items() if s["kind"] == "share"]
    train_total = sum(split_totals(steps[steps["phase"] == "train"]).values())
    assert close(page.registry[shares[0]]["total"], train_total, digits=3)


def test_healthy_report_draws_every_chart_from_the_jobs_data(tmp_path: Path, browser: Any) -> None:
    spec = SyntheticJob(name="healthy", hours=0.1, cores=16, gpus=4, ranks_per_node=2)
    write_synthetic_job(str(tmp_path / "job"), spec)
    job = stepscope.open(tmp_path / "job")
    report = write_report(job)
    assert report == str(tmp_path / "job" / "report.html")
    page = render(browser, report, "report-healthy.png")
    assert_clean(page, report)
    assert check_system_charts(page, job) >= 4 * 3 + 6  # GPU util, memory, power; cpu, disk, net
    check_step_charts(page, job)
    heat = [page.registry[c] for c, s in page.specs.items() if s["kind"] == "heatmap"]
    assert sorted(h["rows"] for h in heat) == [4, 16]
    cpu = next(c for c, s in page.specs.items() if s["title"].startswith("CPU utilization"))
    assert page.registry[cpu]["series"][0]["max"] == 100  # the one-sample spike survives
    assert "No rule results in this job" in page.text
    assert "Initialization: 12 s" in page.text


def test_report_with_findings(tmp_path: Path, browser: Any) -> None:
    spec = SyntheticJob(name="findings", hours=0.1, gpus=2)
    write_synthetic_job(str(tmp_path / "job"), spec, rules=FINDINGS_RULES)
    report = write_report(stepscope.open(tmp_path / "job"), str(tmp_path / "out" / "r.html"))
    page = render(browser, report, "report-findings.png")
    assert_clean(page, report)
    order = re.findall(r"^(LowGPUUtilization|StepOutlier|Broken|CPUBottleneck)\t", page.text, re.M)
    assert order == ["LowGPUUtilization", "StepOutlier"]  # the rules that fired show
    folded = Path(report).read_text().split('class="rules-more"')[1].split("</details>")[0]
    assert re.findall(r">(\w+)</a>", folded) == ["Broken", "CPUBottleneck"]  # the rest, folded
    evidence = {s["rule"]: (c, s) for c, s in page.specs.items() if "rule" in s}
    assert set(evidence) == {"LowGPUUtilization", "StepOutlier"}
    cid, gpu = evidence["LowGPUUtilization"]
    assert gpu["metrics"] == ["gpu0_util", "gpu1_util"] and len(gpu["bands"]) == 2
    assert gpu["bands"][0]["start"] == pytest.approx(1_763_850_100.0 - gpu["t0"])
    assert page.registry[cid]["series"][0]["max"] > 50
    assert "GPU 0 below 10 % for 40 s" in page.text and "threshold_p95=70" in page.text


def test_user_strings_are_escaped(tmp_path: Path, browser: Any) -> None:
    evil = "<script>window.__pwned=1</script>"
    host = '<img src=x onerror="window.__pwned=2">'
    spec = SyntheticJob(
        name=evil,
        hours=0.02,
        nodes=(host,),
        command=("python", "train.py", "--tag", "</script><b>bold</b>"),
    )
    rule = {
        "rule": "Evil</script>",
        "status": "IssuesFound",
        "triggers": 1,
        "datapoints": 1,
        "message": evil,
        "description": host,
        "findings": [
            {
                "message": evil,
                "severity": 1.0,
                "node": host,
                "start": 1_763_850_020.0,
                "end": 1_763_850_030.0,
            }
        ],
    }
    store = write_synthetic_job(str(tmp_path / "job"), spec)
    store.write_json("rules/Evil.json", rule)
    report = write_report(stepscope.open(tmp_path / "job"))
    page = render(browser, report, "report-escaping.png")
    assert page.pwned is None
    assert_clean(page, report)  # the <img src=x> would have been a failed request
    assert evil in page.text and host in page.text and "</script><b>bold</b>" in page.text
    assert "Evil</script>" in page.text
    html = Path(report).read_text()
    assert html.count("<script") == 3  # data, chart layer, report: nothing injected


def test_report_of_a_real_job(run_job: Any, browser: Any) -> None:
    run = run_job([str(SCRIPTS / "mlp.py"), "--steps", "40", "--eval-every", "10"], "--no-rules")
    assert run.code == 0, run.stderr
    job = stepscope.open(run.job_path)
    report = write_report(job)
    page = render(browser, report, "report-real-job.png")
    assert_clean(page, report)
    assert check_system_charts(page, job) >= 3
    dur = next(c for c, s in page.specs.items() if s["title"] == "train step duration")
    assert page.registry[dur]["series"][0]["n"] == 40
