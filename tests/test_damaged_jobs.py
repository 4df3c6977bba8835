"""Readers on damaged job folders: what is skipped, what is named, what stops them.

A damaged segment is left out of every query and named in ``job.warnings``,
``show`` (text and ``--json``), ``rules``, the report and the dashboard's job
detail; a bad ``job.json`` stops every reader with one line and exit code 2;
out-of-range values are read as missing (docs/format.md, "Damaged job folders").
The fuzz test (tests/test_fuzz_jobfolder.py) runs every reader on random damage.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from starlette.testclient import TestClient

import stepscope
from stepscope.analysis.report_data import read_rules
from stepscope.cli import main
from stepscope.dashboard import create_app
from stepscope.errors import FormatVersionError, JobFolderError
from stepscope.report import render_report

GOLDEN = Path(__file__).parent / "data" / "healthy"
TOKEN = "damaged-token-0123456789abcdef"


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """The golden healthy job, its steps split into two segments (30 steps each)."""
    dst = tmp_path / "root" / "job"
    shutil.copytree(GOLDEN, dst)
    [seg] = (dst / "steps" / "rank-0").glob("part-*.parquet")
    table = pq.read_table(seg)
    seg.unlink()
    pq.write_table(table.slice(0, 30), dst / "steps" / "rank-0" / "part-1-1-00000.parquet")
    pq.write_table(table.slice(30), dst / "steps" / "rank-0" / "part-2-1-00001.parquet")
    return dst


SECOND = "steps/rank-0/part-2-1-00001.parquet"
DAMAGE = {
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:-100]),
    "not parquet": lambda p: p.write_text("hello, not a segment " * 3),
    "head only": lambda p: p.write_bytes(b"PAR1" + b"\0" * 40),
    "wrong types": lambda p: pq.write_table(
        pa.table(
            {
                "rank": [0],
                "phase": ["train"],
                "step": [99],
                "start": [1795643239.0],
                "duration": ["slow"],
            }
        ),
        p,
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_segment_is_skipped_and_named_by_every_reader(job: Path, damage: str) -> None:
    DAMAGE[damage](job / SECOND)
    j = stepscope.open(job)
    assert list(j.steps()["step"]) == list(range(30))  # the first segment, whole
    assert [w for w in j.warnings if SECOND in w and w.startswith("skipped")]
    code, out, _ = run(["show", "--json", str(job)])
    summary = json.loads(out)
    assert code == 0 and any(SECOND in w for w in summary["warnings"])
    assert summary["steps"]["count"] == 30
    code, out, _ = run(["show", str(job)])
    assert code == 0 and f"WARNING    skipped {SECOND}" in out
    code, out, _ = run(["rules", str(job)])
    assert code == 0 and f"WARNING  skipped {SECOND}" in out
    code, out, err = run(["rules", "--json", str(job)])
    assert code == 0 and json.loads(out) and f"stepscope: warning: skipped {SECOND}" in err
    html = render_report(stepscope.open(job))
    assert "Damaged files (1)" in html and SECOND in html


def test_the_healthy_twin_has_no_warnings(job: Path) -> None:
    j = stepscope.open(job)
    assert len(j.steps()) == 60 and j.warnings == []
    code, out, _ = run(["show", "--json", str(job)])
    assert code == 0 and json.loads(out)["warnings"] == []
    assert "Damaged files" not in render_report(stepscope.open(job))


def test_a_segment_with_a_good_footer_but_bad_data_is_found_by_reading_it_whole(
    job: Path,
) -> None:
    seg = job / SECOND
    table = pq.read_table(seg)
    pq.write_table(table, seg, compression="none")
    data = bytearray(seg.read_bytes())
    data[4:64] = b"\xff" * 60  # the first page header: the footer still reads
    seg.write_bytes(bytes(data))
    j = stepscope.open(job)
    assert len(j.steps()) == 30
    assert any(SECOND in w and "unreadable data" in w for w in j.warnings)
    assert len(j.sql("SELECT * FROM steps")) == 30  # the file stays out of later queries


def _steps_with(job: Path, column: str, values: dict[int, float]) -> None:
    seg = job / SECOND
    table = pq.read_table(seg)
    col = table.column(column).to_pylist()
    for i, v in values.items():
        col[i] = v
    i = table.schema.get_field_index(column)
    pq.write_table(
        table.set_column(i, table.schema.field(i), pa.array(col, table.schema.field(i).type)), seg
    )


def test_non_finite_durations_read_as_missing_and_are_named(job: Path) -> None:
    _steps_with(job, "duration", {0: float("inf"), 1: float("nan"), 2: float("-inf")})
    j = stepscope.open(job)
    steps = j.steps()
    assert len(steps) == 60 and steps["duration"].isna().sum() == 3
    assert any(SECOND in w and "duration" in w for w in j.warnings)
    code, out, _ = run(["show", "--json", str(job)])
    assert code == 0 and json.loads(out)["steps"]["phases"]["train"]["duration"]["p95"] < 10
    code, _, _ = run(["report", str(job), "-o", str(job.parent / "r.html")])
    assert code == 0


@pytest.mark.parametrize("start", [1e300, -1e18, -1.0, 5e9, float("nan"), float("inf")])
def test_a_step_with_an_absurd_time_is_left_out(job: Path, start: float) -> None:
    _steps_with(job, "start", {5: start})
    j = stepscope.open(job)
    assert len(j.steps()) == 59 and 35 not in set(j.steps()["step"])
    code, out, _ = run(["show", "--json", str(job)])
    assert code == 0 and json.loads(out)["steps"]["count"] == 59


JOB_JSON = {
    "empty": "",
    "cut short": '{"name": "job", "sta',
    "a list": "[1, 2]",
    "null": "null",
    "wrong type": json.dumps({"status": "Completed", "start_time": "yesterday"}),
    "infinite start": '{"status": "Completed", "start_time": Infinity}',
    "no status": json.dumps({"name": "job", "start_time": 1795643235.3}),
    "command a string": json.dumps({"status": "Completed", "command": "python x.py"}),
    "format 2": json.dumps({"format_version": 2, "status": "Completed"}),
    "format '1'": json.dumps({"format_version": "1", "status": "Completed"}),
    "format true": json.dumps({"format_version": True, "status": "Completed"}),
}


@pytest.mark.parametrize("body", sorted(JOB_JSON))
def test_a_bad_job_json_is_one_clear_line_and_exit_2(job: Path, body: str) -> None:
    (job / "job.json").write_text(JOB_JSON[body])
    with pytest.raises(JobFolderError, match=r"job\.json|format version"):
        stepscope.open(job)
    for argv in (["show"], ["show", "--json"], ["rules"], ["report"],
                 ["export", "tensorboard"]):  # fmt: skip
        extra = [str(job.parent / "tb")] if argv[0] == "export" else []
        code, out, err = run([*argv, str(job), *extra])
        assert code == 2 and out == ""
        assert len(err.strip().splitlines()) == 1 and err.startswith("stepscope: error: ")
        assert str(job) in err


def test_format_version_errors_say_what_was_found(job: Path) -> None:
    (job / "job.json").write_text(json.dumps({"format_version": "1", "status": "Completed"}))
    with pytest.raises(FormatVersionError, match=r"format version '1' \(str\), not a whole"):
        stepscope.open(job)
    (job / "job.json").write_text(json.dumps({"format_version": 2, "status": "Completed"}))
    with pytest.raises(FormatVersionError, match=r"reads 1 to 1\. Upgrade"):
        stepscope.open(job)


def test_damaged_records_are_skipped_and_named(job: Path) -> None:
    (job / "faults").mkdir()
    (job / "faults" / "agent-vm-1.json").write_text('[{"component": "agent"}]')
    (job / "faults" / "sampler-vm-2.json").write_text(json.dumps({"component": "sampler"}))
    (job / "faults" / "store-vm-3.json").write_text('{"component": "store", "count": Infinity}')
    (job / "rules" / "StepOutlier.json").write_text(json.dumps({"status": 5, "findings": "x"}))
    (job / "tensors" / "rank-0" / "collections.json").write_text("[1, 2]")
    window = job / "profiling" / "rank-0" / "python-1-2.window.json"
    window.parent.mkdir(parents=True)
    window.write_text(json.dumps({"kind": None, "path": "x", "rank": 0}))
    j = stepscope.open(job)
    assert [f["component"] for f in j.faults()] == ["sampler"]
    assert [r["rule"] for r in read_rules(j)] == ["DataLoading"]
    assert j.tensors.collections() == {} and j.profiling_artifacts() == []
    warnings = "\n".join(j.warnings)
    for key in ("faults/agent-vm-1.json", "faults/store-vm-3.json", "rules/StepOutlier.json",
                "tensors/rank-0/collections.json", "python-1-2.window.json"):  # fmt: skip
        assert key in warnings
    code, out, _ = run(["show", str(job)])
    assert code == 0 and "skipped rules/StepOutlier.json: status is 5" in out


def test_a_cut_detailed_window_is_not_damaged(job: Path) -> None:
    """A detailed window's ``truncated`` says how its trace was cut: an object."""
    window = job / "profiling" / "rank-0" / "detailed-1-2.window.json"
    window.parent.mkdir(parents=True)
    cut = {"kept_events": 10, "total_events": 99, "reason": "file_max_size"}
    window.write_text(json.dumps({"kind": "detailed", "path": "x", "rank": 0, "truncated": cut}))
    j = stepscope.open(job)
    assert [w["truncated"] for w in j.profiling_artifacts()] == [cut]
    assert j.warnings == []


