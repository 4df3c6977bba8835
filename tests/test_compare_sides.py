"""Several runs a side beyond the CLI (issue 34): ``stepscope report B --against
A1,A2,A3``, ``GET /api/compare?base=A1&base=A2&new=B1...`` and ``stepscope.compare``
with lists of jobs, on the runs of tests/test_compare_runs.py (steady steps whose level
differs from run to run, as on a shared host).

Each firing case has its silent twin with the same baseline: one run twice as slow
(+150 ms in ``other``) is called slower against the spread of the baseline's 3 runs,
one identical run is "no difference"; every surface says how many runs a side has, lists
each run's median and charts every run."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from starlette.testclient import TestClient

import stepscope
from rules_data import write_steps
from stepscope.analysis.compare import compare_sides
from stepscope.cli import main
from stepscope.report import comparison_charts
from stepscope.store import open_store
from test_compare_api import serving
from test_compare_runs import A_LEVELS, B_LEVELS, side


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("sides")
    side(tmp, "a", A_LEVELS, 10)
    side(tmp, "b", B_LEVELS, 20)
    side(tmp, "slept", B_LEVELS, 20, other=0.015)
    side(tmp, "big", (1.0,), 30, other=0.15)  # one run twice as slow: +150 ms of `other`
    return tmp


def section(html: str) -> str:
    m = re.search(r'<section id="comparison">(.*?)</section>', html, re.S)
    assert m is not None, "no comparison section"
    return m.group(1)


def report(root: Path, job: str, against: str, out: Path) -> tuple[str, str]:
    """The comparison section of ``job``'s report against ``against``, and its verdict."""
    assert main(["report", job, "--in", str(root), "--against", against, "-o", str(out)]) == 0
    body = section(out.read_text())
    first = re.search(r'<p class="cmp-verdict cmp-first"><b>(.*?)</b>', body)
    assert first is not None, "no verdict line"
    return body, first.group(1)


def test_a_report_against_three_baseline_runs_names_a_planted_cost(
    root: Path, tmp_path: Path
) -> None:
    body, first = report(root, "big-0", "a-0,a-1,a-2", tmp_path / "r.html")
    assert first.startswith("big-0 is slower by")
    assert "mostly other" in first
    assert "B&#x27;s one run judged against the spread of A&#x27;s 3 runs" in first
    assert "the baseline, 3 runs: " in body
    row = re.search(r"<td>run medians</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>", body)
    assert row is not None and row.group(1).count(",") == 2 and "," not in row.group(2)
    assert "spread between runs" in row.group(3) and "(2 df)" in row.group(3)


def test_its_silent_twin_an_identical_run_against_the_same_baseline(
    root: Path, tmp_path: Path
) -> None:
    body, first = report(root, "b-0", "a-0,a-1,a-2", tmp_path / "r.html")
    assert first.startswith("no difference beyond the noise")
    assert "spread of A&#x27;s 3 runs" in first and "<td>run medians</td>" in body


