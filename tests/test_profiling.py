"""Profiling windows planned in the configuration, on real training runs and in-process."""

from __future__ import annotations

import gzip
import itertools
import json
import pstats
import sys
from collections import deque
from pathlib import Path
from typing import Any

import pytest

import stepscope
from conftest import SCRIPTS
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder, new_recorder
from stepscope.agent._windows import WindowScheduler
from stepscope.agent.profilers import ArtifactSink, FileBounds
from stepscope.agent.profilers._trace import bound_trace
from stepscope.config import ProfilingWindow
from stepscope.jobfolder import Planned, parse_request
from stepscope.store import open_store

MLP = str(SCRIPTS / "mlp.py")


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``FrameworkProfile()`` with no argument: the seed's default windows, on a real run."""
    from conftest import stepscope_run

    tmp = tmp_path_factory.mktemp("profiling")
    config = tmp / "profile.toml"
    config.write_text("[profiler.framework_profile_params]\n")
    run = stepscope_run(tmp, [MLP, "--steps", "16"], "--no-rules", "--config", str(config))
    assert run.code == 0, run.stderr
    assert run.result()["steps"] == 16
    return run


@pytest.fixture(scope="module")
def default_windows(default_run: Any) -> stepscope.Job:
    return stepscope.open(default_run.job_path)


@pytest.mark.process
def test_the_profilers_print_nothing_on_the_trainings_stderr(default_run: Any) -> None:
    """torch's profiler prints USDT lines at each start and stop; not under stepscope."""
    assert "detailed" in {
        r["kind"] for r in stepscope.open(default_run.job_path).profiling_artifacts()
    }
    assert "USDT" not in default_run.stderr and "profiler_start" not in default_run.stderr
    assert "Traceback" not in default_run.stderr


def _by_kind(job: stepscope.Job) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for record in job.profiling_artifacts():
        out.setdefault(record["kind"], []).append(record)
    return out


@pytest.mark.process
def test_default_windows_run_at_the_seed_steps(default_windows):
    kinds = _by_kind(default_windows)
    steps = {k: [(r["start_step"], r["end_step"]) for r in v] for k, v in kinds.items()}
    assert steps == {
        "detailed": [(5, 5)],
        "dataloader": [(7, 7)],
        "python": [(9, 9), (10, 10), (11, 11)],
    }
    timers = [r["window"]["cprofile_timer"] for r in kinds["python"]]
    assert timers == ["total_time", "cpu_time", "off_cpu_time"]
    events = default_windows.events(kinds=["profiling_window"])
    assert len(events) == 5
    assert not default_windows.faults()


@pytest.mark.process
def test_detailed_trace_is_a_gzipped_chrome_trace_with_aten_ops(default_windows):
    (record,) = _by_kind(default_windows)["detailed"]
    path = Path(default_windows.path) / record["path"]
    assert path.name == "detailed-5-5.pt.trace.json.gz"
    trace = json.loads(gzip.decompress(path.read_bytes()))
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"aten::addmm", "aten::linear"} <= names
    assert record["truncated"] is None
    table = json.loads((path.parent / "detailed-5-5.operators.json").read_text())
    ops = table["operators"]
    assert ops == sorted(ops, key=lambda o: o["self_cpu_us"], reverse=True)
    assert any(o["name"] == "aten::addmm" and o["count"] >= 2 for o in ops)


@pytest.mark.process
def test_pstats_load_and_name_the_training_script(default_windows):
    for record in _by_kind(default_windows)["python"]:
        stats = pstats.Stats(str(Path(default_windows.path) / record["path"]))
        funcs = {(Path(f).name, name) for f, _line, name in stats.stats}  # type: ignore[attr-defined]
        assert ("mlp.py", "__getitem__") in funcs, record
        summary = json.loads(Path(default_windows.path, record["files"][1]).read_text())
        assert summary["timer"] == record["window"]["cprofile_timer"]
        assert summary["functions"][0]["own_s"] >= summary["functions"][-1]["own_s"]