def test_node_facts_of_the_wrong_type_are_left_out_and_named(job: Path) -> None:
    facts = json.loads((job / "nodes" / "vm.json").read_text())
    (job / "nodes" / "vm.json").write_text(json.dumps({**facts, "mem_total": [], "gpus": "x"}))
    j = stepscope.open(job)
    info = j.node_info("vm")
    assert "mem_total" not in info and "gpus" not in info
    assert info["cpu_count"] == facts["cpu_count"]
    assert any("nodes/vm.json: mem_total is []" in w for w in j.warnings)
    assert "Damaged files (1)" in render_report(stepscope.open(job))


def test_a_damaged_tensor_segment_is_skipped(job: Path) -> None:
    [seg] = (job / "tensors" / "rank-0" / "scalars").glob("part-*.parquet")
    seg.write_bytes(b"")
    j = stepscope.open(job)
    assert j.tensors.names() == [] and any(seg.name in w for w in j.warnings)
    code, _, err = run(["export", "tensorboard", str(job), str(job.parent / "tb")])
    assert code == 0 and seg.name in err


def test_the_dashboard_names_the_damage_and_refuses_a_bad_job_json(job: Path) -> None:
    (job / SECOND).write_bytes(b"")
    app = create_app(str(job.parent), "127.0.0.1", TOKEN)
    before = set(threading.enumerate())
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        detail = client.get("/api/jobs/job").json()
        assert detail["steps"] == 30 and any(SECOND in w for w in detail["warnings"])
        (job / "job.json").write_text("[]")
        r = client.get("/api/jobs/job")
        assert r.status_code == 422 and "job.json" in r.json()["error"]
        assert client.get("/api/jobs").json()["jobs"] == []
    for t in set(threading.enumerate()) - before:  # AnyIO's idle workers end with the loop
        t.join(timeout=10)


