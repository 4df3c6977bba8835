"""Rule messages say what is true: early in a job, numbers that show the comparison,
advice that fits the job (no GPU advice on a CPU-only job)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import rules_data as rd
from rules_data import judge
from stepscope.cli import main
from stepscope.rules import Status
from stepscope.rules._text import num, versus

GOLDEN = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("value", "threshold", "unit", "said"),
    [
        (0.236, 0.2, "min", "0.24 min (> 0.2 min)"),  # issue 19: "0.2 min (> 0.2 min)"
        (20.04, 20, "%", "20.04% (> 20%)"),  # digits until it differs from the threshold
        (95.3, 70, "%", "95% (> 70%)"),
        (1.52, 1.5, "x", "1.52x (> 1.5x)"),
        (10.0, 10, "points", "10 points (> 10 points)"),  # equal: no digits invented
    ],
)
def test_versus_shows_the_difference(value: float, threshold: float, unit: str, said: str) -> None:
    assert versus(value, threshold, unit) == said


def test_num_never_rounds_onto_the_threshold() -> None:
    assert num(0.2000001, 0.2) == "0.2"  # past MAX_DIGITS the difference is not worth it
    assert num(49.77) == "50" and num(49.77, 50) == "49.8"
    assert num(float("inf")) == "inf"


def test_max_initialization_time_message_keeps_its_digits(tmp_path: Path) -> None:
    store = rd.new_job(tmp_path / "j")
    rd.node_info(store, gpus=0)
    rd.write_process_start(store, time=rd.T0)
    rd.write_steps(store, rd.steps_frame(20, start=rd.T0 + 0.236 * 60))
    res = judge(tmp_path / "j", "MaxInitializationTime", threshold=0.2)
    assert res.status is Status.ISSUES_FOUND
    assert "took 0.24 min (> 0.2 min)" in res.findings[0].message
    silent = judge(tmp_path / "j", "MaxInitializationTime", threshold=0.25)
    assert silent.status is Status.NO_ISSUES_FOUND and silent.datapoints > 0


@pytest.mark.parametrize(
    ("rule", "mode", "said"),
    [
        ("StepOutlier", "both", "waiting for the first 10 steps (skip_steps): the newest "),
        ("StepOutlier", "train", "waiting for the first 10 train steps (skip_steps)"),
        ("DataLoading", "", "waiting for the first 1 training steps (skip_steps)"),
    ],
)
def test_early_in_a_job_rules_say_they_wait(
    tmp_path: Path, rule: str, mode: str, said: str
) -> None:
    store = rd.new_job(tmp_path / "j", status="Running")
    rd.node_info(store, gpus=0)
    few = 10 if rule == "StepOutlier" else 1
    rd.write_steps(store, rd.steps_frame(few))
    params = {"mode": mode} if mode else {}
    res = judge(tmp_path / "j", rule, **params)
    assert res.status is Status.NOT_APPLICABLE
    assert said in (res.reason or ""), res.reason
    assert "no " not in (res.reason or "")  # never "no steps" while steps exist
    assert f"step {few - 1}" in (res.reason or "")


def test_without_steps_rules_say_none_recorded_yet(tmp_path: Path) -> None:
    store = rd.new_job(tmp_path / "j", status="Running")
    rd.node_info(store, gpus=0)
    rd.write_system(store, rd.system_frame(100))
    for rule, said in (
        ("StepOutlier", "no steps recorded yet"),
        ("OverallFrameworkMetrics", "no steps recorded yet"),
    ):
        assert judge(tmp_path / "j", rule).reason == said


def two_ranks(path: Path, gpus: int) -> Path:
    """Rank 1's forward takes 3x its peer's: a straggler, on a node with ``gpus`` GPUs."""
    store = rd.new_job(path)
    rd.node_info(store, gpus=gpus)
    rd.write_steps(store, rd.steps_frame(200, rank=0))
    rd.write_steps(store, rd.steps_frame(200, rank=1, duration=0.4, forward=0.2))
    return path


@pytest.mark.parametrize("gpus", [0, 8])
def test_straggler_advice_fits_the_job(tmp_path: Path, gpus: int) -> None:
    res = judge(two_ranks(tmp_path / "j", gpus), "Straggler")
    assert res.status is Status.ISSUES_FOUND, res.message
    message = res.findings[0].message
    assert "rank 1" in message
    assert ("look at its GPU" in message) is bool(gpus), message
    if not gpus:
        assert "CPU contention on its node" in message


def test_show_gives_cpu_as_a_share_of_the_node_with_its_cores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 30: "training CPU 49.9 %" (of a core) beside "other processes' CPU 75.0 %"
    (of the node); now both of the node, the cores in brackets; JSON keeps proc_cpu."""
    job = tmp_path / "starving"
    shutil.copytree(GOLDEN / "starving", job)
    assert main(["show", str(job)]) == 0
    labels = {"CPU total", "training CPU", "other processes' CPU"}
    out = capsys.readouterr().out.splitlines()
    lines = {ln[2:24].strip(): ln for ln in out if ln[2:24].strip() in labels}
    assert set(lines) == labels
    for line in lines.values():
        assert re.search(r" \d+\.\d % \(\d\.\d\d cores?\) +\d+\.\d % \(\d\.\d\d cores?\)$", line)
    assert main(["show", str(job), "--json"]) == 0
    node = json.loads(capsys.readouterr().out)["system"]["nodes"]["vm"]
    cores, m = node["cores"], node["metrics"]
    assert cores == 2
    assert m["proc_cpu_node"]["p50"] == pytest.approx(m["proc_cpu"]["p50"] / cores, rel=1e-6)
    assert " 1.0 % (0.02 core) " in lines["training CPU"]  # 2.0% of a core, recorded


def test_show_gives_stepscopes_own_cpu_as_a_share_of_the_node_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """own_cpu is recorded as % of one core (40: 0.4 core): shown of the node's 4 cores,
    as the training's and the other processes' CPU beside it."""
    from test_rules_cpu import cpu_job

    job = cpu_job(tmp_path / "job", [], own_cpu=40.0)
    assert main(["show", str(job)]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "stepscope's own CPU" in ln]
    assert re.search(r" 10\.0 % \(0\.40 core\) +10\.0 % \(0\.40 core\)$", line), line
