"""Real training under ``stepscope run``: stalls below StepOutlier's ``n_outliers`` fire
it when they cost ``min_cost_share`` of the step time (issue 30), and the diagnosis in
``stepscope show --json`` names them; the twin's one cheap stall does not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import SCRIPTS, stepscope_run
from stepscope.cli import main

pytestmark = pytest.mark.process

# Both runs judged alike: n_outliers (10) and min_cost_share (5 %) at their defaults; a
# stall must be 0.25 s over its neighbours (a loaded machine's hiccups are not stalls).
CONFIG = """
[[rules]]
name = "StepOutlier"
parameters = { min_excess_s = 0.25 }
"""


def step_outlier(tmp_path: Path, *script_args: str) -> dict[str, Any]:
    config = tmp_path / "stepscope.toml"
    config.write_text(CONFIG)
    run = stepscope_run(tmp_path, [str(SCRIPTS / "mlp.py"), *script_args], "--config", str(config))
    assert run.code == 0, run.stderr
    verdict: dict[str, Any] = json.loads((run.job_path / "rules/StepOutlier.json").read_text())
    return verdict


def test_four_costly_stalls_fire_step_outlier_on_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # stalls at steps 45, 90, 135 and 180: 2 s, within the 10 tolerated
    res = step_outlier(tmp_path, "--steps", "200", "--stall-every", "45", "--stall-s", "0.5")
    assert res["status"] == "IssuesFound" and res["triggers"] == 4, res["message"]
    assert str(res["message"]).startswith("4 outlier step(s), within the 10 tolerated, but ")
    assert res["details"]["fired_on_cost"] is True
    assert main(["show", str(tmp_path / "job"), "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)["diagnosis"]
    assert "StepOutlier" in [e["rule"] for e in entries]


def test_one_cheap_stall_stays_tolerated(tmp_path: Path) -> None:
    # the twin: one 0.3 s stall among 100 steps of 0.1 s (about 3% of the step time)
    res = step_outlier(
        tmp_path, "--steps", "100", "--step-sleep", "0.1", "--stall-at", "50", "--stall-s", "0.3"
    )
    assert res["status"] == "NoIssuesFound" and res["datapoints"] > 0, res["message"]
    assert res["triggers"] == 1 and "fired_on_cost" not in res["details"]
