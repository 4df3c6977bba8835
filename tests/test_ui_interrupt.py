"""A Ctrl-C at any moment of ``stepscope ui`` ends it with one line, never a traceback.

Its imports take about a second (more on a loaded machine), then uvicorn starts: a
Ctrl-C in either printed Python's traceback before (a docs block's Ctrl-C fell there
under CI load). The moments are found from the process, not from a clock.
"""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import BIN, env_for_tests
from stepscope.testing import SyntheticJob, write_synthetic_job

pytestmark = pytest.mark.process


def _start(root: Path, sigint: signal.Handlers = signal.SIG_DFL) -> subprocess.Popen[str]:
    """``stepscope ui`` as a terminal's foreground command: SIGINT at its default. A
    shell without job control starts what it puts in the background (``&``) with
    SIGINT ignored, and the ignored disposition is inherited: a test runner started
    so (a CI rehearsal run with ``&``) would pass it on, and Python then raises no
    KeyboardInterrupt at all."""
    cmd = [str(BIN / "stepscope"), "ui", str(root), "--port", "0"]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for_tests(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )  # fmt: skip


def _importing(proc: subprocess.Popen[str]) -> None:
    """The dashboard's imports are under way: pyarrow's library is mapped."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/maps") as f:
            if "libarrow" in f.read():
                return
        time.sleep(0.001)
    raise AssertionError("pyarrow never loaded")


def _starting(proc: subprocess.Popen[str]) -> None:
    """The socket is bound and the URL printed; uvicorn is starting."""
    assert proc.stdout is not None
    assert "serving" in proc.stdout.readline()


def _serving(proc: subprocess.Popen[str]) -> None:
    """uvicorn answers."""
    assert proc.stdout is not None
    url = proc.stdout.readline().split(" at ", 1)[1].strip()
    with urllib.request.urlopen(url, timeout=60) as r:
        assert r.status == 200


MOMENTS: dict[str, Callable[[subprocess.Popen[str]], None]] = {
    "importing": _importing,
    "starting": _starting,
    "serving": _serving,
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_ctrl_c_ends_ui_without_a_traceback(tmp_path: Path, moment: str) -> None:
    write_synthetic_job(str(tmp_path / "runs" / "done"), SyntheticJob(name="done", hours=0.01))
    proc = _start(tmp_path / "runs")
    try:
        MOMENTS[moment](proc)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err
    if moment == "serving":  # uvicorn's own end: the dashboard stopped, not a failure
        assert (proc.returncode, err.strip()) == (0, "stepscope ui: stopped")
    else:  # before uvicorn took over SIGINT: the CLI's Ctrl-C (the shell's 130)
        assert (proc.returncode, err.strip()) in ((130, "stepscope: interrupted"),
                                                  (0, "stepscope ui: stopped")), err  # fmt: skip


def test_started_with_ctrl_c_ignored_ui_keeps_it_ignored(tmp_path: Path) -> None:
    """A background ``stepscope ui &`` of a script (SIGINT ignored, inherited) outlives
    a Ctrl-C meant for the foreground, as a background program should; SIGTERM ends
    it. The twin, SIGINT at its default, is ``test_ctrl_c_ends_ui_without_a_traceback``."""
    write_synthetic_job(str(tmp_path / "runs" / "done"), SyntheticJob(name="done", hours=0.01))
    proc = _start(tmp_path / "runs", signal.SIG_IGN)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split(" at ", 1)[1].strip()
        with urllib.request.urlopen(url, timeout=60) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGINT)
        with urllib.request.urlopen(url, timeout=60) as r:  # still serving
            assert r.status == 200 and proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    assert (proc.returncode, err.strip()) == (0, "stepscope ui: stopped"), err
