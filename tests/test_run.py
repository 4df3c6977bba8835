"""`stepscope run` end to end: real training scripts in real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests

MLP = str(SCRIPTS / "mlp.py")


def _show(path: object) -> dict:
    out = subprocess.run(
        [str(BIN / "stepscope"), "show", "--json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.process
def test_steps_phases_split_and_init(run_job):
    r = run_job(
        [
            MLP,
            "--steps",
            "30",
            "--eval-every",
            "10",
            "--eval-batches",
            "3",
            "--sleep-before",
            "1.0",
            "--stall-at",
            "5",
            "--stall-s",
            "0.4",
            "--slow-data",
            "0.002",
        ],
        "--no-rules",
    )
    assert r.code == 0, r.stderr
    # The script's own output passes through untouched: its one JSON line, nothing else.
    assert r.stdout.strip().splitlines() == [json.dumps(r.result())]
    assert all(
        line.startswith("stepscope: ")
        for line in r.stderr.strip().splitlines()
        if "stepscope" in line
    )
    job = stepscope.open(r.job_path)
    train, evals = job.steps(phase="train"), job.steps(phase="eval")
    assert list(train["step"]) == list(range(30))
    assert len(evals) == r.result()["evals"] == 9
    # Steps tile the loop: each starts where the previous step (train or eval) ended.
    both = job.steps().sort_values("start")
    assert (both["start"].to_numpy()[1:] - both["end"].to_numpy()[:-1]).max() < 1e-6
    parts = train[["data_wait", "forward", "backward", "optimizer", "other"]].sum(axis=1)
    assert ((parts - train["duration"]).abs() < 1e-4).all()
    assert (train[["data_wait", "forward", "backward", "optimizer"]] > 0).all().all()
    # Injected: a 0.4 s stall before optimizer.step() of step 5 lands in "other";
    # 16 samples x 2 ms per batch in the data loader land in "data_wait".
    assert train.loc[train["step"] == 5, "other"].iloc[0] >= 0.4
    assert train["other"].drop(train.index[train["step"] == 5]).max() < 0.4
    assert (train["data_wait"] >= 16 * 0.002).all()
    summary = _show(r.job_path)
    assert summary["status"] == "Completed" and summary["exit_code"] == 0
    assert summary["steps"]["count"] == 30 and summary["steps"]["by_rank"] == {"0": 30}
    assert summary["init_seconds"] >= 1.0  # the script slept 1 s before its first step
    assert summary["finalization_seconds"] >= 0
    for key in ("name", "path", "status", "exit_code", "init_seconds"):
        assert key in summary
    assert summary["system"]["interval_ms"] in (None, 500)


@pytest.mark.process
def test_gradient_accumulation_counts_optimizer_steps(run_job):
    r = run_job([MLP, "--steps", "10", "--accum", "2"], "--no-rules")
    assert r.code == 0, r.stderr
    assert r.result()["forwards"] == 20
    train = stepscope.open(r.job_path).steps(phase="train")
    assert len(train) == 10
    assert (train["backward"] > 0).all()


@pytest.mark.process
def test_hugging_face_trainer_counts_max_steps(run_job):
    r = run_job([str(SCRIPTS / "hf_trainer.py"), "8"], "--no-rules")
    assert r.code == 0, r.stderr
    assert r.result()["global_step"] == 8
    steps = stepscope.open(r.job_path).steps()
    assert (steps["phase"] == "train").sum() == 8
    assert (steps["phase"] == "eval").sum() == 6  # 2 evaluations x 3 batches of 4


@pytest.mark.process
def test_python_dash_m(run_job):
    env = env_for_tests(PYTHONPATH=str(SCRIPTS))
    r = run_job(["-m", "mlp", "--steps", "5"], "--no-rules", env=env)
    assert r.code == 0, r.stderr
    assert len(stepscope.open(r.job_path).steps(phase="train")) == 5


@pytest.mark.process
def test_failure_exit_code_and_status(run_job):
    r = run_job([MLP, "--steps", "10", "--fail-at", "3"], "--no-rules")
    assert r.code == 1
    assert "injected failure" in r.stderr
    job = stepscope.open(r.job_path)
    assert job.meta["status"] == "Failed" and job.meta["exit_code"] == 1
    assert len(job.steps(phase="train")) == 3
    # The reason carries the exception's last line, from the rank's own record.
    (rank,) = [json.loads(p.read_text()) for p in (r.job_path / "ranks").glob("*.json")]
    assert rank["status"] == "Failed"
    assert job.meta["reason"] == f"the command exited with code 1: {rank['error']}"
    assert rank["error"] == "RuntimeError: injected failure"


@pytest.mark.process
def test_bad_interval_is_a_clear_error(tmp_path):
    p = subprocess.run(
        [
            str(BIN / "stepscope"),
            "run",
            "-o",
            str(tmp_path),
            "--interval-ms",
            "700",
            "--",
            sys.executable,
            MLP,
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2
    assert "700" in p.stderr and "100, 200, 500, 1000, 5000, 60000" in p.stderr
    assert "Traceback" not in p.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.process
def test_unknown_command_is_a_clear_error(tmp_path):
    p = subprocess.run(
        [str(BIN / "stepscope"), "run", "-o", str(tmp_path), "--", "no-such-program-xyz"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "command not found" in p.stderr


@pytest.mark.parametrize("command", [["python", "-m", "pkg.train"], ["python", "train.py"]])
def test_default_job_name(command):
    from stepscope.cli._run import job_name as _job_name

    assert _job_name(command).startswith("train-")


@pytest.mark.process
def test_helpers_yield_the_cores_to_the_training(tmp_path):
    """The sampler and the live rule runner: lower priority, one numeric thread."""
    import psutil

    from stepscope.process._background import HELPER_NICE

    # The training runs until the test is done looking: on a loaded machine the helpers
    # took more than the 6 s a fixed-length script gave them to show up.
    go = tmp_path / "go"
    script = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)"
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp_path), "--job", "nice", "--"]
    launcher = psutil.Popen([*cmd, sys.executable, "-c", script, str(go)], env=env_for_tests())
    try:
        helpers: dict[str, psutil.Process] = {}
        deadline = time.monotonic() + 120  # a hang's bound, not a measure: both are up in ~2 s
        while time.monotonic() < deadline:
            for child in launcher.children():
                line = " ".join(child.cmdline())
                for kind in ("stepscope.sampler.main", "stepscope.rules.runner"):
                    if kind in line:
                        helpers[kind] = child
            if len(helpers) == 2 and all(h.nice() == HELPER_NICE for h in helpers.values()):
                break
            time.sleep(0.05)
        assert set(helpers) == {"stepscope.sampler.main", "stepscope.rules.runner"}
        training = next(c for c in launcher.children() if str(go) in c.cmdline())
        assert training.nice() == 0  # the training keeps its priority
        for helper in helpers.values():
            assert helper.nice() == HELPER_NICE
            assert helper.environ()["OPENBLAS_NUM_THREADS"] == "1"
            # threads started after the start inherit the priority (DuckDB's, pyarrow's)
            assert all(psutil.Process(t.id).nice() == HELPER_NICE for t in helper.threads()), (
                helper.cmdline()
            )
    finally:
        go.touch()
        assert launcher.wait(timeout=60) == 0
