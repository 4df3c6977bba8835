"""``stepscope demo``: the rules name each of its three planted problems, and stay silent
on the same job with the problems fixed (same rules, same steps)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import stepscope
from conftest import BIN, env_for_tests, stepscope_run
from stepscope.cli import demo_train
from stepscope.cli._demo import PLANTED, RULES

pytestmark = pytest.mark.process
NAMED = [rule for _, rule in PLANTED]


def _verdicts(job: Path) -> dict[str, dict[str, Any]]:
    """The final verdicts the live runner wrote into the job's rules/ folder."""
    return {f.stem: json.loads(f.read_text()) for f in (job / "rules").glob("*.json")}


def _config(tmp_path: Path) -> str:
    """The demo's rule set as a TOML file."""
    lines = []
    for rule in RULES:
        params = rule["parameters"]
        assert isinstance(params, dict)
        body = ", ".join(f"{k} = {v}" for k, v in params.items())
        lines += ["[[rules]]", f'name = "{rule["name"]}"', f"parameters = {{ {body} }}"]
    path = tmp_path / "demo.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_demo_names_each_planted_problem(tmp_path: Path) -> None:
    cmd = [str(BIN / "stepscope"), "demo", "-o", str(tmp_path / "runs")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env_for_tests())
    assert p.returncode == 0, p.stderr
    (job,) = (tmp_path / "runs").iterdir()
    verdicts = _verdicts(job)
    assert {r: verdicts[r]["status"] for r in NAMED} == dict.fromkeys(NAMED, "IssuesFound")
    # Each checkpoint's pause is its own outlier, in the training step after it.
    every = demo_train.CHECKPOINT_EVERY
    checkpoints = set(range(every, demo_train.STEPS, every))
    outliers = {f["steps"][0] for f in verdicts["StepOutlier"]["findings"] if f["rank"] == 0}
    assert checkpoints <= outliers, outliers
    assert verdicts["DataLoading"]["findings"][0]["value"] > 20
    # The output ends with the checklist: every planted problem found.
    tail = p.stdout.strip().splitlines()[-len(PLANTED) :]
    assert [line.split()[:2] for line in tail] == [["found", rule] for rule in NAMED], tail
    assert (job / "report.html").exists()


def test_fixed_demo_job_has_no_finding(tmp_path: Path) -> None:
    r = stepscope_run(tmp_path, ["-m", "stepscope.cli.demo_train", "--fixed"], "--config",
                      _config(tmp_path))  # fmt: skip
    assert r.code == 0, r.stderr
    verdicts = _verdicts(r.job_path)
    assert {n: verdicts[n]["status"] for n in NAMED} == dict.fromkeys(NAMED, "NoIssuesFound")
    assert all(verdicts[n]["datapoints"] > 0 for n in NAMED)


def test_the_planted_start_alone_is_over_the_demo_threshold() -> None:
    """The planted start is a wait, which load does not stretch: it fires at any load."""
    from stepscope.cli._demo import INIT_THRESHOLD_MIN

    assert demo_train.SLOW_START_S > INIT_THRESHOLD_MIN * 60 + 1
    assert f"{demo_train.SLOW_START_S:g} s" in PLANTED[0][0]


def _init_s(job: Path) -> float:
    """Process start to first step (wall time), read with pyarrow alone."""
    opened = stepscope.open(str(job))
    events = opened.arrow("events", ["time", "kind"]).to_pylist()
    start = min(e["time"] for e in events if e["kind"] == "process_start")
    return min(opened.arrow("steps/rank-0", ["start"]).column("start").to_pylist()) - start


def test_under_load_the_fixed_demo_stays_silent_and_its_twin_fires(
    tmp_path: Path, busy_loops: list[int]
) -> None:
    """A busy machine stretches the CPU work of any start (the fixed job fired
    MaxInitializationTime at a load average of 10 on 2 cores); not the planted wait."""
    config = _config(tmp_path)
    fixed = stepscope_run(tmp_path, ["-m", "stepscope.cli.demo_train", "--fixed"], "--config",
                          config, job="fixed")  # fmt: skip
    twin = stepscope_run(tmp_path, ["-m", "stepscope.cli.demo_train"], "--config", config,
                         job="twin")  # fmt: skip
    assert fixed.code == 0 and twin.code == 0, fixed.stderr + twin.stderr
    quiet, loud = _verdicts(fixed.job_path), _verdicts(twin.job_path)
    init = {"fixed": _init_s(fixed.job_path), "twin": _init_s(twin.job_path)}
    assert {n: quiet[n]["status"] for n in NAMED} == dict.fromkeys(NAMED, "NoIssuesFound"), init
    assert all(quiet[n]["datapoints"] > 0 for n in NAMED)
    # the twin's start and data loader (waits): StepOutlier's 0.8 s checkpoints can
    # drown in the noise of steps on a machine this busy
    waits = ["MaxInitializationTime", "DataLoading"]
    assert {n: loud[n]["status"] for n in waits} == dict.fromkeys(waits, "IssuesFound"), init
    assert init["twin"] > demo_train.SLOW_START_S  # the fixed one's: as the load makes it
    print(f"under load: start of the fixed demo {init['fixed']:.1f} s, twin {init['twin']:.1f} s")