def test_a_bad_against_run_is_one_line(root: Path, tmp_path: Path, capsys: Any) -> None:
    argv = ["report", "b-0", "--in", str(root), "-o", str(tmp_path / "r.html")]
    assert main([*argv, "--against", "a-0,,a-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stepscope: error: --against: the baseline 'a-0,,a-1' names no job")
    assert main([*argv, "--against", "a-0,a-0"]) == 2
    assert "names the same job twice (a-0)" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


@pytest.fixture
def client(root: Path) -> Iterator[TestClient]:
    yield from serving(root)


def sides_query(base: str, new: str) -> str:
    return "&".join(
        [*(f"base={n}" for n in base.split(",")), *(f"new={n}" for n in new.split(","))]
    )


def test_the_api_compares_sides_of_several_runs(
    client: TestClient, root: Path, capsys: Any
) -> None:
    r = client.get("/api/compare?" + sides_query("a-0,a-1,a-2", "slept-0,slept-1,slept-2"))
    assert r.status_code == 200, r.text
    doc = r.json()
    (train,) = doc["comparison"]["phases"]
    assert train["direction"] == "slower" and train["mostly"] == "other", train["verdict"]
    assert train["runs"]["known"] and train["runs"]["df"] == 4
    labels = [s["label"] for s in doc["charts"]["train"]["series"]]
    assert labels == ["A: a-0", "A: a-1", "A: a-2", "B: slept-0", "B: slept-1", "B: slept-2"]
    folder = str(root)
    argv = ["compare", "-o", folder, "a-0,a-1,a-2", "slept-0,slept-1,slept-2", "--json"]
    assert main(argv) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    assert doc["comparison"] == printed


def test_its_silent_twin_identical_sides(client: TestClient) -> None:
    r = client.get("/api/compare?" + sides_query("a-0,a-1,a-2", "b-0,b-1,b-2"))
    (train,) = r.json()["comparison"]["phases"]
    assert train["direction"] == "same" and train["runs"]["known"], train["verdict"]


def test_the_api_refuses_a_run_named_twice(client: TestClient) -> None:
    r = client.get("/api/compare?base=a-0&base=a-0&new=b-0")
    assert r.status_code == 400 and "base names the same job twice (a-0)" in r.json()["error"]
    r = client.get("/api/compare?base=a-0&base=&new=b-0")
    assert r.status_code == 400 and "base is required" in r.json()["error"]


def test_a_notebook_compares_lists_of_runs(root: Path) -> None:
    a = [stepscope.open(str(root / f"a-{i}")) for i in range(3)]
    slept = [stepscope.open(str(root / f"slept-{i}")) for i in range(3)]
    view = stepscope.compare(a, slept)
    assert repr(view).startswith("<Comparison slept-0,slept-1,slept-2 against a-0,a-1,a-2:")
    assert "is slower, mostly other" in repr(view)
    html = view._repr_html_()
    assert all(f"B: slept-{i}" in html for i in range(3)) and "A: a-2" in html
    twin = a[0].compare([stepscope.open(str(root / f"b-{i}")) for i in range(3)])
    assert twin.comparison.phases[0].direction == "same"
    assert twin.comparison.new_runs == ["b-0", "b-1", "b-2"]


def test_the_gate_fails_one_run_against_several_and_says_on_what(root: Path, capsys: Any) -> None:
    argv = ["compare", "-o", str(root), "a-0,a-1,a-2"]
    assert main([*argv, "big-0", "--fail-if-slower", "5%"]) == 1
    err = capsys.readouterr().err
    assert "stepscope compare: gate failed: big-0 is slower than a-0,a-1,a-2 by at least" in err
    assert "one run a side" not in err  # the baseline's spread is in its bound
    assert main([*argv, "b-0", "--fail-if-slower", "5%"]) == 0
    assert "gate failed" not in capsys.readouterr().err


def test_runs_of_one_name_are_told_apart_in_the_chart(root: Path, tmp_path: Path) -> None:
    """Baseline folders of several CI jobs may share a job name: one series each."""
    for i in (1, 2):
        shutil.copytree(root / f"a-{i}", tmp_path / f"ci{i}" / "base")
        meta = json.loads((tmp_path / f"ci{i}" / "base" / "job.json").read_text())
        (tmp_path / f"ci{i}" / "base" / "job.json").write_text(json.dumps({**meta, "name": "base"}))
    base = [stepscope.open(str(tmp_path / f"ci{i}" / "base")) for i in (1, 2)]
    view = stepscope.compare(base, stepscope.open(str(root / "b-0")))
    assert view.base_runs == base and view.new_runs[0].name == "b-0"
    spec = comparison_charts(view.comparison, base, view.new, 100)["train"]
    labels = [s["label"] for s in spec["series"]]
    assert labels == ["A: base #1", "A: base #2", "B: b-0"]
    assert all(len(s["values"]) == len(spec["x"]) for s in spec["series"])


def test_a_part_missing_from_a_run_is_not_judged_from_the_others(tmp_path: Path) -> None:
    """Two runs a side, `other` of one B run not recorded: `other` has one value on B,
    so it is not judged (its twin, recorded in both, is named beyond its noise)."""
    a = side(tmp_path, "a", A_LEVELS[:2], 10)
    b = side(tmp_path, "b", B_LEVELS[:2], 20, other=0.015)
    opened = [[stepscope.open(str(p)) for p in s] for s in (a, b)]
    named = compare_sides(*opened).phases[0]
    other = next(p for p in named.parts if p.part == "other")
    assert other.beyond_noise and named.mostly == "other", named.verdict
    store = open_store(str(b[1]))
    steps = pq.read_table(str(next((b[1] / "steps").rglob("*.parquet")))).to_pandas()
    for f in (b[1] / "steps").rglob("*.parquet"):
        f.unlink()
    write_steps(store, steps.assign(other=np.nan))
    opened = [[stepscope.open(str(p)) for p in s] for s in (a, b)]
    got = compare_sides(*opened).phases[0]
    other = next(p for p in got.parts if p.part == "other")
    assert not other.beyond_noise and other.family is not None
    assert math.isnan(other.family.low), got.verdict