@pytest.mark.process
def test_dataloader_window_times_every_batch(default_windows):
    (record,) = _by_kind(default_windows)["dataloader"]
    doc = json.loads(Path(default_windows.path, record["path"]).read_text())
    assert [b["step"] for b in doc["batches"]] == [7]  # one batch per step in mlp.py
    (batch,) = doc["batches"]
    assert batch["metric"] == "DataLoader.wait" and 0 < batch["wait_s"] < 1
    assert batch["start"] < batch["end"]
    assert doc["summary"]["batches"] == 1


@pytest.mark.process
def test_dataloader_window_times_fetches_inside_the_workers(tmp_path):
    from conftest import stepscope_run

    config = tmp_path / "dl.toml"
    config.write_text(
        "[profiler.framework_profile_params.dataloader_profiling_config]\n"
        "start_step = 4\nnum_steps = 12\n"
    )
    # 16 items of 5 ms each: every batch a worker fetches takes at least 80 ms. The
    # window spans 12 steps (~0.5 s of fetching by two workers): the batches the
    # workers prefetched before it opened, and a fetch still running when it closes,
    # are not in it, so a 6-step window sometimes held only 2 fetches.
    args = [MLP, "--steps", "24", "--workers", "2", "--slow-data", "0.005"]
    run = stepscope_run(tmp_path, args, "--no-rules", "--config", str(config))
    assert run.code == 0, run.stderr
    job = stepscope.open(run.job_path)
    (record,) = _by_kind(job)["dataloader"]
    doc = json.loads(Path(job.path, record["path"]).read_text())
    fetches = [b for b in doc["batches"] if b["metric"] == "DataLoaderWorker.fetch"]
    assert len(fetches) >= 3, doc["summary"]
    assert {f["worker"] for f in fetches} <= {0, 1}
    assert len({f["pid"] for f in fetches}) == 2  # two worker processes, not the trainer
    assert all(f["fetch_s"] >= 0.08 and f["start"] < f["end"] for f in fetches)
    assert record["start_time"] - 1 <= fetches[0]["start"] <= record["end_time"]
    assert doc["summary"]["worker_fetches"] == len(fetches)
    assert doc["summary"]["workers"] == 2  # their CPU time too


@pytest.mark.process
def test_profiled_steps_are_marked_for_the_rules(default_windows):
    steps = default_windows.steps(phase="train")
    marked = set(steps.loc[steps["profiled"], "step"])
    # windows at 5, 7, 9-11; the step after each pays for its stop; steps while an
    # export still runs in the background are marked too (how many depends on timing)
    assert set(range(5, 13)) <= marked
    assert not marked & set(range(5))


@pytest.mark.process
def test_a_trace_over_its_bound_is_cut_and_says_so(default_windows):
    (record,) = _by_kind(default_windows)["detailed"]
    raw = gzip.decompress(Path(default_windows.path, record["path"]).read_bytes())
    data, cut = bound_trace(raw, 3000)
    assert cut is not None and len(data) <= 3000
    doc = json.loads(gzip.decompress(data))
    assert doc["otherData"]["stepscope_truncated"] is True
    kept = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    assert len(kept) == cut["kept_events"] < cut["total_events"]
    assert "file_max_size" in cut["reason"]


# -- the scheduler in-process (cheap windows only: dataloader and cProfile) ------------------


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t


def _scheduler(tmp_path: Path, *windows: ProfilingWindow, native: bool = False):
    rec = new_recorder(deque(), native) if native else StepRecorder(deque())
    store = open_store(tmp_path)
    faults = FaultBoundary(store, {"node": "n", "pid": 1})
    events: list[tuple[str, dict]] = []
    clock = _Clock()
    sched = WindowScheduler(
        [Planned(w) for w in windows],
        rec,
        ArtifactSink(store, 0, FileBounds(), faults),
        lambda kind, **d: events.append((kind, d)),
        clock.now,
        lambda t: t,
        faults,
    )
    rec.listeners.append(sched.on_boundary)
    return sched, rec, events, clock, store


def _steps(rec: StepRecorder, n: int, clock: _Clock | None = None) -> None:
    for _ in range(n):
        rec.on_data(0.0, 0.001)
        rec.end_train_step(0.002)
        if clock is not None:
            clock.t += 1.0


