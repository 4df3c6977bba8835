"""The seeds' code blocks run with only their imports changed (issue 22, item 2).

tests/sagemaker_seeds.py extracts every block of ../shared/seeds/ that configures
profiling, rules or the debugger hook, fills the pages' placeholders and rewrites
``sagemaker`` imports to ``stepscope.sagemaker``. The blocks that build an estimator
are fitted for real: a tiny torch script trains under ``stepscope run`` in a
subprocess, and the job must hold the configuration the block gave.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import stepscope
from conftest import SCRIPTS
from sagemaker_seeds import Snippet, prepare, snippets
from stepscope import config
from stepscope.rules import PROFILER_REPORT, build_rules
from stepscope.rules._registry import PROFILER_RULES
from stepscope.sagemaker import PlatformArgumentWarning, TrainingJobError

ALL = snippets()
FITTED = [s for s in ALL if "estimator =" in s.code]
EXPECTED_WARNINGS = (config.ProfilingCostWarning, PlatformArgumentWarning)


def _namespace() -> dict[str, Any]:
    return {
        "ENTRY_POINT": "sm_train.py",
        "SOURCE_DIR": str(SCRIPTS),
        "HYPERPARAMETERS": {"steps": 16},
    }


def _run(snippet: Snippet, ns: dict[str, Any]) -> list[warnings.WarningMessage]:
    """Run ``snippet`` after the blocks before it on its page, in one namespace."""
    earlier = [s for s in ALL if s.seed == snippet.seed and s.index < snippet.index]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for block in [*earlier, snippet]:
            exec(compile(prepare(block), block.id, "exec"), ns)
    return caught


def test_the_extraction_finds_every_block_of_the_seeds():
    ids = [s.id for s in ALL]
    assert ids == [
        "001-0", "001-1", "001-2", "001-3", "001-4",
        "002-0", "002-1", "002-3", "002-4", "002-5", "002-6",
        "004-0", "004-1",
    ]  # fmt: skip
    assert all("from sagemaker" not in prepare(s) for s in ALL)


@pytest.mark.parametrize("snippet", [s for s in ALL if s not in FITTED], ids=lambda s: s.id)
def test_a_seed_block_builds_stepscope_configuration(snippet):
    ns = _namespace()
    caught = _run(snippet, ns)
    assert all(issubclass(w.category, EXPECTED_WARNINGS) for w in caught), caught
    built = 0
    if "rules" in ns:
        specs = build_rules([r.to_entry() for r in ns["rules"]])
        assert specs and all(spec.rule.rule_name for spec in specs)
        built += 1
    if "profiler_config" in ns:
        profiler = ns["profiler_config"]
        assert isinstance(profiler, config.ProfilerConfig)
        again = config.ProfilerConfig.from_dict(profiler.to_dict())
        assert again.to_dict() == profiler.to_dict()
        built += 1
    if "debugger_hook_config" in ns:
        assert isinstance(ns["debugger_hook_config"], config.DebuggerHookConfig)
        built += 1
    assert built


def test_the_seeds_profiling_scenarios_give_the_seeds_windows():
    """002's three FrameworkProfile scenarios resolve as the page says."""
    by_id = {s.id: s for s in ALL}

    def windows(block: str) -> list[tuple[str, int | None, int | None]]:
        ns = _namespace()
        _run(by_id[block], ns)
        profile = ns["profiler_config"].framework_profile_params
        return [(w.kind, w.start_step, w.num_steps) for w in profile.windows()]

    assert windows("002-4") == [("detailed", 6, 1), ("dataloader", 6, 1), ("python", 6, 1)]
    scenario3 = [("detailed", 10, 1), ("dataloader", 9, 2), ("python", 12, 1)]
    assert windows("002-5") == scenario3
    assert windows("002-6") == scenario3  # the common range is ignored


def _expected_rule_files(entries: list[dict[str, object]]) -> set[str]:
    names = {str(e["name"]) for e in entries}
    if PROFILER_REPORT in names:
        names = (names - {PROFILER_REPORT}) | set(PROFILER_RULES)
    return names


@pytest.mark.process
@pytest.mark.parametrize("snippet", FITTED, ids=lambda s: s.id)
def test_a_seed_estimator_fits_under_stepscope(snippet, tmp_path, monkeypatch):
    monkeypatch.setenv("STEPSCOPE_OUTPUT", str(tmp_path / "runs"))
    ns = _namespace()
    caught = _run(snippet, ns)
    assert all(issubclass(w.category, EXPECTED_WARNINGS) for w in caught), caught
    estimator = ns["estimator"]
    estimator.fit()
    path = estimator.latest_job_profiler_artifacts_path()
    job = stepscope.open(path)
    assert job.meta["status"] == "Completed"
    recorded = job.meta["config"]
    wanted = estimator.config(job.meta["name"]).to_dict()
    assert (
        recorded["profiler"]
        == wanted["profiler"]
        == ns["profiler_config"].to_dict() | {"output_path": None}
    )
    assert recorded["rules"] == wanted["rules"]
    assert recorded["debugger"] == wanted["debugger"]
    rule_files = {p.stem for p in Path(path, "rules").glob("*.json")}
    assert rule_files == _expected_rule_files(recorded["rules"])
    summary = estimator.latest_training_job.rule_job_summary()
    assert {s["RuleConfigurationName"] for s in summary} == rule_files
    assert all(s["RuleEvaluationStatus"] != "InProgress" for s in summary)
    received = Path(estimator.model_data, "received-0.json").read_text()
    assert '"steps": 16' in received and '"SM_HP_STEPS": "16"' in received


