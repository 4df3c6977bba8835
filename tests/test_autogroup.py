"""The other processes' CPU split by the job's autogroup (``others_cpu_group`` and
``others_groups`` of ``system/``, docs/format.md): a real ``stepscope run`` beside a
busy loop in the job's session, and its twin beside the same loop in a session of its
own (``setsid``: a new autogroup where the kernel has autogroup on)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import stepscope
from conftest import BIN, env_for_tests

pytestmark = pytest.mark.process

ENABLED = Path("/proc/sys/kernel/sched_autogroup_enabled")


def autogroup_on() -> bool:
    try:
        return ENABLED.read_text().strip() == "1" and Path("/proc/self/autogroup").exists()
    except OSError:
        return False


LOOP = f"{sys.executable} -c 'while True: pass'"


def recorded(tmp_path: Path, own_session: bool) -> tuple[list[float], list[int]]:
    """The scans' split while a 10 s job sleeps beside a busy loop. The job runs in a
    session of its own (``setsid``), so that nothing else of the test run (another
    xdist worker's tests) shares its autogroup; the loop is started in that session or
    in one more of its own."""
    job = (f"{BIN / 'stepscope'} run -o {tmp_path} --job job --interval-ms 500 -- "
           f"{sys.executable} -c 'import time; time.sleep(10)'")  # fmt: skip
    loop = f"setsid {LOOP}" if own_session else LOOP
    script = f"{loop} & LOOP=$!; {job}; CODE=$?; kill $LOOP; exit $CODE"
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=240,
                          env=env_for_tests(), start_new_session=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    system = stepscope.open(str(tmp_path / "job")).system()
    scans = system.dropna(subset=["others_cpu_group"])
    return scans["others_cpu_group"].tolist(), scans["others_groups"].astype(int).tolist()


@pytest.mark.skipif(not autogroup_on(), reason="the kernel's autogroup is off or absent here")
def test_a_competitor_in_another_session_is_counted_apart(tmp_path: Path) -> None:
    # The same session as the job: its group.
    same, _ = recorded(tmp_path / "same", own_session=False)
    # setsid: another autogroup, busy beside the job's.
    apart, groups = recorded(tmp_path / "apart", own_session=True)
    assert same and apart  # scans every 3 s: at least two in 10 s
    # A busy loop takes at least a fifth of a core even on a loaded 2-core machine.
    assert max(same) >= 20.0, same
    # In its own session it is no longer the job's group's (the job's session holds
    # only the shell and the job), and it is one more busy group.
    assert max(apart) < 20.0 <= max(same), (apart, same)
    assert min(groups) >= 1, groups
