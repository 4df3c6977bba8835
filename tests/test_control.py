"""Live control of a running job: profiling windows and the sampling interval."""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests
from stepscope.errors import RequestError
from stepscope.jobfolder import control, parse_request
from stepscope.sampler._control import parse_interval
from stepscope.store import open_store

MLP = str(SCRIPTS / "mlp.py")
STEPS = 260


def _wait_for(what, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "stepscope"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_for_tests(),
    )


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    """A job driven while it runs: windows, a bad message, an interval change."""
    out = tmp_path_factory.mktemp("control")
    cmd = [
        str(BIN / "stepscope"),
        "run",
        "-o",
        str(out),
        "--job",
        "live",
        "--no-rules",
        "--",
        sys.executable,
        MLP,
        "--steps",
        str(STEPS),
        "--step-sleep",
        "0.03",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for_tests()
    )
    try:
        job_path = out / "live"
        _wait_for(lambda: (job_path / "steps").exists())
        store = open_store(job_path)
        acks = {}
        cli = _cli(
            "profile",
            str(job_path),
            "--python",
            "cprofile",
            "--timer",
            "cpu_time",
            "--steps",
            "+0:2",
        )
        acks["cli"] = cli
        # a short window from now: judged when the job reads it (up to 2 s later)
        acks["cli_now"] = _cli(
            "profile", str(job_path), "--dataloader", "--start-time", "now", "--duration", "0.3"
        )
        garbage = "profile-0000000000001-garbage0.json"
        store.write_bytes(f"control/{garbage}", b"{not json")
        hostile = control.request(
            store,
            "profile",
            {"windows": [{"kind": "detailed", "start_step": "__import__('os')"}]},
            "test",
        )
        detailed = control.request_profile(store, [{"kind": "detailed", "num_steps": 1}], "test")
        interval = control.request_interval(store, 100, "test")
        bad_interval = control.request(
            store, "config", {"system_monitor_interval_millis": 7}, "test"
        )
        names = {
            "garbage": garbage,
            "hostile": hostile,
            "detailed": detailed,
            "interval": interval,
            "bad_interval": bad_interval,
        }
        for key, name in names.items():
            acks[key] = _wait_for(lambda n=name: control.acknowledgement(store, n))
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()  # reaps it and closes its pipes (no ResourceWarning later)
    assert proc.returncode == 0, stderr
    return stepscope.open(job_path), acks, json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.process
def test_a_window_switched_on_while_running_produces_its_artifact(live):
    job, acks, _result = live
    cli = acks["cli"]
    assert cli.returncode == 0, cli.stderr
    assert "accepted: planned python (cprofile, cpu_time) steps" in cli.stdout
    records = {r["kind"]: r for r in job.profiling_artifacts()}
    python = records["python"]
    assert python["end_step"] - python["start_step"] == 1
    assert f"steps {python['start_step']}-{python['end_step']}" in cli.stdout
    assert "the job is at step " in cli.stdout  # where a relative --steps counts from
    now = acks["cli_now"]
    assert now.returncode == 0 and "accepted: planned dataloader for 0.3 s from now" in now.stdout
    assert records["dataloader"]["request"]
    stats = pstats.Stats(str(Path(job.path) / python["path"]))
    assert any(Path(f).name == "mlp.py" for f, _, _ in stats.stats)  # type: ignore[attr-defined]
    assert acks["detailed"]["accepted"], acks["detailed"]
    detailed = records["detailed"]
    assert detailed["start_step"] == detailed["end_step"] and detailed["request"]
    assert Path(job.path, detailed["path"]).stat().st_size > 0
    steps = job.steps(phase="train")
    assert steps.set_index("step").loc[detailed["start_step"], "profiled"]


@pytest.mark.process
def test_bad_messages_are_rejected_and_training_completes(live):
    job, acks, result = live
    assert acks["garbage"]["accepted"] is False
    assert "the request file is not JSON" in acks["garbage"]["detail"]
    assert acks["hostile"]["accepted"] is False
    assert "start_step" in acks["hostile"]["detail"]
    assert acks["bad_interval"]["accepted"] is False
    assert "Accepted values are 100, 200" in acks["bad_interval"]["detail"]
    assert result["steps"] == STEPS
    assert len(job.steps(phase="train")) == STEPS
    assert job.status == "Completed"
    (fault,) = job.faults()  # the garbage file, refused by the control channel
    assert fault["component"] == "control" and "garbage0" in fault["error"]


