"""Every integration at once (issue 35's "done when"): one real training under
``stepscope run`` with Prometheus ``/metrics``, MLflow (a file store), W&B (offline), a
webhook and a command action all on, and its twin with every backend failing (the
metrics port taken, both trackers and the webhook pointing at refused ports, a command
that fails). Each integration gets its part, or leaves a fault record, and in both runs
the trained weights are bit-for-bit those of a bare run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import stepscope
from conftest import SCRIPTS, env_for_tests, stepscope_run
from mlflow_store import QUIET, training_mlflow_run
from notify_server import dead_url, hook_server

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("mlflow_quiet")]
pytest.importorskip("mlflow.tracking")
pytest.importorskip("wandb")

MLP = str(SCRIPTS / "mlp.py")
TRAIN = ["--steps", "60", "--stall-at", "40", "--stall-s", "3"]  # StepOutlier fires


def _config(tmp: Path, webhook: str, command: list[str]) -> str:
    path = tmp / "stepscope.toml"
    path.write_text(
        "[[rules]]\n"
        'name = "StepOutlier"\n'
        "parameters = { n_outliers = 0, min_excess_s = 1.0 }  # the 3 s stall\n"
        f'actions = [{{webhook = "{webhook}", timeout_s = 2}}, '
        f"{{command = {json.dumps(command)}}}]\n"
    )
    return str(path)


def _weights(tmp: Path, name: str, *opts: str, env: dict[str, str] | None = None) -> Path:
    saved = tmp / f"{name}.pt"
    args = [MLP, *TRAIN, "--save", str(saved)]
    if not opts:  # bare: no stepscope
        subprocess.run([sys.executable, *args], check=True, capture_output=True,
                       env=env_for_tests())  # fmt: skip
        return saved
    run = stepscope_run(tmp / name, args, *opts, env=env, timeout=300)
    assert run.code == 0, run.stderr
    return saved


def _same(a: Path, b: Path) -> bool:
    x, y = torch.load(a), torch.load(b)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


@contextmanager
def _taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 held by a listening socket for the block."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_every_integration_on_gets_its_part_and_training_is_bit_identical(
    tmp_path: Path,
) -> None:
    _, client, run_id, mlflow_env = training_mlflow_run(tmp_path)
    got = tmp_path / "command.jsonl"
    command = [sys.executable, "-c", f"import sys; open({str(got)!r}, 'a').write(sys.stdin.read())"]
    env = env_for_tests(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_RUN_ID="all1",
                        **mlflow_env)  # fmt: skip
    bare = _weights(tmp_path, "bare")
    with hook_server() as hook:
        config = _config(tmp_path, f"{hook.url}/hook", command)
        watched = _weights(tmp_path, "on", "--config", config, "--metrics-port", "0",
                           "--mlflow", "--wandb", env=env)  # fmt: skip
    assert _same(bare, watched)
    job = tmp_path / "on" / "job"
    verdict = json.loads((job / "rules" / "StepOutlier.json").read_text())
    assert verdict["status"] == "IssuesFound"
    assert len(hook.received) == 1 and got.read_text().strip()
    tags = client.get_run(run_id).data.tags
    assert tags["stepscope.rule.StepOutlier"] == "IssuesFound"
    assert list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    assert stepscope.open(job).faults() == []  # nothing failed: no record


def test_every_backend_failing_is_a_fault_and_training_is_bit_identical(
    tmp_path: Path,
) -> None:
    dead = dead_url()
    port = int(dead.split(":")[2].split("/")[0])  # refused: nothing listens there
    env = env_for_tests(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{port}", WANDB_MODE="online",
                        WANDB_BASE_URL=f"http://127.0.0.1:{port}", WANDB_API_KEY="0" * 40,
                        WANDB_DIR=str(tmp_path), WANDB_INIT_TIMEOUT="3", **QUIET)  # fmt: skip
    config = _config(tmp_path, dead, [sys.executable, "-c", "raise SystemExit(3)"])
    bare = _weights(tmp_path, "bare")
    with _taken_port() as taken:
        watched = _weights(tmp_path, "failing", "--config", config, "--metrics-port", str(taken),
                           "--mlflow", "--wandb", env=env)  # fmt: skip
    assert _same(bare, watched)
    job = tmp_path / "failing" / "job"
    components = {f["component"] for f in stepscope.open(job).faults()}
    expected = {"metrics-server", "export-mlflow", "export-wandb", "rule-action"}
    assert expected <= components, components
    verdict = json.loads((job / "rules" / "StepOutlier.json").read_text())
    assert verdict["status"] == "IssuesFound"  # the rules went on without them
