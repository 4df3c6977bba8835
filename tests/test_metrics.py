"""Prometheus metrics (stepscope.metrics): the exposition read back with prometheus_client's
parser, the server, its fault record, `stepscope ui`'s /metrics and `run`'s flags.

The real scrape of a real run by a real Prometheus is tests/test_prometheus.py.
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from stepscope.cli import main
from stepscope.dashboard import create_app
from stepscope.metrics import BUCKETS, JobMetrics, MetricsServer, render
from stepscope.rules._live_metrics import start_metrics
from stepscope.store import open_store
from stepscope.testing import SyntheticJob, write_synthetic_job

TOKEN = "t" * 32
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of the exposition by (name, labels), parsed by prometheus_client."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in found, f"a sample twice: {key}"
            found[key] = s.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


def steps_frame(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    duration = rng.uniform(0.05, 0.4, n).astype("float32")
    end = 1000.0 + np.cumsum(duration)
    shares = {"data_wait": 0.1, "forward": 0.3, "backward": 0.4, "optimizer": 0.1}
    parts = {p: (duration * f).astype("float32") for p, f in shares.items()}
    frame = pd.DataFrame({"rank": 0, "node": "node-a", "phase": "train", "step": range(n),
                          "start": end - duration, "end": end, "duration": duration,
                          **parts, "other": duration * 0.1})  # fmt: skip
    frame.loc[n - 1, "phase"] = "warmup"  # an unknown phase: shown as "other"
    return frame


def test_steps_become_a_histogram_the_split_and_throughput_per_series() -> None:
    frame = steps_frame()
    m = JobMetrics("bert-42")
    m.add_rows("steps", frame.iloc[:25])
    m.add_rows("steps", frame.iloc[25:])  # a later scan's rows add up
    found = samples(render([m]))
    train = frame[frame.phase == "train"]
    base = {"job": "bert-42", "node": "node-a", "rank": "0", "phase": "train"}
    assert value(found, "stepscope_step_seconds_count", **base) == len(train)
    assert value(found, "stepscope_step_seconds_sum", **base) == pytest.approx(train.duration.sum())
    for le in BUCKETS:
        got = value(found, "stepscope_step_seconds_bucket", **base, le=repr(le))
        assert got == (train.duration.astype(float) <= le).sum(), le
    assert value(found, "stepscope_step_seconds_bucket", **base, le="+Inf") == len(train)
    for part in ("data_wait", "forward", "backward", "optimizer", "other"):
        got = value(found, "stepscope_step_part_seconds_total", **base, part=part)
        assert got == pytest.approx(float(train[part].sum()), rel=1e-5), part
    gaps = np.diff(np.sort(train.end.to_numpy()[-33:]))
    rate = value(found, "stepscope_steps_per_second", **base)
    assert rate == pytest.approx(1 / statistics.median(gaps))
    other = {**base, "phase": "other"}
    assert value(found, "stepscope_step_seconds_count", **other) == 1
    labels = {k for (_, ls) in found for k, _ in ls}
    assert labels <= {"job", "node", "rank", "phase", "part", "le"}  # no step, no message


def test_system_gauges_are_the_newest_sample_and_missing_values_are_left_out() -> None:
    m = JobMetrics("j")
    frame = pd.DataFrame({"node": ["a", "a", "b"], "time": [1.0, 2.0, 1.0],
                          "cpu": [10.0, 30.0, np.nan], "mem_used": [1e9, 2e9, 3e9],
                          "mem_percent": [5.0, 10.0, 15.0], "gpu0_util": [90.0, 95.0, np.nan],
                          "gpu0_mem_used": [1e9, 1e9, np.nan],
                          "gpu0_mem_total": [4e10, 4e10, np.nan]})  # fmt: skip
    m.add_rows("system", frame)
    found = samples(render([m]))
    assert value(found, "stepscope_cpu_percent", job="j", node="a") == 30.0
    assert value(found, "stepscope_memory_used_bytes", job="j", node="b") == 3e9
    assert value(found, "stepscope_gpu_utilization_percent", job="j", node="a", gpu="0") == 95.0
    assert value(found, "stepscope_gpu_memory_total_bytes", job="j", node="a", gpu="0") == 4e10
    # node b had no CPU figure and no GPU: absent, never a zero
    assert ("stepscope_cpu_percent", frozenset({("job", "j"), ("node", "b")})) not in found
    assert not any(n.startswith("stepscope_gpu") and ("node", "b") in ls for n, ls in found)


def test_rule_status_gauge_and_a_findings_counter_that_counts_each_finding_once() -> None:
    m, n = JobMetrics("j"), JobMetrics("k")
    m.set_rule("StepOutlier", "IssuesFound", ["f1", "f2"])
    m.set_rule("StepOutlier", "IssuesFound", ["f2", "f3"])  # f2 found again: one finding
    m.set_rule("LowGPUUtilization", "NotApplicable", [])
    n.set_rule("StepOutlier", "NoIssuesFound", [])
    n.set_rule("Broken", "Error", [])
    found = samples(render([m, n]))  # two jobs: one family block each, both jobs inside
    assert value(found, "stepscope_rule_status", job="j", rule="StepOutlier") == 1
    assert value(found, "stepscope_rule_status", job="j", rule="LowGPUUtilization") == -1
    assert value(found, "stepscope_rule_status", job="k", rule="StepOutlier") == 0
    assert value(found, "stepscope_rule_status", job="k", rule="Broken") == -2
    assert value(found, "stepscope_rule_findings_total", job="j", rule="StepOutlier") == 3
    assert value(found, "stepscope_rule_findings_total", job="k", rule="StepOutlier") == 0


def test_label_values_are_escaped() -> None:
    name = 'a "quoted"\\job\nname'
    m = JobMetrics(name)
    m.set_rule("R", "IssuesFound", ["x"])
    found = samples(render([m]))
    assert value(found, "stepscope_rule_status", job=name, rule="R") == 1


def test_an_empty_job_renders_no_family() -> None:
    assert render([JobMetrics("j")]) == ""


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, "", ""


def test_the_server_answers_metrics_on_loopback_and_stops_cleanly() -> None:
    m = JobMetrics("j")
    m.set_rule("R", "NoIssuesFound", [])
    server = MetricsServer(lambda: render([m]), 0).start()
    try:
        code, kind, text = _get(server.url)
        assert server.url.startswith("http://127.0.0.1:")
        assert code == 200 and kind.startswith("text/plain; version=0.0.4")
        assert value(samples(text), "stepscope_rule_status", job="j", rule="R") == 0
        m.set_rule("R", "IssuesFound", ["f"])  # each scrape shows the state now
        assert value(samples(_get(server.url)[2]), "stepscope_rule_status", job="j", rule="R") == 1
        assert _get(server.url.replace("/metrics", "/other"))[0] == 404
    finally:
        server.stop()
    assert not [t for t in threading.enumerate() if t.name == "stepscope-metrics"]


def test_a_failing_render_answers_500_and_is_heard_by_the_owner() -> None:
    heard: list[Exception] = []

    def broken() -> str:
        raise RuntimeError("planted")

    server = MetricsServer(broken, 0, on_error=heard.append).start()
    try:
        assert _get(server.url)[0] == 500
        assert _get(server.url)[0] == 500  # and the server still answers
    finally:
        server.stop()
    assert [str(e) for e in heard] == ["planted", "planted"]


def test_a_port_in_use_is_a_recorded_fault_and_the_runner_goes_on(tmp_path: Path) -> None:
    store = write_synthetic_job(str(tmp_path / "job"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        metrics, server = start_metrics(open_store(str(tmp_path / "job")), port, "127.0.0.1")
    assert server is None and metrics.job == "job"
    (fault,) = [json.loads(p.read_text()) for p in (tmp_path / "job" / "faults").glob("metrics-*")]
    assert fault["component"] == "metrics-server"
    assert f"127.0.0.1:{port}" in fault["error"] and "Address already in use" in fault["error"]
    assert store.url.endswith("job")


@pytest.fixture
def ui(tmp_path: Path) -> Any:
    write_synthetic_job(str(tmp_path / "done"), SyntheticJob(name="done", gpus=1))
    rules = [{"rule": "StepOutlier", "status": "IssuesFound", "findings": [
        {"message": "a 3 s step", "node": "node-a", "rank": 0, "start": 1.0}]}]  # fmt: skip
    store = write_synthetic_job(str(tmp_path / "live"), SyntheticJob(name="live"), rules)  # type: ignore[list-item]
    store.write_json("job.json", store.read_json("job.json") | {"status": "Running"})
    store.write_json("heartbeat/node-a.json", {"time": time.time() + 3600, "pid": 1})
    before = set(threading.enumerate())
    app = create_app(str(tmp_path), "127.0.0.1", TOKEN)
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        yield c
    for t in set(threading.enumerate()) - before:
        t.join(timeout=10)


def test_the_dashboard_serves_the_running_jobs_metrics_and_any_job_by_name(ui: Any) -> None:
    r = ui.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    found = samples(r.text)
    assert {dict(ls)["job"] for _, ls in found} == {"live"}  # the finished job is left out
    assert value(found, "stepscope_rule_status", job="live", rule="StepOutlier") == 1
    assert value(found, "stepscope_rule_findings_total", job="live", rule="StepOutlier") == 1
    steps = [v for (n, ls), v in found.items() if n == "stepscope_step_seconds_count"]
    assert steps and all(v > 0 for v in steps)
    named = samples(ui.get("/metrics?job=done").text)
    assert {dict(ls)["job"] for _, ls in named} == {"done"}
    assert any(n == "stepscope_gpu_utilization_percent" for n, _ in named)
    assert ui.get("/metrics?job=nope").status_code == 404


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--metrics-port", "70000"], "--metrics-port 70000: a port is 0 to 65535"),
        (["--metrics-port", "9100", "--no-rules"], "--metrics-port needs the live rules"),
        (["--metrics-host", "0.0.0.0"], "--metrics-host needs --metrics-port"),
    ],
)
def test_run_refuses_bad_metrics_flags_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    out = tmp_path / "runs"
    assert main(["run", "-o", str(out), *args, "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stepscope: error: {said}") and err.count("\n") == 1
    assert not out.exists()


def test_the_live_runner_feeds_each_row_once_and_its_verdicts(tmp_path: Path) -> None:
    import stepscope
    from stepscope.rules import build_rules
    from stepscope.rules._live_metrics import MetricsFeed
    from stepscope.rules.runner import Runner

    write_synthetic_job(str(tmp_path / "j"), SyntheticJob(name="j", gpus=1))
    job = stepscope.open(str(tmp_path / "j"))
    end = float(job.meta.get("end_time") or 0.0)
    runner = Runner(job, build_rules([{"name": "StepOutlier"}]), clock=lambda: end)
    metrics = JobMetrics("j")
    runner.observe(MetricsFeed(metrics, runner.faults))
    runner.scan()
    runner.scan()  # nothing new: nothing counted twice
    runner.final()
    found = samples(render([metrics]))
    steps = job.steps()
    for phase, rows in steps.groupby("phase"):
        got = [v for (n, ls), v in found.items()
               if n == "stepscope_step_seconds_count" and ("phase", phase) in ls]  # fmt: skip
        assert sum(got) == len(rows) > 0
    assert value(found, "stepscope_rule_status", job="j", rule="StepOutlier") in (0, 1)
    assert any(n == "stepscope_gpu_utilization_percent" for n, _ in found)
