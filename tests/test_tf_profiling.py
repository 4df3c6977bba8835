"""TensorFlow profiling windows: the operator table of a ``detailed`` window and the
``tf.data`` statistics of a ``dataloader`` window (docs/tensorflow.md).

The end-to-end tests train a Keras model with ``fit`` under ``stepscope run`` (two
TensorFlow processes for the module: a slow ``map`` and its fast twin, the same
windows). Skipped when TensorFlow is not installed: ``pip install -e '.[tensorflow]'``.
The tests of the XSpace arithmetic and of the profiler session's sharing need no
TensorFlow (a stand-in module).
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from collections import deque
from pathlib import Path

import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests, needs_tensorflow, stepscope_run
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder
from stepscope.agent.profilers import _tf_data, _tf_detailed, _tf_xplane
from stepscope.agent.profilers._sink import ArtifactSink, FileBounds
from stepscope.agent.profilers._tf_dataloader import TFDataloaderProfiler
from stepscope.agent.profilers._tf_ops import rows_of
from stepscope.agent.profilers._tf_session import TFSession
from stepscope.agent.profilers._tf_xplane import HostEvent
from stepscope.config import ProfilingWindow
from stepscope.store import open_store

needs_tf = [pytest.mark.process, needs_tensorflow]
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

    def test_the_report_shows_the_tf_operators_and_tf_data_stages(
        self, slow_job: Path, tmp_path: Path
    ) -> None:
        out = tmp_path / "report.html"
        cmd = [str(BIN / "stepscope"), "report", str(slow_job), "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env_for_tests())
        assert done.returncode == 0, done.stderr
        html = out.read_text()
        table = html[html.index('class="num operators"') :]
        assert "MatMul" in table[: table.index("</table>")]
        stages = html[html.index('class="num tfdata-stages"') :]
        assert "Iterator::Root::Prefetch::Map" in stages[: stages.index("</table>")]

    def test_tf_data_waits_and_a_slow_map_stage(self, slow_job: Path, fast_job: Path) -> None:
        medians = {}
        for name, job in (("slow", slow_job), ("fast", fast_job)):
            doc = _loader(job)
            summary = doc["summary"]
            assert isinstance(summary, dict)
            assert summary["tf_data"] == {"collected": True, "waits_from": "tf.data"}, name
            waits = [b for b in doc["batches"] if b["metric"] == "DataLoader.wait"]
            assert [b["step"] for b in waits] == list(range(12, 18)), name  # one per batch
            assert summary["batches"] == 6
            stages = {s["stage"]: s for s in doc["stages"]}
            assert all(s["metric"] == "TFData.stage" for s in stages.values())
            assert stages["Iterator::Root"]["count"] == 6
            medians[name] = stages["Iterator::Root::Prefetch::Map"]["median_s"]
        assert medians["slow"] >= SLOW_S * 0.9  # it sleeps that long at least
        assert medians["slow"] > 2 * medians["fast"], medians


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


def test_a_wait_belongs_to_the_step_it_began_in() -> None:
    starts = [(12, 1_000), (13, 2_000), (14, 3_000)]
    rows = _tf_data._waits(
        [(1_100.0, 50.0), (2_100.0, 60.0), (2_500.0, 5.0), (3_100.0, 9.0)], starts
    )
    assert [(r.step, r.batch) for r in rows] == [(12, 0), (13, 0), (13, 1), (14, 0)]
    assert rows[0].wait_s == pytest.approx(50e-9) and rows[0].metric == "DataLoader.wait"


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


class _FakeProfiler:
    """``tf.profiler.experimental``: one session at a time, as TensorFlow's."""

    def __init__(self) -> None:
        self.running: str | None = None

    def start(self, logdir: str, options: object = None) -> None:
        if self.running:
            raise RuntimeError("Another profiler is running.")
        self.running = logdir

    def stop(self) -> None:
        assert self.running
        self.running = None

    @staticmethod
    def ProfilerOptions(**kw: object) -> dict[str, object]:
        return kw


def _sink(tmp_path: Path) -> ArtifactSink:
    store = open_store(tmp_path / "job")
    faults = FaultBoundary(store, {"node": "n", "pid": 1})
    return ArtifactSink(store, 0, FileBounds(), faults)