def test_step_window_with_prestep_and_step_zero(tmp_path):
    prestep = ProfilingWindow("dataloader", start_step=3, num_steps=1, include_prestep=True)
    first = ProfilingWindow("python", start_step=0, num_steps=1)
    sched, rec, _events, _, store = _scheduler(tmp_path, prestep, first)
    sched.attach()  # before step 0: the step-0 window opens now
    assert sys.getprofile() is not None and rec.profiled
    _steps(rec, 6)
    flags = [row[10] for row in rec.rows]  # the profiled flag (StepRow)
    assert flags == [True, True, True, True, True, False]  # 0, tail 1, prestep 2, 3, tail 4
    names = sorted(k.rsplit("/", 1)[1] for k in store.list("profiling", ".window.json"))
    assert names == ["dataloader-2-3.window.json", "python-0-0.window.json"]
    assert sys.getprofile() is None
    doc = store.read_json("profiling/rank-0/dataloader-2-3.dataloader.json")
    assert [b["step"] for b in doc["batches"]] == [2, 3]


def test_time_window_opens_and_closes_at_boundaries(tmp_path):
    timed = ProfilingWindow("dataloader", start_unix_time=1002.5, duration=2.0)
    _sched, rec, events, clock, _store = _scheduler(tmp_path, timed)
    _steps(rec, 8, clock)
    (record,) = [d for k, d in events if k == "profiling_window"]
    # step k ends at t=1000+k: the boundary after step 3 (t=1003) is the first past the
    # start, so steps 4.. are profiled; the one after step 5 (t=1005) is past the end
    assert (record["start_step"], record["end_step"]) == (4, 5)


def test_live_requests_resolve_blank_starts_and_refuse_the_past(tmp_path):
    sched, rec, events, _, _store = _scheduler(tmp_path)
    acks: list[tuple[str, bool, str]] = []
    sched.ack = lambda *a: acks.append(a)
    _steps(rec, 4)
    sched.request(parse_request("r1", {"windows": [{"kind": "dataloader", "num_steps": 2}]}))
    sched.request(parse_request("r2", {"windows": [{"kind": "python", "start_step": 1}]}))
    _steps(rec, 4)
    assert acks[0] == ("r1", True, "planned dataloader steps 5-6")
    assert acks[1][:2] == ("r2", False) and "already over" in acks[1][2]
    assert [d["start_step"] for k, d in events if k == "profiling_window"] == [5]


def test_off_closes_open_windows_and_drops_planned_ones(tmp_path):
    later = ProfilingWindow("python", start_step=50, num_steps=1)
    now = ProfilingWindow("dataloader", start_step=1, num_steps=100)
    sched, rec, events, _, _store = _scheduler(tmp_path, later, now)
    _steps(rec, 3)
    sched.request(parse_request("r", {"off": ["dataloader", "python"]}))
    _steps(rec, 2)
    assert not sched.active and not sched.plan
    (record,) = [d for k, d in events if k == "profiling_window"]
    assert (record["start_step"], record["end_step"]) == (1, 3)  # applied after step 3


@pytest.mark.parametrize("native", [False, True], ids=["python", "native"])
def test_marks_come_off_after_an_export_that_outlasts_several_steps(tmp_path, native):
    """The regression test of windows that blinded the rules: an export that ended
    after the boundary following the window left every later step ``profiled``."""
    window = ProfilingWindow("dataloader", start_step=2, num_steps=2)
    sched, rec, events, _, _store = _scheduler(tmp_path, window, native=native)
    exports: list = []
    sched.submit = exports.append  # the background thread, held: the export is slow
    calls: list[int] = []  # the steps after which the scheduler was called

    def listener(phase: str, step: int, t: float) -> tuple[int, int]:
        calls.append(step)
        return sched.on_boundary(phase, step, t)

    rec.listeners[:] = [listener]
    _steps(rec, 10)  # the window (2-3) closes after step 3; its export is still running
    assert len(exports) == 1 and events[-1][0] != "profiling_window"
    # While only the export runs, the scheduler is not called at every step.
    assert not set(calls) & set(range(6, 10))
    exports.pop()()  # the export ends (on the background thread), before step 10 ends
    _steps(rec, 5)
    flags = [row[10] for row in rec.rows]
    # 2-3 the window, 4 pays for the stop, 4-10 ran while the export ran: 10 is the
    # step during which it ended; none after it is marked.
    assert flags == [False] * 2 + [True] * 9 + [False] * 4
    assert events[-1][0] == "profiling_window" and not rec.profiled


