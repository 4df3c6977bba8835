"""How jobs end: stop requests, signals, a killed launcher, faults inside stepscope."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests
from stepscope.jobfolder import control
from stepscope.store import open_store

MLP = str(SCRIPTS / "mlp.py")
LONG = [MLP, "--steps", "100000", "--step-sleep", "0.01"]

pytestmark = pytest.mark.process


def _start(
    tmp: Path, args: list[str], job: str = "job", sigint_ignored: bool = False
) -> subprocess.Popen[str]:
    cmd = [
        str(BIN / "stepscope"),
        "run",
        "-o",
        str(tmp),
        "--job",
        job,
        "--no-rules",
        "--",
        sys.executable,
        *args,
    ]
    # a shell ignores SIGINT in what it starts with `&` (no job control), and exec keeps it
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    return subprocess.Popen(
        cmd,
        env=env_for_tests(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore,
    )


def _wait_for_steps(job_path: Path, n: int = 1, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (job_path / "job.json").exists() and len(stepscope.open(job_path).steps()) >= n:
            return
        time.sleep(0.3)
    raise AssertionError(f"no steps in {job_path} after {timeout} s")


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "started-with-&"])
def test_stop_request_ends_job_as_stopped(tmp_path, alone, sigint_ignored):
    """The stop request's SIGINT ends the script (130), also where the launcher was
    started with SIGINT ignored (a CI step's `&`): before, the script inherited the
    ignored SIGINT and always died of the SIGTERM 10 s later (143)."""
    proc = _start(tmp_path, LONG, sigint_ignored=sigint_ignored)
    _wait_for_steps(tmp_path / "job")
    name = control.request_stop(open_store(tmp_path / "job"), "enough", by="test")
    _out, err = proc.communicate(timeout=60)
    job = stepscope.open(tmp_path / "job")
    assert job.meta["status"] == "Stopped", err
    assert "enough" in job.meta["reason"] and "test" in job.meta["reason"]
    assert proc.returncode == 130, (proc.returncode, err)  # its KeyboardInterrupt
    assert "KeyboardInterrupt" in err
    assert control.acknowledgement(job.store, name)["accepted"] is True
    kinds = set(job.events()["kind"])
    assert "agent_stop" in kinds  # the agent flushed on the way out


def test_sigterm_is_forwarded_and_last_steps_are_flushed(tmp_path, alone):
    proc = _start(tmp_path, LONG)
    _wait_for_steps(tmp_path / "job")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    job = stepscope.open(tmp_path / "job")
    assert job.meta["status"] == "Stopped" and "SIGTERM" in job.meta["reason"]
    events = job.events()
    stop = events[events["kind"] == "agent_stop"]
    assert len(stop) == 1
    # Every step the agent counted is on disk, although SIGTERM came between flushes.
    counted = int(stop["detail"].map(lambda d: __import__("json").loads(d)["steps"]).iloc[0])
    assert len(job.steps(phase="train")) == counted > 0


def test_killed_launcher_is_not_running_forever(tmp_path):
    proc = _start(tmp_path, LONG)
    job_path = tmp_path / "job"
    _wait_for_steps(job_path)
    time.sleep(2.5)  # at least one heartbeat
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.kill()
    proc.wait(timeout=30)
    try:
        job = stepscope.open(job_path)
        assert job.meta["status"] == "Running" and job.meta["alive"] is True
        later = stepscope.Job(job.store, now=lambda: time.time() + 60)
        assert later.meta["status"] == "Unknown" and later.meta["alive"] is False
        assert "launcher lost, training state unknown" in later.meta["reason"]
    finally:
        for c in children:
            c.kill()
        psutil.wait_procs(children, timeout=30)
        proc.communicate(timeout=30)


def test_broken_output_never_changes_training(tmp_path):
    """A file where the steps folder must be: faults recorded, model bit-for-bit the same."""
    args = [MLP, "--steps", "250", "--step-sleep", "0.02"]
    bare = tmp_path / "bare.pt"
    subprocess.run(
        [sys.executable, *args, "--save", str(bare)],
        check=True,
        capture_output=True,
        env=env_for_tests(),
    )
    watched = tmp_path / "watched.pt"
    proc = _start(tmp_path, [*args, "--save", str(watched)])
    steps_dir = tmp_path / "job" / "steps" / "rank-0"
    _wait_for_steps(tmp_path / "job")
    for f in steps_dir.iterdir():
        f.unlink()
    steps_dir.rmdir()
    steps_dir.write_text("not a folder")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert err.count("writer failed") == 1  # logged once
    a, b = torch.load(bare), torch.load(watched)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    faults = stepscope.open(tmp_path / "job").faults()
    writer = [f for f in faults if f["component"] == "writer"]
    assert writer and writer[0]["count"] >= 1 and "rank-0" in writer[0]["error"]


def test_import_does_nothing():
    code = (
        "import sys, threading; import stepscope; "
        "print(threading.active_count(), sorted(m for m in ('torch', 'pyarrow', 'duckdb', "
        "'pandas', 'psutil') if m in sys.modules), len(sys.meta_path))"
    )
    base = subprocess.run(
        [sys.executable, "-c", "import sys; print(len(sys.meta_path))"],
        capture_output=True,
        text=True,
        check=True,
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env_for_tests(),
    )
    threads, modules, meta = out.stdout.rsplit(" ", 1)[0], out.stdout, out.stdout.split()[-1]
    assert out.stdout.startswith("1 [] "), out.stdout
    assert meta == base.stdout.strip(), (threads, modules)


def test_init_api_without_launcher(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import runpy, sys, stepscope\n"
        f"with stepscope.init(output={str(tmp_path)!r}, job='api'):\n"
        f"    sys.argv = ['mlp.py', '--steps', '7']\n"
        f"    runpy.run_path({MLP!r}, run_name='__main__')\n"
    )
    subprocess.run(
        [sys.executable, str(script)], check=True, env=env_for_tests(), capture_output=True
    )
    job = stepscope.open(tmp_path / "api")
    assert job.meta["status"] == "Completed"
    assert len(job.steps(phase="train")) == 7
    assert os.path.exists(tmp_path / "api" / "heartbeat")
