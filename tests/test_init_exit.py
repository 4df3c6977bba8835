"""A job opened with ``stepscope.init()`` and never closed is ended when the process
exits; a rule whose input the configuration does not save is named at the start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SCRIPTS, env_for_tests, stepscope_run

pytestmark = pytest.mark.process

MLP = str(SCRIPTS / "mlp.py")
_SCRIPT = """
import runpy, sys, stepscope
from stepscope.config import StepscopeConfig
grads = {{"name": "gradients", "reductions": {reductions!r}}}
config = StepscopeConfig.from_dict(
    {{"debugger": {{"collections": [grads]}}, "rules": [{{"name": "VanishingGradient"}}]}})
stepscope.init(output={out!r}, job={job!r}, config=config)   # no `with`, no shutdown()
sys.argv = ["mlp.py", "--steps", "4"]
runpy.run_path({mlp!r}, run_name="__main__")
{end}
"""


def _init_job(tmp: Path, job: str, end: str, reductions: str = "l2, abs_max") -> tuple[int, str]:
    script = tmp / f"{job}.py"
    script.write_text(
        _SCRIPT.format(reductions=reductions, out=str(tmp), job=job, mlp=MLP, end=end)
    )
    p = subprocess.run(
        [sys.executable, str(script)], env=env_for_tests(), capture_output=True, text=True
    )
    return p.returncode, p.stderr


def _records(job: Path) -> tuple[dict[str, object], dict[str, object]]:
    meta = json.loads((job / "job.json").read_text())
    return meta, json.loads((job / "ranks" / "rank-0.json").read_text())


@pytest.mark.parametrize(
    ("end", "code", "status", "rank_status"),
    [
        ("", 0, "Completed", "Exited"),
        ("sys.exit(3)", 3, "Failed", "Failed"),
        ("raise RuntimeError('boom')", 1, "Failed", "Failed"),
    ],
)
def test_init_without_close_is_ended_at_exit(
    tmp_path: Path, end: str, code: int, status: str, rank_status: str
) -> None:
    rc, stderr = _init_job(tmp_path, "open", end)
    assert rc == code, stderr
    meta, rank = _records(tmp_path / "open")
    assert (meta["status"], meta["exit_code"]) == (status, code)
    assert isinstance(meta["end_time"], float) and meta["end_time"] > meta["start_time"]
    assert (rank["status"], rank["exit_code"]) == (rank_status, code)
    # the start named the rule that could judge nothing, once, on stderr and in job.json
    warned = [line for line in stderr.splitlines() if "VanishingGradient reads" in line]
    assert len(warned) == 1 and warned[0].startswith("stepscope: warning: ")
    assert meta["config_warnings"] == [warned[0].removeprefix("stepscope: warning: ")]


def test_init_with_abs_mean_saved_warns_of_nothing(tmp_path: Path) -> None:
    rc, stderr = _init_job(tmp_path, "fine", "", reductions="l2, abs_max, abs_mean")
    assert rc == 0, stderr
    meta, rank = _records(tmp_path / "fine")
    assert "warning" not in stderr
    assert "config_warnings" not in meta
    assert (meta["status"], rank["status"]) == ("Completed", "Exited")


_TOML = """
[[debugger.collections]]
name = "gradients"
reductions = "{reductions}"

[[rules]]
name = "VanishingGradient"
"""


@pytest.mark.parametrize(("reductions", "warns"), [("l2, abs_max", True), ("abs_mean", False)])
def test_run_names_a_rule_its_configuration_cannot_feed(
    tmp_path: Path, reductions: str, warns: bool
) -> None:
    toml = tmp_path / "stepscope.toml"
    toml.write_text(_TOML.format(reductions=reductions))
    run = stepscope_run(tmp_path, [MLP, "--steps", "3"], "--config", str(toml), "--no-rules")
    assert run.code == 0, run.stderr
    warned = [line for line in run.stderr.splitlines() if "VanishingGradient reads" in line]
    meta = json.loads((run.job_path / "job.json").read_text())
    assert meta.get("config_warnings", []) == [
        w.removeprefix("stepscope: warning: ") for w in warned
    ]
    assert len(warned) == (1 if warns else 0)
    if warns:
        assert 'reductions = "l2, abs_max, abs_mean"' in warned[0]