@pytest.mark.process
def test_deep_profiling_writes_rotating_chunks(tmp_path):
    # Also the regression test of a crash: restarting the PyTorch profiler inside
    # optimizer.step() corrupted memory; it now starts and stops outside it.
    from conftest import stepscope_run

    config = tmp_path / "deep.toml"
    # 5 s of chunks, 0.5 s each: the first chunk's profiler start (kineto's first start
    # in the process: seconds on a loaded machine) must not use up the duration, which
    # left one chunk and no rotation to check; the steps (0.05 s each) outlast it.
    config.write_text(
        "[profiler.profile_params]\ncpu_profiling_duration = 5\n"
        "[profiler.framework_profile_params]\nfile_close_interval = 0.5\n"
        "start_step = 100000\n"  # the framework windows themselves never come
    )
    run = stepscope_run(
        tmp_path,
        [MLP, "--steps", "150", "--step-sleep", "0.05"],
        "--no-rules",
        "--config",
        str(config),
    )
    assert run.code == 0, run.stderr
    job = stepscope.open(run.job_path)
    chunks = [r for r in job.profiling_artifacts() if r["kind"] == "deep"]
    assert len(chunks) >= 2
    for a, b in itertools.pairwise(chunks):
        assert b["start_step"] == a["end_step"] + 1  # each chunk starts where the last ended
    # Bounded by the duration, with no clock in the test: each step sleeps 0.05 s, so at
    # most 100 steps end in the 5 s, and the chunk open when they are over closes the last.
    assert chunks[-1]["end_step"] <= 5 / 0.05 + 1 < 149
    trace = json.loads(gzip.decompress(Path(job.path, chunks[0]["path"]).read_bytes()))
    assert trace["traceEvents"]


@pytest.mark.process
def test_show_lists_the_windows(default_windows):
    from stepscope.analysis.summary import summarize
    from stepscope.cli._text import render_show

    summary = summarize(default_windows)
    assert [w["kind"] for w in summary["profiling"]] == [
        "detailed",
        "dataloader",
        "python",
        "python",
        "python",
    ]
    # a CPU-only process: its trace has no device activity, said as such (never zeros);
    # windows without a PyTorch trace have no breakdown at all
    assert [w["kernels"] for w in summary["profiling"]] == [
        {"not_applicable": "no kernel events: recorded without CUDA activity"},
        None,
        None,
        None,
        None,
    ]
    text = render_show(summary)
    assert "profiling/rank-0/detailed-5-5.pt.trace.json.gz" in text


@pytest.mark.process
def test_a_default_detailed_window_gives_the_operators_efficiency(default_windows):
    """Detailed windows record shapes by default (docs/profiling.md): the real CPU
    window of the MLP (Linear(32, 64), Linear(64, 2), batch 16) has its FLOPs."""
    from stepscope.analysis.summary import profiling_summary

    (record,) = _by_kind(default_windows)["detailed"]
    assert record["window"]["record_shapes"] is True
    rows = default_windows.efficiency(top=None)
    addmm = rows[rows["operator"] == "aten::addmm"]
    # each step: one forward product per layer, 2*16*32*64 and 2*16*64*2 FLOPs
    assert sorted(set(addmm["flops"] / addmm["count"])) == [2 * 16 * 64 * 2, 2 * 16 * 32 * 64]
    assert (addmm["timed_on"] == "host").all() and (addmm["tflops"] > 0).all()
    assert set(rows["bound"]) == {"unknown card"}  # a CPU: no peak, never a guess
    (window,) = [w for w in profiling_summary(default_windows) if w["kind"] == "detailed"]
    assert window["efficiency"]["operators"]


def test_detailed_windows_record_shapes_and_deep_chunks_do_not():
    """The default of docs/profiling.md ("Efficiency against the hardware")."""
    from stepscope.agent.profilers._profiling import plan_from_config
    from stepscope.config import StepscopeConfig

    config = StepscopeConfig.from_dict(
        {"profiler": {"framework_profile_params": {}, "profile_params": {}}}
    )
    plan, _ = plan_from_config(config.to_dict())
    shapes = {p.label or p.window.kind: p.window.record_shapes for p in plan}
    assert shapes["detailed"] is True and shapes["deep"] is False
