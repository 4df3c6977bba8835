"""The other processes' CPU split by the job's autogroup (``others_cpu_group`` and
``others_groups`` of ``system/``, docs/format.md): a real ``stepscope run`` beside a
busy loop in the job's session, and its twin beside the same loop in a session of its
own (``setsid``: a new autogroup where the kernel has autogroup on)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import stepscope
from conftest import stepscope_run

pytestmark = pytest.mark.process

ENABLED = Path("/proc/sys/kernel/sched_autogroup_enabled")


def autogroup_on() -> bool:
    try:
        return ENABLED.read_text().strip() == "1" and Path("/proc/self/autogroup").exists()
    except OSError:
        return False


@contextmanager
def busy_loop(own_session: bool) -> Iterator[int]:
    loop = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], start_new_session=own_session
    )
    try:
        yield loop.pid
    finally:
        loop.kill()
        loop.wait()


def recorded(tmp_path: Path, own_session: bool) -> tuple[list[float], list[int]]:
    """The scans' split while a 10 s job sleeps beside a busy loop."""
    with busy_loop(own_session):
        args = ["-c", "import time; time.sleep(10)"]
        done = stepscope_run(tmp_path, args, "--interval-ms", "500")
    assert done.code == 0, done.stderr
    system = stepscope.open(str(done.job_path)).system()
    scans = system.dropna(subset=["others_cpu_group"])
    return scans["others_cpu_group"].tolist(), scans["others_groups"].astype(int).tolist()


@pytest.mark.skipif(not autogroup_on(), reason="the kernel's autogroup is off or absent here")
def test_a_competitor_in_another_session_is_counted_apart(tmp_path: Path) -> None:
    # The same session as the job (the test's, inherited by stepscope run): its group.
    same, _ = recorded(tmp_path / "same", own_session=False)
    # setsid: another autogroup, busy beside the job's.
    apart, groups = recorded(tmp_path / "apart", own_session=True)
    assert same and apart  # scans every 3 s: at least two in 10 s
    # A busy loop takes at least a fifth of a core even on a loaded 2-core machine.
    assert max(same) >= 20.0, same
    # In its own session it is no longer the job's group's (what else of the test's
    # session runs is the test itself, waiting), and it is one more busy group.
    assert max(apart) < 20.0 <= max(same), (apart, same)
    assert min(groups) >= 1, groups
