"""Busy-loop processes beside a real ``stepscope run``, during its steps only.

Beside busy processes a job's start-up (Python, torch, stepscope's helpers) and end take
most of a test's time and buy it nothing: tests/scripts/mlp.py ``--wait-for`` holds the
first step until the load is started and says when the last step is done.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import BIN, Run, env_for_tests


class BusyLoops:
    """``per_core`` busy-loop processes per core; ``own_session``: each in a session of
    its own, as a program started from another terminal (with Linux's autogroup
    scheduling a session shares the CPU with the others as a whole)."""

    def __init__(self, per_core: int = 1, own_session: bool = False) -> None:
        self.per_core, self.own_session = per_core, own_session
        self.loops: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        cmd = [sys.executable, "-c", "while True: pass"]
        for _ in range(self.per_core * (os.cpu_count() or 1)):
            self.loops.append(subprocess.Popen(cmd, start_new_session=self.own_session))

    def stop(self) -> None:
        for p in self.loops:
            p.kill()
            p.wait()
        self.loops = []


def _wait_for_file(path: Path, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 300
    while not path.exists() and proc.poll() is None:
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def stepscope_run_beside(tmp: Path, script: list[str], load: BusyLoops | None, *opts: str) -> Run:
    """``stepscope run -o tmp --job job [opts]`` of mlp.py with ``load`` during its steps:
    started once the script is ready to take its first step, stopped after its last."""
    go = tmp / "go"
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp), "--job", "job", *opts]
    cmd += ["--", sys.executable, *script, "--wait-for", str(go)]
    with open(tmp / "run.out", "w") as out, open(tmp / "run.err", "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env_for_tests())
    try:
        _wait_for_file(tmp / "go.ready", proc, "the script's start-up")
        if load is not None:
            load.start()
        go.touch()
        _wait_for_file(tmp / "go.done", proc, "the script's last step")
        if load is not None:
            load.stop()
        proc.wait(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out_text, err_text = (tmp / "run.out").read_text(), (tmp / "run.err").read_text()
    return Run(proc.returncode, out_text, err_text, tmp / "job")
