"""StepOutlier on a loaded machine: real training beside one busy process per core.

A 0.6 s stall every 40th step of 20 ms steps is found while other processes take
the CPU; the same job without stalls, under the same load and parameters, is not. The
load runs from just before the first step to just after the last (tests/busy.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from busy import BusyLoops, stepscope_run_beside
from conftest import SCRIPTS

pytestmark = pytest.mark.process

STEPS, EVERY = 400, 40
CONFIG = """
[[rules]]
name = "StepOutlier"
parameters = { n_outliers = 4 }
"""


@pytest.fixture
def cpu_load() -> Iterator[BusyLoops]:
    """One busy loop per core, during the job's steps (the test holds the machine alone
    from its setup on: conftest, the fixture's name)."""
    loops = BusyLoops()
    try:
        yield loops
    finally:
        loops.stop()


def run(tmp_path: Path, load: BusyLoops, *args: str) -> dict[str, Any]:
    config = tmp_path / "stepscope.toml"
    config.write_text(CONFIG)
    script = [str(SCRIPTS / "mlp.py"), "--steps", str(STEPS), "--step-sleep", "0.02", *args]
    job = stepscope_run_beside(tmp_path, script, load, "--config", str(config))
    assert job.code == 0, job.stderr
    verdict: dict[str, Any] = json.loads((job.job_path / "rules" / "StepOutlier.json").read_text())
    return verdict


def test_periodic_stalls_are_found_under_cpu_load(tmp_path: Path, cpu_load: BusyLoops) -> None:
    res = run(tmp_path, cpu_load, "--stall-every", str(EVERY), "--stall-s", "0.6")
    assert res["status"] == "IssuesFound", res["message"]
    found = {f["steps"][0] for f in res["findings"]}
    stalls = set(range(EVERY, STEPS, EVERY))  # 9 stalls
    assert len(found & stalls) >= 7 and len(found - stalls) <= 2, sorted(found)
    assert res["cost_seconds"] >= 0.5 * 0.6 * len(found & stalls)


def test_the_same_job_without_stalls_is_silent_under_cpu_load(
    tmp_path: Path, cpu_load: BusyLoops
) -> None:
    res = run(tmp_path, cpu_load)
    assert res["status"] == "NoIssuesFound", res["message"]
    assert res["datapoints"] > 0 and res["triggers"] <= 4
