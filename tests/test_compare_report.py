"""``stepscope report B --against A``: the comparison section of B's report, on the
synthetic jobs of tests/test_compare.py (a planted +15% in forward, and its silent
twin, the same distribution twice); a bad ``--against`` is one line that says the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.cli import main
from stepscope.report import render_report
from test_compare import planted


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return planted(tmp_path_factory.mktemp("cmprep"))


def page(new: Path, base: Path | None) -> str:
    against = None if base is None else stepscope.open(str(base))
    return render_report(stepscope.open(str(new)), against=against)


def charts(html: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="stepscope-data">(.*?)</script>', html)
    assert m is not None
    data: dict[str, Any] = json.loads(m.group(1))["charts"]
    return data


def section(html: str) -> str:
    m = re.search(r'<section id="comparison">(.*?)</section>', html, re.S)
    assert m is not None, "no comparison section"
    return m.group(1)


def test_a_planted_slowdown_is_in_the_section(jobs: dict[str, Path]) -> None:
    html = page(jobs["slow"], jobs["a"])
    body = section(html)
    first = re.search(r'<p class="cmp-verdict cmp-first"><b>(.*?)</b>', body)
    assert first is not None and first.group(1).startswith("slow is slower by")
    assert "mostly forward" in first.group(1)
    assert "<td>forward</td>" in body and "change (95% interval)" in body
    # the setup that differs: the DataLoader's workers, 0 -> 2
    assert re.search(r"<td>dataloader0.num_workers</td><td>0</td><td>2</td>", body)
    assert "Rules whose verdict changed" in body
    assert 'href="#comparison"' in html


def test_the_chart_has_both_runs_by_step_number(jobs: dict[str, Path]) -> None:
    html = page(jobs["slow"], jobs["a"])
    ids = re.findall(r'data-chart="(c\d+)"', section(html))
    assert len(ids) == 1
    spec = charts(html)[ids[0]]
    assert spec["xAxis"] == "step"
    assert [s["label"] for s in spec["series"]] == ["A: a", "B: slow"]
    assert all(any(v is not None for v in s["values"]) for s in spec["series"])


def test_the_same_distribution_twice_says_no_difference(jobs: dict[str, Path]) -> None:
    body = section(page(jobs["same"], jobs["a"]))
    assert "no difference beyond the noise of these runs" in body
    assert "mostly" not in body


def test_without_against_there_is_no_section(jobs: dict[str, Path]) -> None:
    html = page(jobs["slow"], None)
    assert 'id="comparison"' not in html and 'href="#comparison"' not in html


def test_the_cli_writes_the_section(jobs: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "r.html"
    code = main(["report", "slow", "--in", str(jobs["a"].parent), "--against", "a", "-o", str(out)])
    assert code == 0 and capsys.readouterr().out.strip() == str(out)
    assert "slow is slower by" in section(out.read_text())


@pytest.mark.parametrize("bad", ["nope", "./no/such/folder"])
def test_a_bad_against_is_one_line_with_the_fix(
    jobs: dict[str, Path], tmp_path: Path, capsys: Any, bad: str
) -> None:
    out = tmp_path / "r.html"
    code = main(["report", str(jobs["slow"]), "--against", bad, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("stepscope: error: --against: No stepscope job")
    assert "stepscope ls" in err and not out.exists()
