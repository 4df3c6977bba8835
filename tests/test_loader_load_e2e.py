"""DataLoaderWorkers under a competing CPU load, end to end (issue 30): a real ``stepscope
run`` of tests/scripts/mlp.py with one DataLoader worker, beside one busy loop per
core, each in a session of its own (another user's programs), during its steps only.

* The worker decodes (``--burn-data``): starved by the loops it runs about half of
  each core it gets and waits for one the rest, and the loop waits for it. It is
  saturated (running or waiting for a core), and more workers would take part of the
  busy cores back (Linux's autogroup weighs the job's session on each core its tasks
  run on): the rule fires and prices a saving of at least ``min_cost_s``
  (measured: a second worker saved 1.7-4 s of 5.6-10 s of steps; docs/rules.md).
* Its twin, with the same parameters and load: the worker sleeps (``--slow-data``,
  slow storage). It waits for no core and uses none: not saturated, the rule stays
  silent, having judged the steps (the wait is DataLoading's).

No wall-clock assertion: the verdicts and what the job folder records.
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

CONFIG = """
[[rules]]
name = "DataLoaderWorkers"
"""
# 16 samples a batch at 2 ms each: 32 ms of loading a step beside ~1 ms of compute.
JOB = ["--steps", "150", "--workers", "1"]


@pytest.fixture
def cpu_load() -> Iterator[BusyLoops]:
    """One busy loop per core, each in a session of its own; the test starts and stops
    them, and holds the machine alone from its setup on (conftest: the fixture's name)."""
    loops = BusyLoops(1, own_session=True)
    try:
        yield loops
    finally:
        loops.stop()


def verdict(tmp_path: Path, load: BusyLoops, loading: str) -> dict[str, Any]:
    config = tmp_path / "stepscope.toml"
    config.write_text(CONFIG)
    script = [str(SCRIPTS / "mlp.py"), *JOB, loading, "0.002"]
    done = stepscope_run_beside(tmp_path, script, load, "--config", str(config))
    assert done.code == 0, done.stderr
    result: dict[str, Any] = json.loads(
        (done.job_path / "rules" / "DataLoaderWorkers.json").read_text()
    )
    return result


def test_a_starved_decoding_worker_fires_with_a_fair_share_saving(
    tmp_path: Path, cpu_load: BusyLoops
) -> None:
    res = verdict(tmp_path, cpu_load, "--burn-data")
    assert res["status"] == "IssuesFound", res
    assert "(saturated)" in res["message"]
    # the saving: more than min_cost_s (1 s), less than the wait (the decoding stays)
    assert 1.0 <= res["saving_seconds"] < res["cost_seconds"], res
    assert "fair share" in res["details"]["saving_bound"], res


def test_a_sleeping_worker_under_the_same_load_stays_silent(
    tmp_path: Path, cpu_load: BusyLoops
) -> None:
    res = verdict(tmp_path, cpu_load, "--slow-data")
    assert res["status"] == "NoIssuesFound" and res["datapoints"] > 0, res