@pytest.fixture
def fake_tf(monkeypatch: pytest.MonkeyPatch) -> _FakeProfiler:
    prof = _FakeProfiler()
    experimental = types.SimpleNamespace(
        start=prof.start, stop=prof.stop, ProfilerOptions=prof.ProfilerOptions
    )
    tf = types.SimpleNamespace(profiler=types.SimpleNamespace(experimental=experimental))
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    monkeypatch.setattr(TFSession, "current", None)
    return prof


def _steps(rec: StepRecorder, n: int) -> None:
    for _ in range(n):
        rec.on_forward_start(0.0)
        rec.end_train_step(0.001)


def test_a_detailed_window_takes_tensorflows_profiler_from_a_dataloader_window(
    tmp_path: Path, fake_tf: _FakeProfiler
) -> None:
    sink = _sink(tmp_path)
    rec = StepRecorder(deque())
    loader = TFDataloaderProfiler(ProfilingWindow("dataloader"), rec, lambda t: t, sink)
    loader.start()
    assert fake_tf.running and TFSession.current is not None
    _steps(rec, 2)
    detailed = _tf_detailed.TFDetailedProfiler(ProfilingWindow("detailed"), sink)
    detailed.start()  # at step 2: the dataloader window's session ends
    assert TFSession.current is not None and TFSession.current.owner == "detailed"
    _steps(rec, 2)
    finish = loader.stop()
    assert fake_tf.running  # the detailed window's session runs on
    info = finish(sink, "dataloader-0-3").details["summary"]["tf_data"]  # type: ignore[index]
    assert info["until_step"] == 2 and "detailed window took" in info["reason"]
    detailed.stop()
    assert not fake_tf.running and TFSession.current is None


def test_a_dataloader_window_beside_a_detailed_one_collects_no_tf_data(
    tmp_path: Path, fake_tf: _FakeProfiler
) -> None:
    sink = _sink(tmp_path)
    rec = StepRecorder(deque())
    detailed = _tf_detailed.TFDetailedProfiler(ProfilingWindow("detailed"), sink)
    detailed.start()
    loader = TFDataloaderProfiler(ProfilingWindow("dataloader"), rec, lambda t: t, sink)
    loader.start()
    _steps(rec, 2)
    info = loader.stop()(sink, "dataloader-0-1").details["summary"]["tf_data"]  # type: ignore[index]
    assert info["collected"] is False and "a detailed window held" in info["reason"]
    assert fake_tf.running  # untouched
    detailed.stop()


def test_a_profiler_the_script_runs_itself_is_left_alone(
    tmp_path: Path, fake_tf: _FakeProfiler
) -> None:
    sink = _sink(tmp_path)
    fake_tf.start("the script's own")
    rec = StepRecorder(deque())
    loader = TFDataloaderProfiler(ProfilingWindow("dataloader"), rec, lambda t: t, sink)
    loader.start()
    _steps(rec, 1)
    info = loader.stop()(sink, "dataloader-0-0").details["summary"]["tf_data"]  # type: ignore[index]
    assert info["collected"] is False and "did not start" in info["reason"]
    assert fake_tf.running == "the script's own"
    assert [f.name.split("-")[0] for f in (tmp_path / "job" / "faults").iterdir()] == ["profiling"]


def test_the_tf_data_metric_and_fields_are_documented() -> None:
    docs = Path(__file__).parents[1] / "docs"
    for name in ("format.md", "profiling.md", "tensorflow.md"):
        text = (docs / name).read_text()
        assert f"`{_tf_data.STAGE_METRIC}`" in text and "`stages`" in text, name
    assert "`tf_data`" in (docs / "format.md").read_text()


def test_a_detailed_window_whose_profiler_cannot_start_leaves_the_scripts_alone(
    tmp_path: Path, fake_tf: _FakeProfiler
) -> None:
    sink = _sink(tmp_path)
    fake_tf.start("the script's own")
    detailed = _tf_detailed.TFDetailedProfiler(ProfilingWindow("detailed"), sink)
    with pytest.raises(RuntimeError):  # the scheduler records it as a fault
        detailed.start()
    export = detailed.stop()(sink, "detailed-0-0")
    assert export.path is None and "did not start" in str(export.details["operators"])
    assert fake_tf.running == "the script's own" and TFSession.current is None