@pytest.mark.process
def test_interval_change_shows_in_the_data(live):
    job, acks, _ = live
    assert acks["interval"]["accepted"], acks["interval"]
    node = job.nodes()[0]
    assert job.node_info(node)["interval_ms"] == 100
    system = job.system()
    assert list(system["interval_ms"].drop_duplicates()) == [500, 100]
    fast = system[system["interval_ms"] == 100]["time"].diff().dropna()
    assert len(fast) >= 5 and fast.median() < 0.3  # spacing follows the new interval


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (None, "not a JSON object"),
        ([1, 2], "not a JSON object"),
        ({"windows": [{"kind": "detailed"}], "exec": "rm -rf /"}, "unknown key(s) 'exec'"),
        ({"windows": "detailed"}, "must be lists"),
        ({}, "nothing asked"),
        ({"windows": [{"kind": "gpu"}]}, "kind"),
        ({"windows": [{"kind": "python", "num_steps": 0}]}, "num_steps"),
        ({"windows": [{"kind": "python", "start_step": 3, "duration": 2}]}, "step window or"),
        ({"windows": [{"kind": "dataloader", "metrics_regex": "("}]}, "metrics_regex"),
        ({"windows": [{"kind": "detailed"}] * 17}, "at most 16"),
        ({"off": ["everything"]}, "unknown kind"),
    ],
)
def test_parse_request_rejects_with_a_reason(body, reason):
    with pytest.raises(RequestError, match=None) as info:
        parse_request("r", body)
    assert reason in str(info.value)


def test_parse_request_blank_start_and_time_window():
    req = parse_request(
        "r", {"windows": [{"kind": "python"}, {"kind": "detailed", "duration": 5}]}, now=123.0
    )
    python, detailed = req.windows
    assert python.from_now and python.window.num_steps == 1
    assert detailed.window.start_unix_time == 123.0 and detailed.from_now  # until applied


@pytest.mark.parametrize("body", [{"system_monitor_interval_millis": True}, {"x": 100}, "100"])
def test_parse_interval_rejects(body):
    with pytest.raises(ValueError):
        parse_interval(body)


@pytest.mark.process
def test_cli_refuses_a_finished_job_and_bad_steps(tmp_path):
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "job.json").write_text(
        json.dumps({"format_version": 1, "name": "done", "status": "Completed", "start_time": 1.0})
    )
    r = _cli("profile", str(tmp_path / "done"), "--detailed")
    assert r.returncode == 2 and "only a running job" in r.stderr
    r = _cli("profile", str(tmp_path / "done"), "--detailed", "--steps", "a:b")
    assert r.returncode == 2 and "START:N" in r.stderr
    r = _cli("config", str(tmp_path / "done"), "--interval-ms", "700")
    assert r.returncode == 2 and "Accepted values are 100" in r.stderr


def _keep_mtime(folder: Path, write: Any) -> Any:
    """Run ``write`` and give ``folder`` back its mtime (as a coarse file system would)."""
    before = folder.stat().st_mtime_ns
    out = write()
    os.utime(folder, ns=(before, before))
    return out


def test_requests_list_the_local_folder_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(control, "RECENT_NS", 200_000_000)
    store, folder = open_store(tmp_path), tmp_path / "control"
    requests = control.Requests(store, "stop")
    assert requests.pending() == []  # no control/ yet
    first = control.request_stop(store, "one", "test")
    assert [n for n, _ in requests.pending()] == [first]
    time.sleep(0.25)
    assert requests.pending() == []  # listed, past RECENT_NS: quiet from now on
    # A request that left the folder's mtime as it was is not looked for ...
    second = _keep_mtime(folder, lambda: control.request_stop(store, "two", "test"))
    assert requests.pending() == []
    # ... until the mtime moves
    third = control.request_stop(store, "three", "test")
    assert sorted(n for n, _ in requests.pending()) == sorted([second, third])


def test_a_folder_is_listed_while_its_mtime_is_recent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests within one mtime tick: the second is found by the next poll."""
    monkeypatch.setattr(control, "RECENT_NS", 60_000_000_000)
    store, folder = open_store(tmp_path), tmp_path / "control"
    requests = control.Requests(store, "config")
    control.request_interval(store, 100, "test")
    assert len(requests.pending()) == 1
    later = _keep_mtime(folder, lambda: control.request_interval(store, 200, "test"))
    assert [n for n, _ in requests.pending()] == [later]


def test_a_failed_listing_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "RECENT_NS", 0)  # any listing that succeeds quiets it
    store = open_store(tmp_path)
    requests = control.Requests(store, "stop")
    name = control.request_stop(store, "one", "test")
    listing = control.pending

    def broken(*args: Any) -> Any:
        raise OSError("the file system had a moment")

    monkeypatch.setattr(control, "pending", broken)
    with pytest.raises(OSError):
        requests.pending()
    monkeypatch.setattr(control, "pending", listing)
    assert [n for n, _ in requests.pending()] == [name]  # same mtime: listed anyway


def test_requests_on_object_stores_are_listed_at_every_poll() -> None:
    store = open_store("memory://requests-poll")
    requests = control.Requests(store, "profile")
    assert requests.pending() == []
    name = control.request_profile(store, [{"kind": "detailed", "num_steps": 1}], "test")
    assert [n for n, _ in requests.pending()] == [name]
    assert requests.pending() == []
