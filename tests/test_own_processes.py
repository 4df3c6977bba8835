"""stepscope's own processes (the sampler, and the launcher with its helpers such as the
live rule runner) are never "other processes": they are ``own_cpu`` (docs/format.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from stepscope.sampler._others import OtherProcesses

pytestmark = pytest.mark.process

# A launcher: a training child that sleeps, and a helper that keeps a core busy (as the
# rule runner does while it evaluates); ``tag`` in its argv names it stepscope's or not.
LAUNCHER = """
import subprocess, sys, time
training = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
helper = subprocess.Popen([sys.executable, "-c", "while True: pass"])
print(training.pid, helper.pid, flush=True)
time.sleep(120)
"""


@pytest.fixture
def launcher(request: pytest.FixtureRequest) -> Iterator[tuple[int, int, int]]:
    tag = request.param
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, tag], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    training, helper = map(int, proc.stdout.readline().split())
    try:
        yield proc.pid, training, helper
    finally:
        for pid in (training, helper):
            psutil.Process(pid).kill()
        proc.kill()
        proc.wait()
        proc.stdout.close()


def scan(
    root: int, parent: int, helper: int
) -> tuple[OtherProcesses, list[dict[str, Any]], float | None]:
    """Scans once a second until the helper has had CPU enough to be seen (a machine
    shared with other tests may starve it for a while), at most 60 s."""
    others = OtherProcesses(root, every_s=0.0, top=1000, launcher=parent)
    others.scan(time.monotonic())
    others.own_cpu(time.monotonic())
    rows: list[dict[str, Any]] = []
    own: float | None = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(1.0)
        rows = others.scan(time.monotonic())
        own = others.own_cpu(time.monotonic())
        if helper in {r["pid"] for r in rows} or (own or 0.0) >= 20.0:
            break
    return others, rows, own


@pytest.mark.parametrize("launcher", ["stepscope-launcher"], indirect=True)
def test_a_stepscope_launcher_s_helpers_are_own_cpu_not_others(
    launcher: tuple[int, int, int],
) -> None:
    parent, training, helper = launcher
    others, rows, own = scan(training, parent, helper)
    assert others.launcher == parent
    assert {parent, helper, os.getpid()} <= others.own and training not in others.own
    assert not {r["pid"] for r in rows} & others.own  # never among the others
    assert own is not None and own >= 20.0  # the helper's busy loop is stepscope's CPU


@pytest.mark.parametrize("launcher", ["another-program"], indirect=True)
def test_another_program_s_children_stay_other_processes(
    launcher: tuple[int, int, int],
) -> None:
    parent, training, helper = launcher
    others, rows, _ = scan(training, parent, helper)
    assert others.launcher is None and others.own == {os.getpid()}
    assert helper in {r["pid"] for r in rows}  # its busy loop is another process
