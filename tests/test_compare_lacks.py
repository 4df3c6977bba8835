"""``stepscope compare`` of jobs that do not record the same things (docs/compare.md
"What a job lacks"): a TensorFlow job against a PyTorch one, two imported SageMaker
jobs, a job with an evaluation phase against one without, a GPU job against a CPU one.
The verdict is on the step time of the phases both have; a part or phase one job lacks
is named, never compared as 0. Each case has a twin that differs only in the missing
part, where nothing is said to be missing.

The TensorFlow-shaped jobs are built with tests/rules_data.py as a compiled ``fit``
writes its steps (docs/tensorflow.md "What a step is"): ``data_wait``, ``backward`` and
``optimizer`` 0 on every step (fused into ``forward``), evaluation steps with
``backward`` and ``optimizer`` null, and ``framework`` events for tensorflow and keras;
tests/test_tensorflow.py checks that a real ``fit`` writes exactly this, and
tests/test_compare_e2e.py runs the real command on recorded jobs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sagemaker_source as sm
import stepscope
from rules_data import T0, new_job, node_info, steps_frame, write_event, write_steps
from stepscope.analysis.compare import Comparison, PhaseComparison, compare
from stepscope.analysis.compare_lacks import MissingPart, MissingPhase
from stepscope.cli import main
from stepscope.importers.sagemaker import import_job

N = 200
DEVICE = ("gpu_forward", "gpu_backward", "gpu_optimizer", "device_idle")


def shaped(
    path: Path,
    seed: int,
    tf: bool = False,
    evals: int = 0,
    gpu: tuple[float, float, float] | None = None,
) -> Path:
    """``N`` noisy training steps of 0.2 s (the same durations for the same ``seed``
    whatever the shape), split as PyTorch's agent splits them or, ``tf``, as a compiled
    Keras ``fit`` (module docstring); ``evals`` evaluation steps after them."""
    rng = np.random.default_rng(seed)
    duration = 0.2 + rng.normal(0.0, 0.01, N) + np.repeat(rng.normal(0.0, 0.005, N // 20), 20)
    forward = 0.06 + np.abs(rng.normal(0.0, 0.002, N))
    store = new_job(path, end=T0 + 200)
    node_info(store, gpus=1 if gpu else 0)
    train = steps_frame(N, duration=duration, forward=forward, gpu=gpu)
    if tf:
        whole = train["duration"] - np.float32(0.003)  # the compiled train function
        train[["data_wait", "backward", "optimizer"]] = np.float32(0.0)
        train["forward"], train["other"] = whole, np.float32(0.003)
    frames = [train]
    if evals:
        start = float(train["end"].iloc[-1])
        ev = steps_frame(evals, start=start, duration=0.05, forward=0.04, phase="eval")
        if tf:
            ev[["backward", "optimizer"]] = np.float32(np.nan)
            ev["data_wait"] = np.float32(0.0)
        frames.append(ev)
    for frame in frames:
        write_steps(store, frame)
    versions = {"tensorflow": "2.20.0", "keras": "3.11.3"} if tf else {"torch": "2.13.0"}
    for i, (name, version) in enumerate(versions.items()):  # own times: own segments
        write_event(store, "framework", {"name": name, "version": version}, time=T0 + 1 + i)
    return path


def comparison(base: Path, new: Path) -> Comparison:
    return compare(stepscope.open(str(base)), stepscope.open(str(new)))


def train_of(c: Comparison) -> PhaseComparison:
    assert c.phases[0].phase == "train"
    return c.phases[0]


def names(p: PhaseComparison) -> set[str]:
    return {c.part for c in p.parts}


def test_tensorflow_against_pytorch_compares_the_step_and_the_parts_both_have(
    tmp_path: Path,
) -> None:
    """The same step durations split both ways: the same verdict as its twin (two
    TensorFlow jobs), backward and optimizer said not split out in A, never 0 vs B's."""
    tf = shaped(tmp_path / "tf", 1, tf=True)
    c = comparison(tf, shaped(tmp_path / "torch", 2))
    twin = comparison(tf, shaped(tmp_path / "tf2", 2, tf=True))
    train, twin_train = train_of(c), train_of(twin)
    assert train.direction != "unknown" and train.ratio == twin_train.ratio
    assert names(train) == names(twin_train) == {"forward", "other"}
    assert train.missing_parts == [
        MissingPart(part, "A", "not split out") for part in ("data_wait", "backward", "optimizer")
    ]
    assert twin_train.missing_parts == []
    facts = {key: (a, b) for key, a, b in c.setup.facts}
    assert facts["version.tensorflow"] == ("2.20.0", None)
    assert facts["version.torch"] == (None, "2.13.0")
    assert "version.tensorflow" not in {key for key, _, _ in twin.setup.facts}


