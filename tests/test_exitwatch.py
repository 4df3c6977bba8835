"""Waiting for processes without polling: pidfds, the psutil fallback, procfs children."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import psutil
import pytest

from stepscope.process import _exitwatch
from stepscope.process._exitwatch import ExitWatch, pidfd, wait_child
from stepscope.sampler._probe import ProcessTree, descendant_pids

SLEEPER = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))"]

pytestmark = pytest.mark.process


@pytest.fixture(params=["pidfd", "polling"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "polling":  # a system without pidfds
        monkeypatch.setattr(_exitwatch, "pidfd", lambda _pid: None)
    elif pidfd(os.getpid()) is None:
        pytest.skip("this kernel has no pidfd_open")
    return str(request.param)


def test_exit_watch_names_the_process_that_ended(mode: str) -> None:
    short = subprocess.Popen([*SLEEPER, "0.3"])
    long = subprocess.Popen([*SLEEPER, "30"])
    try:
        watch = ExitWatch({"short": short.pid, "long": long.pid, "none": None})
        assert bool(watch.fds) == (mode == "pidfd")
        assert watch.ended() is None
        if watch.fds:  # the pidfd wakes a select as the process ends
            ready, _, _ = select.select(watch.fds, [], [], 10)
            assert ready
        short.wait()  # reaped or a zombie: ended either way
        assert watch.ended() == "short"
        watch.close()
    finally:
        long.kill()
        long.wait()


def test_exit_watch_of_a_pid_already_gone(mode: str) -> None:
    gone = subprocess.Popen([*SLEEPER, "0"])
    gone.wait()
    assert ExitWatch({"gone": gone.pid}).ended() == "gone"


def test_wait_child_returns_the_code_or_none_after_the_timeout(mode: str) -> None:
    # The child ends only when its stdin closes: no clock decides what the test sees.
    code = "import sys; sys.stdin.read(); sys.exit(3)"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    assert child.stdin is not None
    fd = _exitwatch.pidfd(child.pid)
    assert wait_child(child, fd, 0.05) is None  # back after the timeout, not at the exit
    assert child.poll() is None
    child.stdin.close()
    assert wait_child(child, fd, 60) == 3
    if fd is not None:
        os.close(fd)


def test_descendants_from_procfs_match_psutil() -> None:
    tree = subprocess.Popen(["bash", "-c", "sleep 30 & (sleep 30 & wait) & wait"])
    try:
        deadline = time.monotonic() + 10
        want: set[int] = set()
        while time.monotonic() < deadline and len(want) < 4:  # bash, sleep, subshell, sleep
            want = {c.pid for c in psutil.Process(tree.pid).children(recursive=True)}
            want.add(tree.pid)
            time.sleep(0.05)
        found = descendant_pids(os.getpid())
        assert found is not None, "procfs children files missing"
        assert want <= set(found)
        members = ProcessTree(tree.pid)._list()
        assert {p.pid for p in members} == want
    finally:
        for p in psutil.Process(tree.pid).children(recursive=True):
            p.kill()
        tree.kill()
        tree.wait()
