"""The exit code a rank records for itself (``ranks/rank-<r>.json``), read when its
launcher is gone: ``raise SystemExit(n)`` passes no hook, yet its code is the job's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from conftest import BIN, env_for_tests

pytestmark = pytest.mark.process

# Waits for the test to kill its launcher, then ends as asked: no sys.exit, no hook.
SCRIPT = """
import pathlib, sys, time
go = pathlib.Path(sys.argv[1])
while not go.exists():
    time.sleep(0.05)
{end}
"""


def _wait_for(check: Callable[[], object], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _status(job: Path) -> str:
    return str(json.loads((job / "job.json").read_text())["status"])


@pytest.mark.parametrize(
    ("end", "status", "code"),
    [
        ("raise SystemExit(3)", "Failed", 3),
        ("def main():\n    exit(4)\nmain()", "Failed", 4),  # site's exit(): raise inside
        ("raise SystemExit", "Completed", 0),  # the silent twin: no code is 0
    ],
)
def test_raise_system_exit_is_recorded_with_its_code_when_the_launcher_is_gone(
    tmp_path: Path, end: str, status: str, code: int
) -> None:
    script, go, job = tmp_path / "train.py", tmp_path / "go", tmp_path / "out" / "j"
    script.write_text(SCRIPT.format(end=end))
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp_path / "out"), "--job", "j"]
    cmd += ["--no-rules", "--", sys.executable, str(script), str(go)]
    with open(tmp_path / "stderr", "w") as err:  # a pipe would outlive the launcher
        launcher = subprocess.Popen(cmd, stdout=err, stderr=err, env=env_for_tests())
    try:
        _wait_for(lambda: (job / "heartbeat").exists(), "a heartbeat")
        _wait_for(lambda: (job / "ranks").exists() and list((job / "ranks").iterdir()), "rank")
        training = next(
            c for c in psutil.Process(launcher.pid).children() if str(script) in c.cmdline()
        )
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=60)
        go.touch()
        _wait_for(lambda: not training.is_running(), "the training to end")
        _wait_for(lambda: _status(job) != "Running", "the job's end (by the sampler)")
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    meta = json.loads((job / "job.json").read_text())
    assert (meta["status"], meta["exit_code"]) == (status, code), meta
    assert str(meta["reason"]).startswith("launcher lost")
    (rank,) = [json.loads(p.read_text()) for p in (job / "ranks").glob("*.json")]
    assert (rank["status"], rank["exit_code"]) == ("Exited", code)
