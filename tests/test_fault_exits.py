"""Abrupt exits (issue 31): a rank that ends without its agent's end (``os._exit(0)``,
SIGKILL, a crash in native code) is recorded as such by the launcher: its record says
``Abrupt``, a fault says what may be lost, job.json and ``show``/``ls`` say the data
is incomplete, and the training's result is a bare run's. A plain end is the silent
twin: nothing of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests
from test_fault_matrix import state_hash
from test_torchrun import DDP, needs_netns
from test_torchrun import _in_netns as in_netns
from test_torchrun import _stepscope as torchrun_run

ABRUPT = str(SCRIPTS / "abrupt.py")
ARGS = ["--steps", "31"]  # the end comes right after step 30 (numbered from 0)
FLUSH_S = 2.0  # the agent's flush interval on a local folder
pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The hash of the state a bare run (no stepscope) saves before its ``os._exit``."""
    save = tmp_path_factory.mktemp("bare") / "bare.pt"
    cmd = [sys.executable, ABRUPT, "exit0", *ARGS, "--save", str(save)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=240, env=env_for_tests())
    return state_hash(save)


def run(tmp: Path, end: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp / "out"), "--job", "j", "--"]
    cmd += [sys.executable, ABRUPT, end, *ARGS, "--save", str(tmp / "traced.pt")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env_for_tests())


def cli(*args: str) -> str:
    cmd = [str(BIN / "stepscope"), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env_for_tests())
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("end", "code", "status", "how"),
    [
        ("exit0", 0, "Completed", "exited with code 0"),
        ("sigkill", 137, "Failed", "killed by SIGKILL"),
        ("segv", 139, "Failed", "killed by SIGSEGV"),
    ],
)
def test_an_abrupt_end_is_recorded_and_said_incomplete(
    tmp_path: Path, bare: str, end: str, code: int, status: str, how: str
) -> None:
    done = run(tmp_path, end)
    assert done.returncode == code, done.stderr
    job_dir = tmp_path / "out" / "j"
    rank = json.loads((job_dir / "ranks" / "rank-0.json").read_text())
    assert rank["status"] == "Abrupt" and rank["recorded_by"] == "launcher"
    assert rank["exit_code"] == (0 if end == "exit0" else None)
    assert rank["signal"] == {"exit0": None, "sigkill": "SIGKILL", "segv": "SIGSEGV"}[end]
    assert 0 <= rank["lost_seconds"] <= FLUSH_S
    job = stepscope.open(str(job_dir))
    assert job.meta["status"] == status and job.meta.get("incomplete") is True
    reason = str(job.meta.get("incomplete_reason"))
    assert f"rank 0 {how} without its agent's end" in reason
    assert "ended without flushing; up to" in reason and "s of steps lost" in reason
    (fault,) = [f for f in job.faults() if f.get("component") == "abrupt-exit"]
    assert fault["rank"] == 0 and fault["error"] == reason
    assert fault["lost_seconds"] == rank["lost_seconds"]
    assert "the job's data is incomplete" in done.stderr
    assert f"data       INCOMPLETE: {reason}" in cli("show", str(job_dir))
    assert f"{status} (incomplete)" in cli("ls", str(tmp_path / "out"))
    shown = json.loads(cli("show", str(job_dir), "--json"))
    assert shown["incomplete"] == reason and shown["duration_seconds"] > 0
    assert state_hash(tmp_path / "traced.pt") == bare


def test_a_plain_end_is_complete(tmp_path: Path, bare: str) -> None:
    """The silent twin: the same training ending normally is neither Abrupt nor
    incomplete, and records no abrupt-exit fault."""
    done = run(tmp_path, "normal")
    assert done.returncode == 0, done.stderr
    job_dir = tmp_path / "out" / "j"
    rank = json.loads((job_dir / "ranks" / "rank-0.json").read_text())
    assert rank["status"] == "Exited" and rank["exit_code"] == 0
    job = stepscope.open(str(job_dir))
    assert job.meta["status"] == "Completed" and "incomplete" not in job.meta
    assert not [f for f in job.faults() if f.get("component") == "abrupt-exit"]
    assert len(job.steps()) == 31  # every step flushed at a plain end
    assert "INCOMPLETE" not in cli("show", str(job_dir))
    assert "(incomplete)" not in cli("ls", str(tmp_path / "out"))
    assert state_hash(tmp_path / "traced.pt") == bare


@needs_netns
@pytest.mark.parametrize(
    ("end", "status"), [("exit0", "Completed"), ("sigkill", "Failed"), (None, "Completed")]
)
def test_an_abrupt_rank_under_torchrun_is_recorded(
    tmp_path: Path, end: str | None, status: str
) -> None:
    """Under torchrun the launcher does not own the ranks' processes: at its end, a
    rank of its node whose record still says ``Running`` (its process reaped by
    torchrun) ended without its agent's end. Rank 1 ends so after the last collective;
    the plain end (None) is the silent twin."""
    train = [DDP, "--steps", "40"] + (["--abrupt-rank", "1", "--abrupt", end] if end else [])
    p = in_netns(torchrun_run(tmp_path, "t", "--nproc-per-node", "2", "--", *train), tmp_path)
    assert p.returncode == (0 if status == "Completed" else 1), p.stderr[-3000:]
    job = stepscope.open(str(tmp_path / "t"))
    ranks = [json.loads((tmp_path / "t" / "ranks" / f"rank-{r}.json").read_text()) for r in (0, 1)]
    # rank 0 ends by itself, or torchrun stops it once rank 1 was killed: recorded either way
    assert ranks[0]["status"] in ("Exited", "Terminated") and job.meta["status"] == status
    abrupt = [f for f in job.faults() if f.get("component") == "abrupt-exit"]
    if end is None:
        assert ranks[1]["status"] == "Exited" and not abrupt
        assert "incomplete" not in job.meta and "incomplete" not in p.stderr
        assert "INCOMPLETE" not in cli("show", str(tmp_path / "t"))
        return
    assert ranks[1]["status"] == "Abrupt" and ranks[1]["recorded_by"] == "launcher"
    assert 0 <= ranks[1]["lost_seconds"] <= FLUSH_S
    reason = str(job.meta.get("incomplete_reason"))
    assert job.meta.get("incomplete") is True
    assert reason.startswith("rank 1 ended without its agent's end")
    assert "ended without flushing; up to" in reason
    (fault,) = abrupt
    assert fault["rank"] == 1 and fault["error"] == reason
    assert f"the job's data is incomplete: {reason}" in p.stderr
    assert f"data       INCOMPLETE: {reason}" in cli("show", str(tmp_path / "t"))
    if status == "Failed":  # torchrun saw the signal; the record names the rank
        assert job.meta["reason"].startswith("rank 1 on node ")
