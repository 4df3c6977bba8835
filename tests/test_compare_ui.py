"""The dashboard's comparison (issue 34), in Chromium at 1400x900: tick two jobs in the
jobs list, open the comparison, read its verdict and its chart of both runs' step
durations on one axis. The synthetic jobs of tests/test_compare.py: a planted +15% in
forward, and its silent twin (the same distribution twice); a TensorFlow-shaped job
whose missing parts and phase are named. Screenshot:
test-artifacts/compare-dashboard.png."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import CHROMIUM
from test_compare import planted
from test_compare_lacks import shaped
from test_compare_runs import A_LEVELS, side
from ui_pages import new_page, serving

pytestmark = [
    pytest.mark.process,  # Chromium, and `stepscope ui`
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cmpui")
    planted(tmp)
    shaped(tmp / "keras", 4, tf=True, evals=40)  # a compiled fit's steps, and an eval phase
    side(tmp, "r", A_LEVELS, 10)  # runs whose level differs from run to run
    side(tmp, "big", (1.0,), 30, other=0.15)  # one run twice as slow
    return tmp


@pytest.fixture
def ui(root: Path) -> Iterator[str]:
    """The base URL of a real `stepscope ui` over the three jobs."""
    with serving(root) as url:
        yield url


def compare(browser: Any, url: str, base: str, new: str) -> tuple[Any, list[str]]:
    """Tick ``base`` then ``new`` in the jobs list and open their comparison."""
    page, errors = new_page(browser, 1400)
    page.goto(url)
    page.wait_for_selector("body[data-jobs-loaded]", timeout=WAIT_MS)
    assert page.locator("#compare-open").is_disabled()  # nothing ticked yet
    for name in (base, new):
        page.check(f'#jobs tr[data-job="{name}"] input.pick')
    page.click("#compare-open")
    page.wait_for_selector("body[data-compare-loaded]", timeout=WAIT_MS)
    return page, errors


def series(page: Any, chart: str) -> list[tuple[str, int]]:
    """The drawn chart's series: label and points."""
    return [
        (s["label"], s["n"]) for s in page.evaluate(f"StepscopeCharts.registry[{chart!r}].series")
    ]


def test_ticking_two_jobs_opens_their_comparison(browser: Any, ui: str) -> None:
    page, errors = compare(browser, ui, "a", "slow")
    assert "#/compare/a/slow" in page.url
    verdict = page.text_content("#compare-verdict") or ""
    assert verdict.startswith("slow is slower by") and "mostly forward" in verdict
    drawn = page.locator('[data-chart="cmp_train"][data-drawn="1"] canvas')
    assert drawn.count() >= 1
    (a, na), (b, nb) = series(page, "cmp_train")
    assert (a, b) == ("A: a", "B: slow") and na > 300 and nb > 300
    assert "dataloader0.num_workers" in (page.text_content("#compare-setup") or "")
    assert "forward" in (page.text_content("#compare-phases table.parts") or "")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare-dashboard.png"))  # the 1400x900 viewport
    assert not errors


def test_the_same_distribution_twice_is_no_difference(browser: Any, ui: str) -> None:
    page, errors = compare(browser, ui, "a", "same")
    verdict = page.text_content("#compare-verdict") or ""
    assert verdict.startswith("no difference beyond the noise of these runs")
    assert [label for label, n in series(page, "cmp_train") if n > 300] == ["A: a", "B: same"]
    assert not errors


def test_what_one_job_lacks_is_named_not_compared(browser: Any, ui: str) -> None:
    """A TensorFlow-shaped job against a PyTorch one (tests/test_compare_lacks.py)."""
    page, errors = compare(browser, ui, "keras", "a")
    table = page.text_content("#compare-phases table.parts") or ""
    assert "backward" in table and "not split out in A (0 on every step), not compared" in table
    said = page.text_content("#compare-phases p.missing-phase") or ""
    assert said == "eval: not recorded in B, not compared"
    assert "version.tensorflow" in (page.text_content("#compare-setup") or "")
    assert not errors


def test_several_runs_a_side_are_compared_as_runs(browser: Any, ui: str) -> None:
    """Tick three baseline runs and one new run; put a run wrongly on B and back: the
    button waits for a job on each side, then the page judges B's one run against the
    spread of A's three, lists each run's median and draws every run."""
    page, errors = new_page(browser, 1400)
    page.goto(ui)
    page.wait_for_selector("body[data-jobs-loaded]", timeout=WAIT_MS)
    for name in ("r-0", "r-1", "r-2", "big-0"):
        page.check(f'#jobs tr[data-job="{name}"] input.pick')
    for name in ("r-0", "r-1", "r-2", "big-0"):
        page.select_option(f'#jobs tr[data-job="{name}"] select.side', "A")
    assert page.locator("#compare-open").is_disabled()
    assert "put a ticked job on each side (A: 4, B: 0)" in (
        page.text_content("#compare-hint") or ""
    )
    assert page.locator('#jobs tr[data-job="a"] select.side').is_hidden()  # not ticked
    page.select_option('#jobs tr[data-job="big-0"] select.side', "B")
    hint = page.text_content("#compare-hint") or ""
    assert "A (the baseline): " in hint and "B: big-0" in hint
    page.click("#compare-open")
    page.wait_for_selector("body[data-compare-loaded]", timeout=WAIT_MS)
    assert page.url.endswith("/big-0") and page.url.count(",") == 2
    sub = page.text_content("#compare-sub") or ""
    assert "(the baseline, 3 runs)" in sub and "B: big-0 " in sub
    verdict = page.text_content("#compare-verdict") or ""
    assert verdict.startswith("big-0 is slower by") and "mostly other" in verdict, verdict
    assert "B's one run judged against the spread of A's 3 runs" in verdict
    table = page.text_content("#compare-phases table.parts") or ""
    assert "run medians" in table and "spread between runs" in table and "(2 df)" in table
    labels = sorted(label for label, n in series(page, "cmp_train") if n > 100)
    assert labels == ["A: r-0", "A: r-1", "A: r-2", "B: big-0"]
    assert not errors
