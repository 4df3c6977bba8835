"""The dashboard in a real browser (Debian's chromium via Playwright) against real servers.

``stepscope ui`` runs in a subprocess on an ephemeral port of 127.0.0.1; the
main test watches a real ``stepscope run`` of tests/scripts/mlp.py and drives
every control through the page. Screenshots go to test-artifacts/dashboard-*.png.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests
from stepscope.testing import SyntheticJob, write_synthetic_job

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
WAIT_MS = 60_000
pytestmark = pytest.mark.process


class Procs:
    """Child processes of one test, ended (and reaped) however the test ends."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, cmd: list[str]) -> subprocess.Popen[str]:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env_for_tests())  # fmt: skip
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()


@pytest.fixture
def procs() -> Iterator[Procs]:
    ps = Procs()
    yield ps
    ps.close()


def serve(procs: Procs, root: Path) -> str:
    p = procs.start([str(BIN / "stepscope"), "ui", str(root), "--port", "0"])
    assert p.stdout is not None
    line = p.stdout.readline()
    assert "serving" in line, line
    return line.split(" at ", 1)[1].strip()


def wait_for(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def points(page: Any, chart: str) -> int:
    return int(page.get_attribute(f'[data-chart="{chart}"]', "data-points") or 0)


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"), full_page=True)


def test_live_job_in_the_browser(tmp_path: Path, browser: Any, procs: Procs) -> None:
    run = procs.start([str(BIN / "stepscope"), "run", "-o", str(tmp_path), "--job", "live-job",
                       "--interval-ms", "500", "--", sys.executable, str(SCRIPTS / "mlp.py"),
                       "--steps", "100000", "--step-sleep", "0.05"])  # fmt: skip
    job_dir = tmp_path / "live-job"
    wait_for(lambda: any(job_dir.glob("system/*/part-*.parquet")), "the first system samples")
    url = serve(procs, tmp_path)
    page = browser.new_page(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: d.accept())
    page.goto(url)
    assert "token=" not in page.url  # taken out of the address bar, kept for the session
    page.wait_for_selector('tr[data-job="live-job"] .status.Running', timeout=WAIT_MS)
    shot(page, "jobs")

    page.click('tr[data-job="live-job"] a')
    page.wait_for_selector('[data-chart="cpu"][data-drawn="1"]', timeout=WAIT_MS)
    page.wait_for_selector('[data-chart="step_duration"][data-drawn="1"]', timeout=WAIT_MS)
    cpu, step = points(page, "cpu"), points(page, "step_duration")
    wait_for(lambda: points(page, "cpu") > cpu and points(page, "step_duration") > step,
             "the charts to grow")  # fmt: skip
    # (no wait_for_function here: the page's CSP forbids the eval it needs, as it should)
    shot(page, "job-live")

    page.wait_for_selector('body[data-interval-ms="500"]', state="attached", timeout=WAIT_MS)
    assert page.input_value("#interval") == "500"  # the job's interval, not the first choice
    page.click("#interval-apply")  # nothing chosen: nothing asked
    page.wait_for_selector('#interval-status[data-state="unchanged"]', timeout=WAIT_MS)
    assert not list(job_dir.glob("control/config-*.json"))
    page.select_option("#interval", "200")
    page.click("#interval-apply")
    page.wait_for_selector('#interval-status[data-state="accepted"]', timeout=WAIT_MS)
    page.wait_for_selector('body[data-interval-ms="200"]', state="attached", timeout=WAIT_MS)
    latest = stepscope.open(job_dir).system().iloc[-1]
    assert int(latest["interval_ms"]) == 200 and page.input_value("#interval") == "200"

    page.select_option("#p-python", "cprofile")
    page.click("#profile-apply")
    page.wait_for_selector('#profile-status[data-state="accepted"]', timeout=WAIT_MS)
    page.wait_for_selector("#artifacts a.artifact", timeout=WAIT_MS)
    href = page.eval_on_selector("#artifacts a.artifact", "a => a.href")
    assert "/artifacts/profiling/rank-0/python-" in href
    assert page.request.get(href).status == 200
    shot(page, "job-controls")

    with page.expect_download(timeout=WAIT_MS) as download:
        page.click("#report-link")
    saved = ARTIFACTS / "dashboard-report.html"
    download.value.save_as(saved)
    assert saved.read_text().startswith("<!doctype html>")

    page.click("#stop")
    page.wait_for_selector('#stop-status[data-state="accepted"]', timeout=WAIT_MS)
    run.communicate(timeout=60)
    assert stepscope.open(job_dir).status == "Stopped"
    page.wait_for_selector("#job-status.Stopped", timeout=WAIT_MS)
    page.wait_for_selector("tr.rule.InProgress", state="detached", timeout=WAIT_MS)
    shot(page, "job-stopped")
    assert errors == []


HOSTILE = '<img src=x onerror="window.__pwned=1">'


def test_user_strings_are_shown_as_text(tmp_path: Path, browser: Any, procs: Procs) -> None:
    finding = {"message": "slow " + HOSTILE, "severity": 0.9, "start": 1_763_850_100.0,
               "end": 1_763_850_110.0, "node": "node-a", "rank": 0}  # fmt: skip
    rule = {"rule": "StepOutlier", "status": "IssuesFound", "triggers": 1,
            "message": HOSTILE, "findings": [finding]}  # fmt: skip
    store = write_synthetic_job(str(tmp_path / "job-1"), SyntheticJob(name="job-1"), [rule])
    store.write_json("job.json", store.read_json("job.json") | {"reason": HOSTILE})
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(serve(procs, tmp_path) + "#/job/job-1")
    page.wait_for_selector("tr.finding button.jump", timeout=WAIT_MS)
    assert HOSTILE in page.inner_text("#rules") and HOSTILE in page.inner_text("#job-facts")
    page.click("tr.finding button.jump")
    page.wait_for_selector('#range:has-text("StepOutlier")', timeout=WAIT_MS)
    page.wait_for_selector('[data-chart="cpu"][data-drawn="1"]', timeout=WAIT_MS)
    shot(page, "escaping-and-jump")
    assert page.evaluate("window.__pwned") is None
    assert page.query_selector("#rules img") is None


def test_the_job_page_opens_with_the_diagnosis(tmp_path: Path, browser: Any, procs: Procs) -> None:
    finding = {"message": "waited " + HOSTILE, "severity": 0.4, "start": 1_763_850_100.0,
               "end": 1_763_850_110.0, "node": "node-a", "rank": 0}  # fmt: skip
    rules = [
        {"rule": "StepOutlier", "status": "IssuesFound", "triggers": 1, "datapoints": 9,
         "findings": [finding | {"severity": 0.9}]},
        {"rule": "DataLoading", "status": "IssuesFound", "triggers": 1, "datapoints": 9,
         "recommendation": "set num_workers " + HOSTILE, "findings": [finding],
         "cost_seconds": 60.0},
    ]  # fmt: skip
    write_synthetic_job(str(tmp_path / "job-1"), SyntheticJob(name="job-1"), rules)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(serve(procs, tmp_path) + "#/job/job-1")
    page.wait_for_selector("#diagnosis li.diag-entry", timeout=WAIT_MS)
    items = page.query_selector_all("#diagnosis li.diag-entry")
    texts = [i.inner_text() for i in items]
    assert len(texts) == 2 and texts[0].startswith("waiting for data: about 60 s of this")
    assert texts[1].startswith("slow steps (cost unknown)") and HOSTILE in texts[0]
    assert "2 problems found" in page.inner_text("#diagnosis-summary")
    # the first thing after the job's head, then the charts, then the rules
    tops = [page.eval_on_selector(s, "e => e.getBoundingClientRect().top")
            for s in ("#diagnosis-panel", "#charts", "#rules-panel")]  # fmt: skip
    assert tops == sorted(tops)
    page.click("#diagnosis button.evidence")
    page.wait_for_selector('#range:has-text("DataLoading")', timeout=WAIT_MS)
    shot(page, "diagnosis")
    assert page.evaluate("window.__pwned") is None and page.query_selector("#diagnosis img") is None


def test_a_job_opened_while_it_ran_shows_all_of_its_data_once_it_ended(
    tmp_path: Path, browser: Any, procs: Procs
) -> None:
    run = procs.start([str(BIN / "stepscope"), "run", "-o", str(tmp_path), "--job", "ends",
                       "--interval-ms", "500", "--", sys.executable, str(SCRIPTS / "mlp.py"),
                       "--steps", "600", "--step-sleep", "0.02"])  # fmt: skip
    job_dir = tmp_path / "ends"
    wait_for(lambda: any(job_dir.glob("steps/rank-0/part-*.parquet")), "the first steps")
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(serve(procs, tmp_path) + "#/job/ends")
    page.wait_for_selector("#job-status.Running", timeout=WAIT_MS)
    page.wait_for_selector('[data-chart="step_duration"][data-drawn="1"]', timeout=WAIT_MS)
    run.communicate(timeout=120)  # the helpers' last writes are done when it returns
    job = stepscope.open(job_dir)
    assert job.status == "Completed"
    steps, last = len(job.steps(phase="train", ranks=[0])), float(job.system()["time"].max())
    page.wait_for_selector("#job-status.Completed", timeout=WAIT_MS)
    page.wait_for_selector(f'body[data-step-count="{steps}"]', state="attached", timeout=WAIT_MS)
    page.wait_for_selector(f'#job-facts:has-text("· {steps} training steps ·")', timeout=WAIT_MS)
    # a rule with no issue: in the table, folded (only the rules that fired show)
    page.wait_for_selector(f'tr.rule:has-text("train: {steps} steps")', state="attached",
                           timeout=WAIT_MS)  # fmt: skip
    wait_for(lambda: float(page.get_attribute("body", "data-last-sample") or 0) == last,
             "the job's last system sample on the page")  # fmt: skip
    shot(page, "job-ended")
    assert steps == 600 and errors == []


def _rule(status: str) -> dict[str, Any]:
    return {"rule": "StepOutlier", "status": status, "triggers": 0, "datapoints": 9,
            "message": f"{status} verdict"}  # fmt: skip


def test_the_final_verdicts_show_within_one_poll_of_being_written(
    tmp_path: Path, browser: Any, procs: Procs
) -> None:
    store = write_synthetic_job(str(tmp_path / "job-1"), SyntheticJob(name="job-1"),
                                [_rule("InProgress")])  # fmt: skip
    meta = store.read_json("job.json")
    store.write_json("job.json", meta | {"status": "Running", "end_time": None})
    store.write_json("heartbeat/node-a.json", {"time": time.time() + 3600, "pid": 1})
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.clock.install()  # the page's timers run only when the test lets them
    page.goto(serve(procs, tmp_path) + "#/job/job-1")
    page.wait_for_selector("#job-status.Running", timeout=WAIT_MS)
    page.wait_for_selector("tr.rule.InProgress", state="attached", timeout=WAIT_MS)
    page.clock.pause_at(page.evaluate("Date.now()") + 100)

    def poll_once(then: str) -> None:  # one rules poll's time (2 s), and its answer shown
        loads = page.get_attribute("body", "data-rules-loads")
        # A poll answered after run_for (a busy machine) sets its next timer on the paused
        # clock: one more poll's time then, at most two, never a wall-clock wait.
        from playwright.sync_api import TimeoutError as PageTimeout

        for attempt in range(3):
            page.clock.run_for(2500)
            try:
                page.wait_for_selector(then, state="attached", timeout=WAIT_MS // 4)
                break
            except PageTimeout:
                if attempt == 2:
                    raise
        wait_for(lambda: page.get_attribute("body", "data-rules-loads") != loads, "a rules poll")

    store.write_json("job.json", meta | {"status": "Stopped", "reason": "stopped"})
    poll_once("#job-status.Stopped")  # ended: the runner's final evaluation still runs
    poll_once("tr.rule.InProgress")
    store.write_json("rules/StepOutlier.json", _rule("NoIssuesFound"))
    poll_once("tr.rule.NoIssuesFound")


def test_an_unknown_job_or_a_malformed_address_shows_no_such_job(
    tmp_path: Path, browser: Any, procs: Procs
) -> None:
    write_synthetic_job(str(tmp_path / "job-1"), SyntheticJob(name="job-1"),
                        [_rule("NoIssuesFound")])  # fmt: skip
    url = serve(procs, tmp_path)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + "#/job/job-1")
    page.wait_for_selector("tr.rule.NoIssuesFound", state="attached", timeout=WAIT_MS)
    page.wait_for_selector('[data-chart="cpu"][data-drawn="1"]', timeout=WAIT_MS)
    for address, says in (("#/job/nope", "no job named 'nope'"),
                          ("#/job/%E0%A4%A", "#/job/%E0%A4%A is malformed")):  # fmt: skip
        page.goto(url + address)
        page.wait_for_selector('#job-name:has-text("no such job")', timeout=WAIT_MS)
        assert says in page.inner_text("#job-missing")
        assert page.inner_text("#job-facts") == "" and page.inner_text("#job-status") == ""
        assert page.query_selector_all("#rules tr.rule") == []
        assert not page.is_visible("#rules-panel") and not page.is_visible("#charts")
        assert page.inner_text("#conn") == ""  # the server answered: no "connection lost"
        shot(page, "no-such-job")
    page.goto(url + "#/job/job-1")
    page.wait_for_selector("tr.rule.NoIssuesFound", state="attached", timeout=WAIT_MS)
    assert page.inner_text("#job-name") == "job-1" and page.inner_text("#job-missing") == ""
    assert errors == []


def _drop_eval_steps(job_dir: Path) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    for part in job_dir.glob("steps/*/part-*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.filter(pc.not_equal(table["phase"], "eval")), part)


def test_charts_and_tables_are_readable(tmp_path: Path, browser: Any, procs: Procs) -> None:
    rule = {
        "rule": "StepOutlier",
        "status": "IssuesFound",
        "triggers": 2,
        "findings": [{"message": "slow", "severity": 0.4567891, "start": 1_763_850_100.0}],
    }
    write_synthetic_job(
        str(tmp_path / "slow"), SyntheticJob(name="slow", hours=1, interval_ms=5000), [rule]
    )
    write_synthetic_job(str(tmp_path / "short"), SyntheticJob(name="short", hours=0.01))
    _drop_eval_steps(tmp_path / "slow")
    url = serve(procs, tmp_path)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector('tr[data-job="short"]', timeout=WAIT_MS)
    # sortable headers: buttons reached with Tab, sorting on Enter and on Space
    page.focus("#filter")
    for _ in range(3):  # from the filter: live, Refresh, then the first header
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('th').dataset.sort") == "name"
    page.keyboard.press("Enter")
    assert page.get_attribute('#jobs th[data-sort="name"]', "aria-sort") == "ascending"
    page.keyboard.press("Space")
    assert page.get_attribute('#jobs th[data-sort="name"]', "aria-sort") == "descending"
    assert page.eval_on_selector_all("#jobs tbody tr", "rs => rs.map(r => r.dataset.job)") == [
        "slow", "short"]  # fmt: skip

    page.goto(url + "#/job/slow")
    page.wait_for_selector('[data-chart="step_duration"][data-drawn="1"]', timeout=WAIT_MS)
    page.wait_for_selector('[data-chart="cores"][data-drawn="1"]', timeout=WAIT_MS)
    page.wait_for_selector("tr.finding", timeout=WAIT_MS)
    # the outliers the report marks, drawn from the API's marks
    series = page.evaluate("StepscopeCharts.registry.step_duration.series")
    outliers = next(s for s in series if s["label"] == "outliers")
    assert outliers["n"] > 0 and any("limit" in s["label"] for s in series)
    assert "severity 0.457" in page.inner_text("tr.finding")
    # text alternatives and the heatmap's colour scale
    for chart in ("cpu", "cores", "step_duration", "step_share"):
        alt = page.eval_on_selector(f'[data-chart="{chart}"] [role=img]',
                                    "e => e.getAttribute('aria-label')")  # fmt: skip
        assert alt and ": " in alt, chart
    assert "no data" in page.inner_text('[data-chart="cores"] .sc-heat-legend')
    # a phase with no steps says so
    page.select_option("#phase", "eval")
    page.wait_for_selector('[data-chart="step_duration"] .sc-empty', timeout=WAIT_MS)
    text = page.inner_text('[data-chart="step_duration"]')
    assert "No eval steps of rank 0 in this job." in text
    assert page.is_hidden('[data-chart="step_split"]')
    shot(page, "readable")
    assert errors == []
