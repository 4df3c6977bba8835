"""TensorFlow profiling windows: the operator table of a ``detailed`` window and the
``tf.data`` statistics of a ``dataloader`` window (docs/tensorflow.md).

The end-to-end tests train a Keras model with ``fit`` under ``stepscope run`` (two
TensorFlow processes for the module: a slow ``map`` and its fast twin, the same
windows). Skipped when TensorFlow is not installed: ``pip install -e '.[tensorflow]'``.
The tests of the XSpace arithmetic and of the profiler session's sharing need no
TensorFlow (a stand-in module).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests, stepscope_run
from stepscope.agent._faults import FaultBoundary
from stepscope.agent.profilers import _tf_detailed, _tf_xplane
from stepscope.agent.profilers._sink import ArtifactSink, FileBounds
from stepscope.agent.profilers._tf_ops import rows_of
from stepscope.agent.profilers._tf_xplane import HostEvent
from stepscope.store import open_store

NO_TF = importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("keras") is None
needs_tf = [
    pytest.mark.process,
    pytest.mark.skipif(NO_TF, reason="TensorFlow is not installed: pip install -e '.[tensorflow]'"),
]
FIT = str(SCRIPTS / "keras_fit.py")
WINDOWS = """
[profiler.framework_profile_params.detailed_profiling_config]
start_step = 5
num_steps = 3
[profiler.framework_profile_params.dataloader_profiling_config]
start_step = 12
num_steps = 6
"""
SLOW_S = 0.004  # the slow map's sleep per batch (tf.py_function)


def _fit(tmp: Path, slow_data: float) -> Path:
    config = tmp / "windows.toml"
    config.write_text(WINDOWS)
    args = [FIT, "--epochs", "1", "--batches", "25", "--slow-data", str(slow_data)]
    run = stepscope_run(tmp, args, "--no-rules", "--config", str(config))
    assert run.code == 0, run.stderr
    return run.job_path


@pytest.fixture(scope="module")
def slow_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fit(tmp_path_factory.mktemp("slow"), SLOW_S)


@pytest.fixture(scope="module")
def fast_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fit(tmp_path_factory.mktemp("fast"), 1e-6)  # the same map, sleeping 1 us


def _record(job: Path, base: str) -> dict[str, object]:
    found: dict[str, object] = json.loads(
        (job / "profiling" / "rank-0" / f"{base}.window.json").read_text()
    )
    return found


def _loader(job: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads(
        (job / "profiling" / "rank-0" / "dataloader-12-17.dataloader.json").read_text()
    )
    return doc


class TestEndToEnd:
    pytestmark = needs_tf

    def test_a_detailed_window_writes_an_operator_table(self, slow_job: Path) -> None:
        record = _record(slow_job, "detailed-5-7")
        files = record["files"]
        assert isinstance(files, list) and "profiling/rank-0/detailed-5-7.operators.json" in files
        ops = json.loads((slow_job / "profiling/rank-0/detailed-5-7.operators.json").read_text())
        rows = ops["operators"]
        assert set(rows[0]) == {"name", "count", "self_cpu_us", "cpu_total_us", "self_device_us"}
        matmuls = [r for r in rows if "MatMul" in r["name"]]
        assert matmuls, [r["name"] for r in rows]
        # three Dense layers: each window step runs a fixed number of each MatMul kind
        assert all(r["count"] > 0 and r["count"] % 3 == 0 for r in matmuls), matmuls
        assert all(r["self_cpu_us"] <= r["cpu_total_us"] for r in rows)
        job = stepscope.open(slow_job)
        mine = [r for r in job.profiling_artifacts() if r["kind"] == "detailed"]
        assert mine and mine[0]["top"][0]["name"] == rows[0]["name"]

    def test_the_report_shows_the_tf_operators(self, slow_job: Path, tmp_path: Path) -> None:
        out = tmp_path / "report.html"
        cmd = [str(BIN / "stepscope"), "report", str(slow_job), "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env_for_tests())
        assert done.returncode == 0, done.stderr
        html = out.read_text()
        table = html[html.index('class="num operators"') :]
        assert "MatMul" in table[: table.index("</table>")]


# -- without TensorFlow --------------------------------------------------------------


def _ev(name: str, start: float, dur: float, line: int = 0) -> HostEvent:
    display = name.rsplit(":", 1)[1] if ":" in name and "::" not in name else ""
    return HostEvent(name, display, line, start, dur)


def test_an_ops_self_time_leaves_out_the_ops_nested_in_it_on_its_thread() -> None:
    events = [
        _ev("call:StatefulPartitionedCall", 0, 100),
        _ev("ExecutorState::Process", 5, 50),  # not an op: transparent
        _ev("dense/MatMul:MatMul", 10, 30),
        _ev("dense/Add:AddV2", 50, 20),
        _ev("other/MatMul:MatMul", 0, 40, line=1),  # another thread: not nested
    ]
    rows = {r["name"]: r for r in rows_of(events)}
    assert rows["StatefulPartitionedCall"]["self_cpu_us"] == pytest.approx(0.05)
    assert rows["StatefulPartitionedCall"]["cpu_total_us"] == pytest.approx(0.1)
    assert rows["MatMul"]["count"] == 2 and rows["MatMul"]["self_cpu_us"] == pytest.approx(0.07)
    assert "Process" not in rows and "ExecutorState::Process" not in rows


def test_a_missing_xplane_module_means_no_table_and_a_fault(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_tf_xplane, "_MODULES", ("stepscope_no_such.xplane_pb2",))
    sink = _sink(tmp_path)
    logdir = tmp_path / "log" / "plugins" / "profile" / "run"
    logdir.mkdir(parents=True)
    (logdir / "host.xplane.pb").write_bytes(b"\x00")
    export = _tf_detailed._export(str(tmp_path / "log"), sink, "detailed-1-2")
    assert export.path and export.path.endswith("host.xplane.pb")
    assert not any(f.endswith(".operators.json") for f in export.files)
    assert "XPlaneUnavailable" in str(export.details["operators"])
    assert [f.name.split("-")[0] for f in (tmp_path / "job" / "faults").iterdir()] == ["profiling"]


def _sink(tmp_path: Path) -> ArtifactSink:
    store = open_store(tmp_path / "job")
    faults = FaultBoundary(store, {"node": "n", "pid": 1})
    return ArtifactSink(store, 0, FileBounds(), faults)
