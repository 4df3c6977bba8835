"""The job page, in the report and in the dashboard (issue 32): the diagnosis, then the
charts, then the rules that fired; one time axis for every time chart; warm-up steps
above the step chart's y-range, marked; one rounding of a percentage; legends in words.

Checked in Chromium at 1400x900 on a real GPU job recorded on an H200 (tests/data/h200/
loader: its host starves the GPU, its first step is a 0.26 s warm-up over a 32 ms pace),
judged by today's rules. Screenshots: test-artifacts/job-page-{report,dashboard}*.png.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import stepscope
from conftest import CHROMIUM
from h200_jobs import h200_job
from stepscope.cli import main
from stepscope.report import write_report
from ui_pages import new_page, serving

pytestmark = [
    pytest.mark.process,  # Chromium, and `stepscope ui`
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
WAIT_MS = 60_000
FOLD = 900  # the viewport's height: what a user sees without scrolling

# Every text drawn on a canvas, recorded before the page's scripts run.
SPY = """window.__texts = [];
const fill = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (t, x, y) {
  window.__texts.push(String(t));
  return fill.apply(this, arguments);
};"""

# The time charts on the page (uPlot, x in unix seconds): their element's data-chart and range.
TIME_RANGES = """() => [...StepscopeCharts.timeGroup.plots].filter((u) => u.root.isConnected)
  .map((u) => [u.root.parentElement.dataset.chart, u.scales.x.min, u.scales.x.max])"""

# A raw name in a legend: a rule's parameter, or a symbol for one, or a metric's column
# (the step's parts keep their names, data_wait included: show, rules and docs use them).
RAW = re.compile(
    r"stddev|\u03c3|min_excess|threshold|\bgpu\d+_|\bproc_|_pct\b|_util\b|mem_percent|cpu_iowait"
)


@pytest.fixture(scope="module")
def loader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the loader job, judged by today's rules, with its report written."""
    job = h200_job(tmp_path_factory.mktemp("h200"), "loader")
    assert main(["rules", str(job), "--save"]) == 0  # verdicts of this version's rules
    write_report(stepscope.open(job))
    return job


@pytest.fixture
def ui(loader: Path) -> Iterator[str]:
    """The base URL of a real `stepscope ui` over the loader job's folder."""
    with serving(loader.parent) as url:
        yield url


def open_page(browser: Any, url: str) -> tuple[Any, list[str]]:
    page, errors = new_page(browser, 1400, FOLD, init_script=SPY)
    page.goto(url)
    return page, errors


def top(page: Any, selector: str) -> float:
    return float(page.eval_on_selector(selector, "e => e.getBoundingClientRect().top"))


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"job-page-{name}.png"))  # the 1400x900 viewport


def first_chart(page: Any) -> tuple[str, float]:
    """The first chart drawn on the page, top to bottom: its title and its top."""
    return tuple(
        page.evaluate("""() => {
      const el = [...document.querySelectorAll('[data-chart][data-drawn="1"]')]
        .filter((e) => e.getBoundingClientRect().height > 0)[0];
      return [el.querySelector(".u-title, .sc-title").textContent, el.getBoundingClientRect().top];
    }""")
    )


def check_zoom_follows(page: Any, chart: str) -> None:
    """Drag across the middle of ``chart``: every time chart shows the new range."""
    before = dict((c, (lo, hi)) for c, lo, hi in page.evaluate(TIME_RANGES))
    assert len(before) >= 3 and len(set(before.values())) == 1, before  # one time axis
    box = page.locator(f'[data-chart="{chart}"] .u-over').bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.55, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.7, y, steps=5)
    page.mouse.move(box["x"] + box["width"] * 0.8, y, steps=5)
    page.mouse.up()
    after = dict((c, (lo, hi)) for c, lo, hi in page.evaluate(TIME_RANGES))
    lo, hi = after[chart]
    old_lo, old_hi = before[chart]
    assert old_lo < lo < hi < old_hi, (before[chart], after[chart])  # it zoomed
    assert all(r == pytest.approx((lo, hi), abs=1e-6) for r in after.values()), after
    # the heatmaps (canvases of their own) paint the same range
    assert page.evaluate("StepscopeCharts.timeGroup.view") == pytest.approx([lo, hi], abs=1e-6)


def check_legends(page: Any) -> None:
    legends = page.eval_on_selector_all(
        ".u-legend .u-label, .sc-share-legend span", "els => els.map((e) => e.textContent)"
    )
    assert any("outlier limit" in t for t in legends)
    assert [t for t in legends if RAW.search(t)] == []


