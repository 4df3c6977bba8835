"""Real training under ``stepscope run`` with injected problems; the rule that must fire.

The rules run live beside each job and write their final verdicts at its end.
All runs share one configuration, so the healthy run's silence is judged with
exactly the parameters under which each problem was found.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import SCRIPTS, stepscope_run
from stepscope.cli._rules import rules_text

pytestmark = pytest.mark.process

CONFIG = """
[[rules]]
name = "StepOutlier"
parameters = { n_outliers = 0, min_excess_s = 1.0 }  # a 4 s stall; ignore GC hiccups

[[rules]]
name = "MaxInitializationTime"
parameters = { threshold = 0.25 }  # minutes

[[rules]]
name = "DataLoading"
parameters = { threshold = 35 }  # a tiny model's own loader takes ~20% on a loaded machine
"""
RULES = ("StepOutlier", "MaxInitializationTime", "DataLoading")


def run_job(tmp_path: Path, *script_args: str) -> dict[str, dict[str, Any]]:
    config = tmp_path / "stepscope.toml"
    config.write_text(CONFIG)
    mlp = str(SCRIPTS / "mlp.py")
    run = stepscope_run(tmp_path, [mlp, *script_args], "--config", str(config))
    assert run.code == 0, run.stderr
    rules = run.job_path / "rules"
    return {name: json.loads((rules / f"{name}.json").read_text()) for name in RULES}


def test_stalled_steps_fire_step_outlier(tmp_path: Path) -> None:
    results = run_job(tmp_path, "--steps", "60", "--stall-at", "40", "--stall-s", "4")
    outlier = results["StepOutlier"]
    assert outlier["status"] == "IssuesFound"
    assert [f["steps"][0] for f in outlier["findings"]] == [40]


def test_slow_start_fires_max_initialization_time(tmp_path: Path) -> None:
    # a wait (load does not shorten it) 2 s over the 15 s threshold
    results = run_job(tmp_path, "--steps", "30", "--sleep-before", "17")
    init = results["MaxInitializationTime"]
    assert init["status"] == "IssuesFound" and init["findings"][0]["value"] > 0.25


def test_starving_data_loader_fires_data_loading(tmp_path: Path) -> None:
    results = run_job(tmp_path, "--steps", "40", "--slow-data", "0.02")
    loading = results["DataLoading"]
    assert loading["status"] == "IssuesFound" and loading["findings"][0]["value"] > 50


def test_healthy_run_fires_nothing(tmp_path: Path) -> None:
    results = run_job(tmp_path, "--steps", "60")
    for name, res in results.items():
        assert res["status"] == "NoIssuesFound", (name, res["message"])
        assert res["datapoints"] > 0
    text = rules_text(str(tmp_path / "job"), [], [], True)
    assert {r["rule"] for r in json.loads(text)} == set(RULES)


@pytest.mark.parametrize(
    ("rules", "said"),
    [
        ('name = "StepOutlierr"', "Unknown rule 'StepOutlierr'"),
        ('name = "StepOutlier"\nparameters = { nope = 1 }', "Unknown parameter 'nope'"),
        ('name = "Mine"\nsource = "missing.py"\nrule_to_invoke = "Mine"', "missing.py"),
    ],
)
def test_a_bad_rule_set_starts_no_job(tmp_path: Path, rules: str, said: str) -> None:
    config = tmp_path / "stepscope.toml"
    config.write_text(f"[[rules]]\n{rules}\n")
    mlp = str(SCRIPTS / "mlp.py")
    run = stepscope_run(tmp_path, [mlp, "--steps", "5"], "--config", str(config))
    assert run.code == 2 and said in run.stderr and "No job was started" in run.stderr
    assert not run.job_path.exists() and "Traceback" not in run.stderr


def test_a_good_rule_set_of_the_same_shape_runs(tmp_path: Path) -> None:
    config = tmp_path / "stepscope.toml"
    config.write_text('[[rules]]\nname = "StepOutlier"\nparameters = { stddev = 4 }\n')
    run = stepscope_run(
        tmp_path, [str(SCRIPTS / "mlp.py"), "--steps", "5"], "--config", str(config)
    )
    assert run.code == 0, run.stderr
    verdict = json.loads((run.job_path / "rules" / "StepOutlier.json").read_text())
    assert verdict["parameters"]["stddev"] == 4
