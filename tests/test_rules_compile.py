"""TorchCompile on real ``torch.compile`` training under ``stepscope run``
(tests/scripts/compiled.py, the ``eager`` backend: no C++ compiler needed).

The planted run changes its batch size every step under ``dynamic=False`` (dynamo
recompiles until its ``recompile_limit``) and prints in the compiled forward (a graph
break); its silent twin compiles the same model on fixed-size batches, judged with
the same parameters. A job that compiles nothing is NotApplicable, and the agent
never imports ``torch._dynamo`` itself. The planted run trains bit-for-bit as bare.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import stepscope
from conftest import SCRIPTS, env_for_tests, stepscope_run

pytestmark = pytest.mark.process

SCRIPT = str(SCRIPTS / "compiled.py")
CONFIG = (
    '[[rules]]\nname = "TorchCompile"\nparameters = { max_recompiles = 2, max_graph_breaks = 0 }\n'
)
PLANTED = ["--vary", "--break"]


def _run(tmp: Path, name: str, *args: str) -> tuple[Path, dict[str, Any]]:
    config = tmp / "stepscope.toml"
    config.write_text(CONFIG)
    done = stepscope_run(tmp, list(args), "--config", str(config), job=name)
    assert done.code == 0, done.stderr
    verdict = json.loads((done.job_path / "rules" / "TorchCompile.json").read_text())
    return done.job_path, verdict


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("compile")
    return {
        "planted": _run(tmp, "planted", SCRIPT, *PLANTED, "--save", str(tmp / "on.pt")),
        "stable": _run(tmp, "stable", SCRIPT),
        "eager": _run(tmp, "eager", SCRIPT, "--no-compile"),
    }


def test_recompiles_and_graph_breaks_fire_naming_the_function_and_guard(
    jobs: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    job, verdict = jobs["planted"]
    assert verdict["status"] == "IssuesFound", verdict["message"]
    messages = [f["message"] for f in verdict["findings"]]
    recompiled = [m for m in messages if "forward (" in m and "recompiled" in m]
    assert recompiled and "hit recompile_limit=8" in recompiled[0], messages
    assert "size mismatch at index 0" in recompiled[0]
    assert any("graph break" in m and "print" in m for m in messages), messages
    assert verdict["cost_seconds"] and verdict["cost_seconds"] > 0  # dynamo's compile time
    kinds = set(stepscope.open(job).events()["kind"])
    assert {"recompile", "graph_break", "compile"} <= kinds


def test_stable_compiled_model_is_the_silent_twin(
    jobs: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    _, verdict = jobs["stable"]
    assert verdict["status"] == "NoIssuesFound", verdict["message"]
    assert verdict["datapoints"] > 0
    assert verdict["parameters"]["max_recompiles"] == 2


def test_job_that_compiles_nothing_is_not_applicable(
    jobs: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    job, verdict = jobs["eager"]
    assert verdict["status"] == "NotApplicable", verdict["message"]
    kinds = set(stepscope.open(job).events()["kind"])
    assert not kinds & {"recompile", "graph_break", "compile"}


def test_agent_never_imports_dynamo(tmp_path: Path) -> None:
    # torch.optim imports dynamo on its own: this loop has no optimizer
    code = (
        "import sys, torch\n"
        "w = torch.ones(4, requires_grad=True)\n"
        "for _ in range(5):\n    (w * 2).sum().backward()\n"
        "print('dynamo', 'torch._dynamo' in sys.modules)\n"
    )
    (tmp_path / "loop.py").write_text(code)
    bare = subprocess.run([sys.executable, str(tmp_path / "loop.py")], capture_output=True,
                          text=True, env=env_for_tests(), check=True)  # fmt: skip
    assert "dynamo False" in bare.stdout
    done = stepscope_run(tmp_path, [str(tmp_path / "loop.py")])
    assert done.code == 0, done.stderr
    assert "dynamo False" in done.stdout, done.stdout


def test_planted_run_trains_bit_identical_to_bare(
    jobs: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    bare = tmp_path / "bare.pt"
    subprocess.run([sys.executable, SCRIPT, *PLANTED, "--save", str(bare)], check=True,
                   capture_output=True, env=env_for_tests())  # fmt: skip
    watched = jobs["planted"][0].parent / "on.pt"
    x, y = torch.load(bare), torch.load(watched)
    assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
