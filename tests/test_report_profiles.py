"""The report's Profiling windows and Tensors sections, on real jobs, in headless Chromium."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pytest

import stepscope
from conftest import CHROMIUM, SCRIPTS, stepscope_run
from stepscope.report import render_report, write_report
from stepscope.report._profile_data import pyinstrument_functions
from stepscope.report._profiles import safe_key, window_kind
from stepscope.testing import SyntheticJob, write_synthetic_job
from test_report import assert_clean, close, render

needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium")
TRAIN = str(SCRIPTS / "tensors_train.py")
CONFIG = """
[profiler.framework_profile_params]      # the seed's default windows: detailed at step 5,
                                         # dataloader at 7, cProfile at 9, 10 and 11
[[debugger.collections]]
name = "losses"
save_interval = 1
[[debugger.collections]]
name = "weights"
save_interval = 4
[[debugger.collections]]
name = "gradients"
parameters = { "train.save_interval" = "2", "reductions" = "l2,mean" }

[[rules]]
name = "LossNotDecreasing"
parameters = { num_steps = 4 }
[[rules]]
name = "ExplodingTensor"
"""


def _run(tmp: Path, args: list[str], config: str) -> stepscope.Job:
    path = tmp / "stepscope.toml"
    path.write_text(config)
    run = stepscope_run(tmp, [TRAIN, *args], "--config", str(path))
    assert run.code == 0, run.stderr
    return stepscope.open(run.job_path)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> stepscope.Job:
    """16 training steps, 8 evaluations, every default profiling window, tensors, 2 rules."""
    tmp = tmp_path_factory.mktemp("report-profiles")
    return _run(tmp, ["--steps", "16", "--eval-every", "4", "--scalars"], CONFIG)


def _hrefs(html: str, section: str) -> list[str]:
    part = html.split(f'<section id="{section}">', 1)[1]
    return [unquote(h) for h in re.findall(r'<a href="([^"#][^"]*)"', part)]


def _series(page: Any, title: str) -> dict[str, dict[str, Any]]:
    cid = next(c for c, s in page.specs.items() if s["title"] == title)
    return {s["label"]: s for s in page.registry[cid]["series"]}


@pytest.mark.process
@needs_chromium
def test_profiling_windows_from_the_jobs_files(job: stepscope.Job, browser: Any) -> None:
    report = write_report(job)
    page = render(browser, report, "report-profiles-tensors.png")
    assert_clean(page, report)
    records = job.profiling_artifacts()
    assert [r["kind"] for r in records] == ["detailed", "dataloader", "python", "python", "python"]
    section = page.text.split("Profiling windows\n", 2)[2].split("\nTensors\n", 1)[0]
    for r in records:
        assert window_kind(r) in section
    assert "python (cprofile, off_cpu_time)\t0\t11\t" in section  # kind, rank, steps
    root = Path(job.path)
    ops = json.loads((root / "profiling/rank-0/detailed-5-5.operators.json").read_text())
    for op in ops["operators"][:15]:  # the table shows the top 15, from the file
        assert f"\n{op['name']}\t{op['count']}\t" in section
    funcs = json.loads((root / "profiling/rank-0/python-10-10.functions.json").read_text())
    assert all(f"\n{f['name']}\t" in section for f in funcs["functions"][:15])
    assert "Batches fetched" in section and "https://ui.perfetto.dev" in section
    hrefs = _hrefs(Path(report).read_text(), "profiles")
    assert sorted(hrefs) == sorted(k for r in records for k in r["files"])
    assert all((root / h).is_file() for h in hrefs)  # relative to the report: the job folder


@pytest.mark.process
@needs_chromium
def test_tensor_charts_hold_the_saved_values(job: stepscope.Job, browser: Any) -> None:
    report = write_report(job)
    page = render(browser, report, "report-tensors.png")
    assert_clean(page, report)
    t = job.tensors
    for title, phase, count in (("losses (train)", "train", 16), ("losses (eval)", "eval", 8)):
        name = "loss" if phase == "train" else "CrossEntropyLoss_output_0"
        values = list(t[name].values(phase).values())
        s = _series(page, title)[name]
        assert s["n"] == count == len(values)
        assert close(s["max"], max(values)) and close(s["first"], values[0])
    loss_chart = next(s for s in page.specs.values() if s["title"] == "losses (train)")
    assert loss_chart["xAxis"] == "step"  # drawn over training steps, not times
    assert [loss_chart["t0"] + x for x in loss_chart["x"]] == sorted(t["loss"].values("train"))
    accuracy = _series(page, "accuracy (train)")["accuracy"]
    assert accuracy["n"] == 16 and close(accuracy["max"], 0.15)  # step / 100 in the script
    grads = _series(page, "gradients: l2 (train)")
    assert set(grads) == {n for n in t.names() if n.startswith("gradient/")}
    for name, s in grads.items():
        l2 = [t[name].reduction(step, "l2") for step in t[name].steps()]
        assert s["n"] == 8 and close(s["max"], max(l2)) and close(s["min"], min(l2))
    weights = _series(page, "weights: l2 (from raw) (train)")
    for name, s in weights.items():
        norms = [float(np.linalg.norm(t[name].value(step))) for step in t[name].steps()]
        assert s["n"] == 4 and close(s["max"], max(norms)), name
    assert re.search(
        "^gradient/0\\.weight\tgradients\t8 \\(0\u201314\\)\t\u2013\tl2, mean$", page.text, re.M
    )
    html = Path(report).read_text()
    for rule in ("LossNotDecreasing", "ExplodingTensor"):
        assert f'<a href="#rule-{rule}">{rule}</a>' in html and f'id="rule-{rule}"' in html


@pytest.mark.process
def test_links_are_relative_to_a_report_written_elsewhere(
    job: stepscope.Job, tmp_path: Path
) -> None:
    out = tmp_path / "elsewhere" / "deep" / "r.html"
    write_report(job, str(out))
    hrefs = _hrefs(out.read_text(), "profiles")
    assert hrefs and all(h.startswith("../") for h in hrefs)
    assert all((out.parent / h).resolve().is_file() for h in hrefs)


@pytest.mark.process
@needs_chromium
def test_window_and_tensor_strings_are_escaped(
    job: stepscope.Job, tmp_path: Path, browser: Any
) -> None:
    root = tmp_path / "job"
    shutil.copytree(job.path, root)
    evil = "<script>window.__pwned=1</script>"
    img = '<img src=x onerror="window.__pwned=2">'
    ops = {"operators": [{"name": evil, "count": img, "self_cpu_us": 5.0, "cpu_total_us": 5.0}]}
    (root / "profiling/rank-0/evil.operators.json").write_text(json.dumps(ops))
    record = {
        "kind": "detailed",
        "rank": 0,  # numbers: a record with text there is damaged, and skipped
        "start_step": 1,
        "end_step": 3,
        "start_time": time.time(),
        "end_time": time.time() + 1,
        "window": {"with_stack": True},
        "files": ["profiling/rank-0/evil.operators.json", "javascript:alert(1)", "../job.json"],
        "truncated": {"kept_events": img, "total_events": 10},
    }
    (root / "profiling/rank-0/evil.window.json").write_text(json.dumps(record))
    other = {**record, "kind": evil, "window": {evil: img}, "request": evil}
    (root / "profiling/rank-0/evil2.window.json").write_text(json.dumps(other))
    colls = json.loads((root / "tensors/rank-0/collections.json").read_text())
    colls[img] = colls.pop("scalars")
    (root / "tensors/rank-0/collections.json").write_text(json.dumps(colls))
    report = write_report(stepscope.open(root))
    page = render(browser, report, "report-profiles-escaping.png")
    assert page.pwned is None
    assert_clean(page, report)  # <img src=x> would have been a failed request
    assert evil in page.text and img in page.text
    html = Path(report).read_text()
    assert "javascript:" not in " ".join(re.findall(r'href="([^"]*)"', html))
    assert '<a href="../job.json"' not in html and html.count("<script") == 3


def test_pyinstrument_top_functions_from_its_session(tmp_path: Path) -> None:
    from pyinstrument import Profiler

    def busy() -> float:
        end, x = time.perf_counter() + 0.05, 0.0
        while time.perf_counter() < end:
            x += math.sqrt(x + 1)
        return x

    prof = Profiler(interval=0.001, async_mode="disabled")
    prof.start()
    busy()
    session = prof.stop()
    spec = SyntheticJob(name="py", hours=0.002)
    store = write_synthetic_job(str(tmp_path / "job"), spec)
    store.write_json("profiling/rank-0/python-1-1.pyisession", session.to_json())
    record = {
        "kind": "python",
        "window": {"python_profiler": "pyinstrument"},
        "files": ["profiling/rank-0/python-1-1.pyisession"],
    }
    rows = pyinstrument_functions(stepscope.open(tmp_path / "job"), record)
    own = {r["name"]: r["own_s"] for r in rows}
    assert max(own, key=lambda n: own[n]) in ("busy", "sqrt", "perf_counter")
    busy_row = next(r for r in rows if r["name"] == "busy")
    assert busy_row["file"] == __file__ and busy_row["cumulative_s"] >= 0.04  # ran 50 ms
    assert busy_row["cumulative_s"] >= own["busy"] + own.get("sqrt", 0.0)
    assert sum(own.values()) <= session.duration + 1e-6


@pytest.mark.process
@needs_chromium
def test_exploding_loss_is_drawn_with_gaps_and_the_rule_linked(
    tmp_path: Path, browser: Any
) -> None:
    config = (
        '[[debugger.collections]]\nname = "losses"\nsave_interval = 1\n\n'
        '[[rules]]\nname = "ExplodingTensor"\n'
    )
    exploded = _run(tmp_path, ["--task", "regress", "--lr", "10", "--steps", "30"], config)
    t = exploded.tensors
    names = t.collections()["losses"]
    assert sorted(names) == ["MSELoss_output_0", "loss"]
    values = {n: list(t[n].values().values()) for n in names}
    bad = {n: sum(not math.isfinite(v) for v in vs) for n, vs in values.items()}
    assert bad["loss"] > 0  # the script's loss does explode
    report = write_report(exploded)
    page = render(browser, report, "report-tensors-exploding.png")
    assert_clean(page, report)
    series = _series(page, "losses (train)")
    assert {n: series[n]["n"] for n in names} == {n: len(values[n]) - bad[n] for n in names}
    assert f"{sum(bad.values())} values are NaN or infinite: drawn as gaps." in page.text
    assert re.search(r"ExplodingTensor IssuesFound [1-9]\d* triggers", page.text)


def test_no_sections_without_windows_or_tensors(tmp_path: Path) -> None:
    write_synthetic_job(str(tmp_path / "job"), SyntheticJob(name="plain", hours=0.01))
    html = render_report(stepscope.open(tmp_path / "job"))
    assert 'id="profiles"' not in html and 'id="tensors"' not in html


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("profiling/rank-0/detailed-5-5.pt.trace.json.gz", True),
        ("profiling/../job.json", False),
        ("/etc/passwd", False),
        ("javascript:alert(1)", False),
        ("profiling/rank-0/./x", False),
        ("profiling\\rank-0\\x", False),
        (3, False),
    ],
)
def test_only_keys_inside_profiling_become_links(key: Any, ok: bool) -> None:
    assert safe_key(key) is ok
