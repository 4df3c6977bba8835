"""The CPU rules on real training under ``stepscope run`` (tests/scripts/cpu_train.py).

One configuration for every run: the healthy run is the silent twin of each rule,
judged with the parameters under which the planted problem was found. The machine
may be loaded by other processes: the planted problems are large enough to show
through (a sleep per sample, a sleep per step, twice the threads of the cores).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import stepscope
from conftest import SCRIPTS, stepscope_run

pytestmark = pytest.mark.process

CONFIG = """
[[rules]]
name = "CPUBoundThreads"

[[rules]]
name = "DataLoaderWorkers"

[[rules]]
name = "PythonOverhead"
"""
RULES = ("CPUBoundThreads", "DataLoaderWorkers", "PythonOverhead")
CORES = len(os.sched_getaffinity(0))


def run(tmp: Path, *args: str) -> tuple[Path, dict[str, dict[str, Any]]]:
    config = tmp / "stepscope.toml"
    config.write_text(CONFIG)
    done = stepscope_run(tmp, [str(SCRIPTS / "cpu_train.py"), *args], "--config", str(config))
    assert done.code == 0, done.stderr
    rules = done.job_path / "rules"
    return done.job_path, {n: json.loads((rules / f"{n}.json").read_text()) for n in RULES}


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    # one thread per usable core, data in memory, nothing between the calls
    return run(tmp_path_factory.mktemp("healthy"), "--steps", "60", "--threads", str(CORES))


def silent(results: dict[str, dict[str, Any]], rule: str) -> None:
    res = results[rule]
    assert res["status"] == "NoIssuesFound" and res["datapoints"] > 0, res


def test_the_agent_records_threads_and_the_data_loader(healthy: Any) -> None:
    job, _ = healthy
    events = stepscope.open(str(job)).events(kinds=["threads", "dataloader"])
    details = {k: json.loads(d) for k, d in zip(events["kind"], events["detail"], strict=True)}
    assert details["threads"]["intra_op"] == CORES  # set by the script after torch's import
    assert details["threads"]["affinity"] >= 1 and details["threads"]["cpu_count"] >= 1
    assert details["dataloader"]["num_workers"] == 0
    assert len(events) == 2  # the loader's settings once, not once an epoch


def test_a_loader_without_workers_fires_data_loader_workers(tmp_path: Path, healthy: Any) -> None:
    _, results = run(tmp_path, "--steps", "40", "--width", "1024", "--slow-data", "0.002")
    res = results["DataLoaderWorkers"]
    assert res["status"] == "IssuesFound", res
    assert "num_workers=0" in res["findings"][0]["message"] and res["cost_seconds"] > 0
    silent(healthy[1], "DataLoaderWorkers")


def test_python_between_steps_fires_python_overhead(tmp_path: Path, healthy: Any) -> None:
    _, results = run(tmp_path, "--steps", "40", "--step-sleep", "0.1")
    res = results["PythonOverhead"]
    assert res["status"] == "IssuesFound", res
    assert res["findings"][0]["value"] > 30 and res["cost_seconds"] > 0
    silent(healthy[1], "PythonOverhead")


def test_more_threads_than_cores_fires_cpu_bound_threads(tmp_path: Path, healthy: Any) -> None:
    threads = 2 * CORES
    # 150 steps: the workers live several of the sampler's listing periods (1 s), so
    # their CPU is counted (a process counts from the reading after the one finding it)
    args = ["--steps", "150", "--width", "1024", "--threads", str(threads)]
    job, results = run(tmp_path, *args, "--workers", "2", "--burn-data", "0.0005")
    res = results["CPUBoundThreads"]
    assert res["status"] == "IssuesFound", res
    assert f"oversubscribed: {threads} torch thread(s)" in res["findings"][0]["message"]
    silent(healthy[1], "CPUBoundThreads")
    # the sampler tells the workers (forked: same command line) from the training process
    system = stepscope.open(str(job)).system()
    assert (system["proc_cpu"] - system["proc_cpu_main"]).sum() > 0