def _imported(tmp_path: Path, name: str, spec: sm.TraceSpec) -> Path:
    root = tmp_path / f"{name}-src"
    sm.write_system(root, "algo-1", sm.START + 2330, 120, cores=4, gpus=0)
    sm.write_timeline(root, spec)
    import_job(str(root), str(tmp_path / name))
    return tmp_path / name


def test_two_imported_sagemaker_jobs_say_which_lacks_data_wait(tmp_path: Path) -> None:
    """Both imports lack ``optimizer`` (the source does not record it: null), so it is
    neither compared nor named. B's trace has no data-loader events (its steps as long:
    the time is in its work): data_wait not recorded in B. Its twin has them."""
    base = _imported(tmp_path, "a", sm.TraceSpec("0-algo-1", steps=60))
    spec = sm.TraceSpec("0-algo-1", steps=60, step_s=0.25, fetch_s=0.0)
    c = comparison(base, _imported(tmp_path, "b", spec))
    twin = comparison(base, _imported(tmp_path, "twin", sm.TraceSpec("0-algo-1", steps=60)))
    train, twin_train = train_of(c), train_of(twin)
    assert train.direction == twin_train.direction == "same"  # equal step times
    assert train.missing_parts == [MissingPart("data_wait", "B", "not recorded")]
    assert "data_wait" not in names(train) and "optimizer" not in names(train)
    assert names(twin_train) == {"data_wait", "forward", "backward", "other"}
    assert twin_train.missing_parts == []


def test_a_phase_one_job_lacks_is_named_and_the_verdict_is_on_training(tmp_path: Path) -> None:
    with_eval = shaped(tmp_path / "a", 1, evals=40)
    c = comparison(with_eval, shaped(tmp_path / "b", 2))
    twin = comparison(with_eval, shaped(tmp_path / "twin", 2, evals=40))
    assert [p.phase for p in c.phases] == ["train"]
    assert c.missing_phases == [MissingPhase("eval", "B")]
    assert train_of(c).ratio == train_of(twin).ratio  # the same training steps
    assert [p.phase for p in twin.phases] == ["train", "eval"] and twin.missing_phases == []


def test_a_gpu_job_against_a_cpu_job_compares_the_host_parts(tmp_path: Path) -> None:
    gpu = (0.05, 0.08, 0.01)
    base = shaped(tmp_path / "gpu", 1, gpu=gpu)
    train = train_of(comparison(base, shaped(tmp_path / "cpu", 2)))
    twin = train_of(comparison(base, shaped(tmp_path / "gpu2", 2, gpu=gpu)))
    assert train.ratio == twin.ratio and train.direction != "unknown"
    assert not names(train) & set(DEVICE) and train.mostly not in DEVICE
    assert train.missing_parts == [MissingPart(part, "B", "not recorded") for part in DEVICE]
    assert names(twin) >= set(DEVICE) and twin.missing_parts == []


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["compare", *argv]) == 0
    return capsys.readouterr().out


def test_text_and_json_say_what_each_job_lacks(tmp_path: Path, capsys: Any) -> None:
    tf = str(shaped(tmp_path / "tf", 1, tf=True, evals=40))
    torch = str(shaped(tmp_path / "torch", 2))
    text = cli(capsys, tf, torch)
    assert "  backward      not split out in A (0 on every step), not compared" in text
    assert "eval: not recorded in B, not compared" in text
    assert "version.tensorflow: 2.20.0 -> (not recorded)" in text
    (doc,) = json.loads(cli(capsys, tf, torch, "--json"))
    said = "eval: not recorded in B, not compared"
    assert doc["missing_phases"] == [{"phase": "eval", "lacking": "B", "text": said}]
    lacks = doc["phases"][0]["missing_parts"]
    said = "not split out in A (0 on every step)"
    assert {"part": "optimizer", "lacking": "A", "why": "not split out", "text": said} in lacks
    twin = json.loads(cli(capsys, tf, str(shaped(tmp_path / "tf2", 2, tf=True)), "--json"))[0]
    assert twin["phases"][0]["missing_parts"] == []
