"""Fault matrix, control channel: hostile files dropped into control/ of a real run.

Each row starts a real training under ``stepscope run``, drops its fault into the
job's ``control/`` folder while training runs (under the names of all three
readers: ``profile-`` for the agent, ``stop-`` for the launcher, ``config-`` for
the sampler), beside a valid profile request, and checks what the matrix in
docs/design.md ("Fault matrix", "Control channel") promises: training exits 0
with a state_dict identical to a bare run's, every step is in the job, the
valid request is answered, and each refusal is recorded in ``faults/control-*``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests
from stepscope.jobfolder import control
from stepscope.store import open_store

MLP = str(SCRIPTS / "mlp.py")
STEPS = 250
ARGS = ["--steps", str(STEPS), "--step-sleep", "0.03"]  # about 8 s: several polls of each reader
READERS = ("profile", "stop", "config")
ROWS = ("fifo", "dev_zero", "huge", "deep", "ack_link")

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The same training without stepscope: the result every row must reproduce."""
    torch = pytest.importorskip("torch")
    saved = tmp_path_factory.mktemp("bare") / "bare.pt"
    subprocess.run(
        [sys.executable, MLP, *ARGS, "--save", str(saved)],
        check=True,
        timeout=300,
        env=env_for_tests(),
        capture_output=True,
    )
    state: dict[str, object] = torch.load(saved)
    return state


def _wait_for(what, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := what():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _drop(control_dir: Path, row: str) -> list[str]:
    """Put the row's fault into control/; the names of the request files it made."""
    if row == "ack_link":
        return []
    names = [f"{reader}-0000000000001-{row[:8]:0<8}.json" for reader in READERS]
    for name in names:
        path = control_dir / name
        if row == "fifo":
            os.mkfifo(path)
        elif row == "dev_zero":
            path.symlink_to("/dev/zero")
        elif row == "huge":
            with open(path, "wb") as f:
                f.truncate(100 * 1024 * 1024)  # sparse
        else:
            path.write_text("[" * 5000 + "]" * 5000)
    return names


def _refused(job: Path) -> str:
    """Everything the job's control fault records say."""
    return " ".join(p.read_text() for p in sorted((job / "faults").glob("control-*.json")))


def _run_with(tmp: Path, row: str) -> tuple[subprocess.CompletedProcess[str], Path, dict]:
    job, saved, outside = tmp / "job", tmp / "run.pt", tmp / "outside"
    outside.mkdir()
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp), "--job", "job", "--no-rules", "--"]
    proc = subprocess.Popen(
        [*cmd, sys.executable, MLP, *ARGS, "--save", str(saved)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for_tests(),
    )
    seen: dict[str, object] = {"outside": outside, "saved": saved}
    try:
        _wait_for(lambda: (job / "steps").exists())
        (job / "control").mkdir(exist_ok=True)
        if row == "ack_link":
            (job / "control" / "ack").symlink_to(outside)
        names = _drop(job / "control", row)
        store = open_store(job)
        valid = control.request_profile(store, [{"kind": "python", "num_steps": 1}], "test")
        seen["names"], seen["valid"] = names, valid
        if row == "ack_link":
            _wait_for(lambda: "control/ack is a symbolic link" in _refused(job))
        else:
            _wait_for(lambda: all(n in _refused(job) for n in names))
            every = [*names, valid]
            _wait_for(lambda: all(control.acknowledgement(store, n) for n in every))
            seen["acks"] = {n: control.acknowledgement(store, n) for n in every}
        seen["steps_at_fault"] = proc.poll() is None  # still training when all were refused
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), job, seen


@pytest.mark.parametrize("row", ROWS)
def test_control_fault_leaves_training_untouched(tmp_path, bare, row):
    torch = pytest.importorskip("torch")
    run, job_path, seen = _run_with(tmp_path, row)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1])["steps"] == STEPS
    state = torch.load(seen["saved"])
    assert state.keys() == bare.keys() and all(torch.equal(state[k], bare[k]) for k in bare)
    job = stepscope.open(job_path)
    assert job.status == "Completed" and job.meta["exit_code"] == 0
    assert len(job.steps(phase="train")) == STEPS  # no step lost
    assert seen["steps_at_fault"], "the job ended before the readers refused the fault"
    faults = [f for f in job.faults() if f["component"] == "control"]
    assert faults and all(f["count"] >= 1 for f in faults)
    assert not [f for f in job.faults() if f["component"] != "control"]
    if row == "ack_link":
        assert list(Path(seen["outside"]).iterdir()) == []  # nothing written outside the job
        return
    acks = seen["acks"]
    for name in seen["names"]:  # each reader answered its own
        assert acks[name] is not None and acks[name]["accepted"] is False, (name, acks)
    events = job.events(kinds=["profiling_request"])
    assert set(events["detail"].map(lambda d: json.loads(d)["request"])) >= {
        seen["names"][0],
        seen["valid"],
    }
    valid = acks[seen["valid"]]
    assert valid["accepted"], valid  # the valid request of the same poll was not lost
