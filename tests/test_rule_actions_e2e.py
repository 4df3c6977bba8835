"""Rule actions with real training: a planted stall fires StepOutlier under
``stepscope run``, and the live rule runner POSTs the finding to a webhook on
127.0.0.1 and hands it to a command; a dead endpoint beside them is a recorded fault
and the training ends with the same weights, bit for bit, as a bare run. The silent
twin (same rule, same parameters, no stall) sends nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import SCRIPTS, env_for_tests, stepscope_run
from notify_server import Hook, dead_url, hook_server

pytestmark = pytest.mark.process

# What the command got: its stdin and its STEPSCOPE_* variables, one JSON line a call.
RECORDER = """import json, os, sys
doc = {"stdin": json.loads(sys.stdin.read()),
       "env": {k: v for k, v in os.environ.items() if k.startswith("STEPSCOPE_")}}
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(doc) + "\\n")
"""
STALL = ("--stall-at", "40", "--stall-s", "4")


def _run(tmp: Path, hook: Hook, dead: str, *stall: str) -> tuple[Path, Path]:
    recorder, got = tmp / "recorder.py", tmp / "command.jsonl"
    recorder.write_text(RECORDER)
    command = json.dumps([sys.executable, str(recorder), str(got)])
    config = tmp / "stepscope.toml"
    config.write_text(
        "[[rules]]\n"
        'name = "StepOutlier"\n'
        "parameters = { n_outliers = 0, min_excess_s = 1.0 }  # a 4 s stall\n"
        f'actions = [{{webhook = "{hook.url}/hook"}}, {{command = {command}}},\n'
        f'           {{webhook = "{dead}", kind = "slack", timeout_s = 2}}]\n'
    )
    weights = tmp / "weights.pt"
    args = [str(SCRIPTS / "mlp.py"), "--steps", "60", *stall, "--save", str(weights)]
    run = stepscope_run(tmp, args, "--config", str(config))
    assert run.code == 0, run.stderr
    return run.job_path, got


def test_a_firing_rule_is_posted_and_run_once(tmp_path: Path) -> None:
    dead = dead_url()
    with hook_server() as hook:
        job, got = _run(tmp_path, hook, dead, *STALL)
    verdict = json.loads((job / "rules" / "StepOutlier.json").read_text())
    assert verdict["status"] == "IssuesFound"
    # the webhook: one POST (one kind of finding), the finding of step 40
    assert len(hook.received) == 1, hook.received
    path, body, _ = hook.received[0]
    assert path == "/hook" and isinstance(body, dict)
    assert (body["rule"], body["status"], body["job"]) == ("StepOutlier", "IssuesFound", "job")
    assert body["finding"]["steps"] == [40, 40] and body["message"]
    # the command: the same finding on stdin, and in its environment
    (line,) = got.read_text().splitlines()
    called = json.loads(line)
    assert called["stdin"] == body
    env = called["env"]
    assert (env["STEPSCOPE_RULE"], env["STEPSCOPE_STATUS"]) == ("StepOutlier", "IssuesFound")
    assert env["STEPSCOPE_JOB"] == "job" and env["STEPSCOPE_MESSAGE"] == body["message"]
    # the dead endpoint: a fault of the job, and the training is untouched
    faults = [json.loads(p.read_text()) for p in (job / "faults").glob("rule-action-*.json")]
    assert len(faults) == 1 and faults[0]["error"].startswith(f"webhook {dead.split('/')[2]}")
    bare = tmp_path / "bare.pt"
    cmd = [sys.executable, str(SCRIPTS / "mlp.py"), "--steps", "60", "--save", str(bare)]
    subprocess.run(cmd, check=True, capture_output=True, env=env_for_tests(), timeout=120)
    a, b = torch.load(bare), torch.load(tmp_path / "weights.pt")
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_silent_twin_sends_nothing(tmp_path: Path) -> None:
    with hook_server() as hook:
        job, got = _run(tmp_path, hook, dead_url())
    verdict = json.loads((job / "rules" / "StepOutlier.json").read_text())
    assert verdict["status"] == "NoIssuesFound" and verdict["datapoints"] > 0
    assert hook.received == [] and not got.exists()
    assert not list((job / "faults").glob("rule-action-*.json"))