def check_warmup_off_scale(page: Any, chart: str, split: str) -> None:
    """The warm-up step (step 0, 0.26 s) is above the y-range of the step charts over
    time (the duration and its split), and a marker says so."""
    reg = page.evaluate(f"StepscopeCharts.registry[{chart!r}]")
    assert reg["offScale"] == [0]
    assert page.evaluate(f"StepscopeCharts.registry[{split!r}]")["yMax"] == reg["yMax"]
    duration = next(s for s in reg["series"] if s["label"] == "duration")
    assert duration["max"] > 0.2 > reg["yMax"] > 0.032  # the pace (32 ms) fills the chart
    drawn = page.evaluate("window.__texts")
    assert any(t.startswith("step 0: 264 ms") and "off scale" in t for t in drawn), drawn


def shares(text: str) -> dict[str, str]:
    """``forward 29.0% ...`` -> {"forward": "29.0%"}: each part's printed percentage."""
    return dict(re.findall(r"(forward|backward|optimizer|data_wait|other)[^\n%]*?(\d+\.\d%)", text))


def test_the_report_opens_with_the_diagnosis_then_the_charts(loader: Path, browser: Any) -> None:
    page, errors = open_page(browser, (loader / "report.html").as_uri())
    page.wait_for_selector("html[data-ready='1']", timeout=WAIT_MS)
    # the diagnosis first, a step chart above the fold, the rules under the charts
    title, chart_top = first_chart(page)
    assert title == "train step duration" and chart_top < FOLD
    assert top(page, "#diagnosis") < chart_top < top(page, "#rules")
    assert top(page, "#steps") < top(page, "#system") < top(page, "#rules")
    shot(page, "report")
    # the rules that fired, the others folded until asked for
    rows = page.locator("#rules table.rules tbody tr")
    visible = [r.inner_text() for r in rows.all() if r.is_visible()]
    assert len(visible) == 3 and all("IssuesFound" in r for r in visible), visible
    page.click("#rules details.rules-more summary")
    assert sum(r.is_visible() for r in rows.all()) == len(rows.all()) > 3
    # the device split: the bar's legend, the line above it and the split's table agree
    device_bar = shares(page.inner_text('[data-chart="c1"] .sc-share-legend'))
    assert set(device_bar) == {"forward", "backward", "optimizer"}
    assert device_bar == shares(page.inner_text("#steps-train .device-line"))
    split_bar = shares(page.inner_text('[data-chart="c4"] .sc-share-legend'))
    table = page.locator("#steps-train table.split").inner_text()
    assert split_bar and split_bar == shares(table.replace("\t", " "))
    check_legends(page)
    check_warmup_off_scale(page, "c0", "c3")
    page.locator('[data-chart="c0"]').scroll_into_view_if_needed()
    check_zoom_follows(page, "c0")
    shot(page, "report-zoomed")
    assert errors == []


def test_the_dashboard_opens_with_the_diagnosis_then_the_charts(ui: str, browser: Any) -> None:
    page, errors = open_page(browser, ui + "#/job/loader")
    page.wait_for_selector("#diagnosis li.diag-entry", timeout=WAIT_MS)
    for chart in ("step_duration", "step_device", "gpu_util", "cpu"):
        page.wait_for_selector(f'[data-chart="{chart}"][data-drawn="1"]', timeout=WAIT_MS)
    title, chart_top = first_chart(page)
    assert title == "Step duration" and chart_top < FOLD
    assert top(page, "#diagnosis-panel") < chart_top < top(page, "#rules-panel")
    # the device's split beside the step time, then GPU, then CPU
    tops = [top(page, f'[data-chart="{c}"]') for c in ("step_device", "gpu_util", "cpu")]
    assert chart_top <= tops[0] < tops[1] < tops[2]
    shot(page, "dashboard")
    # the rules that fired, the others folded until asked for
    page.wait_for_selector("tr.rule.IssuesFound", timeout=WAIT_MS)
    rows = page.locator("#rules tr.rule")
    assert [r.is_visible() for r in rows.all()].count(True) == 3
    assert all("IssuesFound" in r.inner_text() for r in rows.all() if r.is_visible())
    n = len(rows.all())  # every rule the job was judged by: the built-in set grows
    assert n > 3 and page.inner_text("#rules-all") == f"Show all {n} rules ({n - 3} more)"
    page.click("#rules-all")
    assert sum(r.is_visible() for r in rows.all()) == n
    page.click("#rules-all")
    assert sum(r.is_visible() for r in rows.all()) == 3
    # the device split: the bar's legend and the line above it print the same percentages
    bar = shares(page.inner_text('[data-chart="step_device"] .sc-share-legend'))
    assert set(bar) == {"forward", "backward", "optimizer"}
    assert bar == shares(page.inner_text("#device-text"))
    check_legends(page)
    check_warmup_off_scale(page, "step_duration", "step_split")
    page.uncheck("#live")  # the polls would redraw nothing here (the job ended), but stop them
    check_zoom_follows(page, "step_duration")
    shot(page, "dashboard-zoomed")
    assert errors == []
