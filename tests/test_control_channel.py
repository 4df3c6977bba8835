"""The hardened control channel: whatever lands in control/, the readers go on.

Unit tests of ``jobfolder.control`` / ``_channel`` on a local job folder; the
same faults against a real training run are in tests/test_control_faults.py.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from stepscope.errors import RequestError
from stepscope.jobfolder import _channel, control, parse_request
from stepscope.store import open_store

PROFILE = "profile-0000000000001-aaaaaaaa.json"


def _job(tmp_path: Path) -> Path:
    (tmp_path / "job" / "control").mkdir(parents=True)
    return tmp_path / "job"


def _valid(job: Path, name: str) -> None:
    body = {"kind": "profile", "windows": [{"kind": "python", "num_steps": 2}]}
    (job / "control" / name).write_text(json.dumps(body))


def _poll(job: Path, kind: str = "profile") -> list[tuple[str, object]]:
    """``control.pending`` in a thread: a reader that blocks fails the test, not hangs it."""
    found: list[list[tuple[str, object]]] = []
    reader = threading.Thread(
        target=lambda: found.append(control.pending(open_store(job), kind, set())), daemon=True
    )
    reader.start()
    reader.join(30)
    assert not reader.is_alive(), "the control reader blocked"
    return found[0]


def _ack(job: Path, name: str) -> dict[str, object]:
    ack = control.acknowledgement(open_store(job), name)
    assert ack is not None, f"no acknowledgement of {name}"
    return dict(ack)


def _fault(job: Path) -> dict[str, object]:
    faults = sorted((job / "faults").glob("control-*.json"))
    assert len(faults) == 1, faults
    return dict(json.loads(faults[0].read_text()))


def _bad_file(job: Path, how: str, name: str) -> None:
    path = job / "control" / name
    if how == "fifo":
        os.mkfifo(path)
    elif how == "dev_zero":
        path.symlink_to("/dev/zero")
    elif how == "huge":
        with open(path, "wb") as f:
            f.truncate(100 * 1024 * 1024)  # sparse: 100 MB that costs no disk
    elif how == "deep":
        path.write_text("[" * 5000 + "]" * 5000)
    elif how == "garbage":
        path.write_text("{not json")


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("fifo", "not a regular file (a FIFO)"),
        ("dev_zero", "symbolic link"),
        ("huge", "over the limit of 65,536"),
        ("deep", "nested deeper than 16"),
        ("garbage", "is not JSON"),
    ],
)
def test_a_bad_file_is_rejected_and_costs_no_other_request(tmp_path, how, reason):
    job = _job(tmp_path)
    before, bad, after = (f"profile-000000000000{i}-aaaaaaaa.json" for i in (1, 2, 3))
    _valid(job, before)
    _bad_file(job, how, bad)
    _valid(job, after)
    found = _poll(job)
    assert [name for name, _ in found] == [before, after]  # both valid ones, in order
    assert all(isinstance(body, dict) and body["windows"] for _, body in found)
    ack = _ack(job, bad)
    assert ack["accepted"] is False and reason in str(ack["detail"])
    fault = _fault(job)
    assert fault["component"] == "control" and fault["count"] == 1
    assert reason in str(fault["error"]) and bad in str(fault["error"])


def test_a_valid_folder_records_no_fault(tmp_path):
    job = _job(tmp_path)
    _valid(job, PROFILE)
    assert [n for n, _ in _poll(job)] == [PROFILE]
    assert not (job / "faults").exists()


def test_a_huge_request_is_refused_before_it_is_read(tmp_path, monkeypatch):
    job = _job(tmp_path)
    _bad_file(job, "huge", PROFILE)
    read: list[int] = []
    real_read = os.read
    monkeypatch.setattr(_channel.os, "read", lambda fd, n: read.append(n) or real_read(fd, n))
    assert _poll(job) == []
    assert sum(read) == 0  # refused on its size, not after reading it


def test_deep_json_parses_bounded_without_recursion_error():
    with pytest.raises(ValueError, match="nested deeper"):
        _channel.loads_bounded(b'{"a": ' * 5000 + b"1" + b"}" * 5000)
    # brackets inside strings are not nesting
    assert _channel.loads_bounded(b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[\\"{{{{"}') == {
        "a": '[[[[[[[[[[[[[[[[[[[[[[[["{{{{'
    }


def test_an_ack_folder_that_is_a_link_is_refused_and_recorded(tmp_path):
    job = _job(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (job / "control" / "ack").symlink_to(outside)
    _bad_file(job, "garbage", PROFILE)
    assert _poll(job) == []
    assert control.acknowledge(open_store(job), "stop-1-x.json", True, "stopping") is False
    assert list(outside.iterdir()) == []  # nothing written outside the job
    fault = _fault(job)
    assert fault["count"] == 3  # the garbage file, its ack, the stop's ack
    assert "control/ack is a symbolic link" in str(fault["error"])


def test_an_acknowledgement_that_is_a_fifo_is_reported_not_read(tmp_path):
    job = _job(tmp_path)
    (job / "control" / "ack").mkdir()
    os.mkfifo(job / "control" / "ack" / PROFILE)
    with pytest.raises(ValueError, match="FIFO"):
        control.acknowledgement(open_store(job), PROFILE)


def test_a_link_to_a_folder_in_control_is_not_walked(tmp_path):
    job = _job(tmp_path)
    (job / "control" / "profile-0000000000009-loop.json").symlink_to("/")
    _valid(job, PROFILE)
    assert [n for n, _ in _poll(job)] == [PROFILE]


@pytest.mark.parametrize(
    ("window", "reason"),
    [
        ({"kind": "detailed", "num_steps": 10**30}, "over the limit of 200 steps"),
        ({"kind": "python", "duration": 1e308}, "over the limit of 3600 s"),
        ({"kind": "python", "duration": 10**400}, "duration"),  # OverflowError before
        ({"kind": "dataloader", "start_step": 10**30}, "past the last step"),
    ],
)
def test_absurd_windows_are_rejected_with_a_clear_error(window, reason):
    with pytest.raises(RequestError) as info:
        parse_request("r", {"windows": [window]}, now=100.0)
    assert reason in str(info.value)