def test_on_an_object_store_a_damaged_segment_is_skipped_when_read(job: Path) -> None:
    from stepscope.store import open_store

    store = open_store("memory://damaged-job")
    for path in job.rglob("*"):
        if path.is_file():
            store.write_bytes(path.relative_to(job).as_posix(), path.read_bytes())
    store.write_bytes(SECOND, b"PAR1 cut")
    j = stepscope.open("memory://damaged-job")
    assert not j.store.is_local and len(j.steps()) == 30
    assert [w for w in j.warnings if SECOND in w] == [
        f"skipped {SECOND}: not a Parquet file (no magic bytes): cut short or not a segment"
    ]
    store.delete("")


def _ack_damage(ack: Path, damage: str) -> None:
    if damage == "link":  # inside the job (one leading outside leaves the job unserved)
        ack.symlink_to(ack.parents[2] / "job.json")
    elif damage == "fifo":
        os.mkfifo(ack)
    else:
        ack.write_text(damage)


ACK_DAMAGE = {
    "not JSON": ("{not json", "JSON"),
    "a list": ("[1, 2]", "not a JSON object"),
    "wrong shape": ('{"accepted": "yes", "detail": "x", "time": 1}', "accepted='yes'"),
    "link": ("link", "symbolic link"),
    "fifo": ("fifo", "not a regular file"),
}


@pytest.mark.process
def test_a_damaged_acknowledgement_is_a_clear_error_of_the_real_server(job: Path) -> None:
    """``/control/{name}`` answered 500 on a damaged ack: now 422 and what was wrong,
    nothing written into the job; a good ack (the silent twin) answers 200."""
    import subprocess
    import urllib.error
    import urllib.request

    from conftest import BIN, env_for_tests
    from stepscope.jobfolder import control
    from stepscope.store import open_store

    store = open_store(str(job))
    names = {d: control.request_interval(store, 1000, "test") for d in [*ACK_DAMAGE, "good"]}
    (job / "control" / "ack").mkdir(parents=True, exist_ok=True)
    for damage, (body, _) in ACK_DAMAGE.items():
        _ack_damage(job / "control" / "ack" / names[damage], body)
    control.acknowledge(store, names["good"], True, "every 1000 ms")
    before = sorted(p.relative_to(job) for p in job.rglob("*"))
    cmd = [str(BIN / "stepscope"), "ui", str(job.parent), "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for_tests())  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split(" at ", 1)[1].strip().split("?")[0].rstrip("/")

        def get(name: str) -> tuple[int, dict[str, object]]:
            try:
                with urllib.request.urlopen(f"{url}/api/jobs/job/control/{name}") as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        for damage, (_, said) in ACK_DAMAGE.items():
            code, answer = get(names[damage])
            assert code == 422, (damage, code, answer)
            error = str(answer["error"])
            assert said in error and f"control/ack/{names[damage]}" in error, error
            assert "send the request again" in error
        code, answer = get(names["good"])
        assert code == 200 and answer["ack"]["accepted"] is True  # type: ignore[index]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert sorted(p.relative_to(job) for p in job.rglob("*")) == before  # nothing recorded