@pytest.mark.process
def test_importing_the_package_imports_no_framework_and_no_rule():
    code = (
        "import sys\n"
        "import stepscope.sagemaker, stepscope.sagemaker.debugger\n"
        "import stepscope.sagemaker.pytorch, stepscope.sagemaker.tensorflow\n"
        "from stepscope.sagemaker.debugger import rule_configs, metrics_config\n"
        "heavy = ('torch', 'tensorflow', 'pandas', 'duckdb', 'pyarrow', 'stepscope.rules')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _acks(path: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(Path(path, "control", "ack").glob("*.json"))]


@pytest.mark.process
def test_the_profiler_methods_change_a_running_fit(tmp_path):
    from stepscope.sagemaker.debugger import TensorBoardOutputConfig
    from stepscope.sagemaker.pytorch import PyTorch

    estimator = PyTorch(
        entry_point="sm_train.py",
        source_dir=str(SCRIPTS),
        hyperparameters={"steps": 2000, "step-sleep": 0.03},
        output_path=str(tmp_path / "runs"),
        rules=[],
        tensorboard_output_config=TensorBoardOutputConfig("s3://b/tb", str(tmp_path / "tb")),
    )
    estimator.fit(wait=False)
    estimator.update_profiler(system_monitor_interval_millis=100)
    estimator.enable_framework_profiling()
    estimator.disable_framework_profiling()
    estimator.enable_default_profiling()
    estimator.disable_profiling()
    estimator.latest_training_job.stop()  # the job would run on: 2000 steps
    with pytest.raises(TrainingJobError, match="ended Stopped"):
        estimator.latest_training_job.wait()
    path = estimator.latest_job_profiler_artifacts_path()
    acks = _acks(path)
    assert len(acks) == 7 and all(a["accepted"] for a in acks), acks
    windows = {p.name.split(".")[0] for p in Path(path, "profiling").rglob("*.window.json")}
    assert windows, "the live windows left no record"
    job = stepscope.open(path)
    intervals = set(job.system()["interval_ms"].unique())
    assert {100, 500} <= intervals  # 60000 ms may start after the last sample
    tensorboard = estimator.latest_job_tensorboard_artifacts_path()
    assert tensorboard == str(tmp_path / "tb")
    assert list(Path(tensorboard).rglob("events.out.tfevents.*")), "no TensorBoard events"
    with pytest.raises(Exception, match="only a running job"):
        estimator.update_profiler(system_monitor_interval_millis=500)


TWO_INSTANCES = """
import json, sys
from pathlib import Path
from stepscope.sagemaker.pytorch import PyTorch

estimator = PyTorch(entry_point="sm_train.py", source_dir=sys.argv[1], instance_count=2,
                    hyperparameters={"steps": 12}, output_path=sys.argv[2], rules=[])
estimator.fit()
print(json.dumps({"job": estimator.latest_job_profiler_artifacts_path(),
                  "model": estimator.model_data}))
"""


@pytest.mark.process
def test_instance_count_runs_that_many_processes_under_torchrun(tmp_path):
    script = tmp_path / "launch.py"
    script.write_text(TWO_INSTANCES)
    inner = f"ip link set lo up; {sys.executable} {script} {SCRIPTS} {tmp_path / 'runs'}"
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}  # torchrun's store: loopback only
    done = subprocess.run(
        ["unshare", "-n", "bash", "-c", inner], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    received = [json.loads(Path(out["model"], f"received-{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in received] == ["2", "2"]
    assert json.loads(received[0]["env"]["SM_HOSTS"]) == ["algo-1", "algo-2"]
    steps = stepscope.open(out["job"]).steps()
    assert set(steps["rank"].unique()) == {0, 1}


@pytest.mark.process
def test_disable_profiler_runs_the_entry_point_unwatched(tmp_path):
    from stepscope.sagemaker.pytorch import PyTorch

    estimator = PyTorch(
        entry_point="sm_train.py",
        source_dir=str(SCRIPTS),
        hyperparameters={"steps": 2},
        output_path=str(tmp_path / "runs"),
        disable_profiler=True,
    )
    estimator.fit()
    assert Path(estimator.model_data, "received-0.json").exists()
    assert not Path(tmp_path / "runs", estimator.latest_training_job.name).exists()
    with pytest.raises(Exception, match="ran unwatched"):
        estimator.latest_training_job.rule_job_summary()
