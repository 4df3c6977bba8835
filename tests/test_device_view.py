"""The device's view of a GPU step (issue 29, item 2): `stepscope.analysis.device`, and
`show` leading with the device split, on real H200 jobs and on synthetic twins."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import rules_data as rd
from h200_jobs import h200_job
from stepscope.analysis.device import RAN_AHEAD, device_split, ran_ahead_text
from stepscope.cli import main

AHEAD_WORDS = "the host runs ahead of the GPU"


def train_columns(job: Path) -> dict[str, np.ndarray]:
    """Rank 0's training steps, read with pyarrow alone (not through stepscope)."""
    table = pq.read_table(job / "steps/rank-0")
    table = table.filter(pc.equal(table.column("phase"), "train"))
    names = ("duration", "forward", "backward", "optimizer", "gpu_forward", "gpu_backward",
             "gpu_optimizer")  # fmt: skip
    return {n: table.column(n).to_numpy(zero_copy_only=False).astype(np.float64) for n in names}


def show(job: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    assert main(["show", *flags, str(job)]) == 0
    return capsys.readouterr().out


# -- the analysis ----------------------------------------------------------------------------


def _columns(n: int, host: float, parts: tuple[float, float, float]) -> dict[str, np.ndarray]:
    cols = {"duration": np.full(n, host)}
    for name, seconds in zip(("gpu_forward", "gpu_backward", "gpu_optimizer"), parts, strict=True):
        cols[name] = np.full(n, seconds)
    return cols


def test_the_device_split_is_the_median_of_each_part_and_its_share() -> None:
    cols = _columns(5, 0.010, (0.002, 0.005, 0.001))
    cols["gpu_backward"][0] = 0.5  # one slow step moves no median
    cols["gpu_forward"][1] = np.nan  # a step without a device time is left out
    split = device_split(cols)
    assert split is not None and split["steps"] == 4
    assert split["forward"] == {"seconds": 0.002, "share": 0.25}
    assert split["backward"] == {"seconds": 0.005, "share": 0.625}
    assert split["optimizer"] == {"seconds": 0.001, "share": 0.125}
    assert split["step_seconds"] == 0.008
    # the busy share sums (the slow step's device time counts), at most 1
    assert split["busy_share"] == 1.0
    cols["gpu_backward"][0] = 0.005
    assert device_split(cols)["busy_share"] == pytest.approx(0.8)  # type: ignore[index]


def test_sampled_device_times_stand_for_every_step_in_the_busy_share() -> None:
    """The agent times one step per 50 ms: the split is the timed steps', the busy share
    and the host median are every step's (the timed steps' mean device time per step)."""
    cols = _columns(100, 0.004, (0.002, 0.005, 0.001))
    for name in ("gpu_forward", "gpu_backward", "gpu_optimizer"):
        cols[name][np.arange(100) % 10 != 0] = np.nan  # one step in 10 timed
    cols["duration"][np.arange(100) % 10 == 0] = 0.006  # timed steps are slower on the host
    cols["duration"][55] = 1.0  # an untimed stall: the GPU idled through it
    split = device_split(cols)
    assert split is not None and split["steps"] == 10 and split["step_seconds"] == 0.008
    assert split["host_step_seconds"] == 0.004  # every step's median
    host_total = 0.004 * 89 + 0.006 * 10 + 1.0  # the stall among the untimed
    assert split["busy_share"] == pytest.approx(0.008 * 100 / host_total, abs=1e-6)
    cols["gpu_backward"][0] = 0.2  # a slow timed step counts its own, not the others'
    split = device_split(cols)
    assert split is not None and split["step_seconds"] == 0.008
    assert split["busy_share"] == pytest.approx((0.008 * 99 + 0.203) / host_total, abs=1e-6)
    assert split["ran_ahead"] is True


@pytest.mark.parametrize(
    ("host", "ahead"),
    [(0.5, True), (RAN_AHEAD - 0.01, True), (RAN_AHEAD + 0.01, False), (1.0, False), (9.0, False)],
)
def test_the_host_ran_ahead_when_its_steps_are_shorter_than_the_device_work(
    host: float, ahead: bool
) -> None:
    split = device_split(_columns(10, 0.008 * host, (0.002, 0.005, 0.001)))
    assert split is not None and split["ran_ahead"] is ahead
    assert (ran_ahead_text(split) is not None) is ahead


def test_no_device_times_no_split_and_parts_never_measured_are_unknown() -> None:
    cols = _columns(4, 0.01, (np.nan, np.nan, np.nan))
    assert device_split(cols) is None
    assert device_split({"duration": cols["duration"]}) is None
    assert ran_ahead_text(None) is None
    cols["gpu_forward"][:] = 0.003  # an eval phase: forward only
    split = device_split(cols)
    assert split is not None and split["backward"] is None and split["optimizer"] is None
    assert split["forward"] == {"seconds": 0.003, "share": 1.0}


# -- show on the H200 jobs ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["stall", "healthy", "leak", "loader"])
def test_show_leads_with_the_device_split_of_a_gpu_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    job = h200_job(tmp_path, name)
    cols = train_columns(job)
    device = json.loads(show(job, capsys, "--json"))["steps"]["phases"]["train"]["device"]
    assert set(device) == {"steps", "forward", "backward", "optimizer", "step_seconds",
                           "host_step_seconds", "busy_share", "ran_ahead"}  # fmt: skip
    medians = {p: float(np.median(cols[f"gpu_{p}"])) for p in ("forward", "backward", "optimizer")}
    for part, median in medians.items():
        assert device[part]["seconds"] == pytest.approx(median, abs=1e-6)
        assert device[part]["share"] == pytest.approx(median / sum(medians.values()), abs=1e-5)
    work = cols["gpu_forward"] + cols["gpu_backward"] + cols["gpu_optimizer"]
    assert device["step_seconds"] == pytest.approx(np.median(work), abs=1e-6)
    busy = min(work.sum() / cols["duration"].sum(), 1.0)
    assert device["busy_share"] == pytest.approx(busy, abs=1e-5)
    host = float(np.median(cols["duration"]))
    assert device["ran_ahead"] is bool(host < RAN_AHEAD * np.median(work))

    text = show(job, capsys)
    assert text.index("device split: forward") < text.index("host split: data_wait")
    assert f"backward {medians['backward'] * 1000:.2f} ms" in text
    assert (AHEAD_WORDS in text) is device["ran_ahead"]


def test_on_the_stall_job_the_host_ran_ahead_and_on_the_healthy_one_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: host step p50 3.6 ms, device 2.9 + 5.6 + 0.43 ms a step."""
    stall = json.loads(show(h200_job(tmp_path, "stall"), capsys, "--json"))
    device = stall["steps"]["phases"]["train"]["device"]
    assert device["ran_ahead"] and device["host_step_seconds"] < 0.5 * device["step_seconds"]
    assert round(device["backward"]["seconds"] * 1000, 1) == 5.6
    healthy = json.loads(show(h200_job(tmp_path, "healthy"), capsys, "--json"))
    device = healthy["steps"]["phases"]["train"]["device"]
    assert not device["ran_ahead"] and device["busy_share"] > 0.95  # GPU-bound, paced by it
    text = show(tmp_path / "stall", capsys)
    line = next(x for x in text.splitlines() if AHEAD_WORDS in x)
    assert "launch queue" in line and "3.60 ms" in line and "8.96 ms" in line


def test_show_puts_gpu_memory_in_bytes_beside_its_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = h200_job(tmp_path, "leak")
    metrics = json.loads(show(job, capsys, "--json"))["system"]["nodes"]["vm"]["metrics"]
    text = show(job, capsys)
    (row,) = [x for x in text.splitlines() if "gpu0_mem" in x]
    used = metrics["gpu0_mem_used"]["p95"] / 1024**3
    assert row.split()[0] == "gpu0_mem_util"
    assert f"{metrics['gpu0_mem_util']['p95']:.1f} % ({used:.1f} GB)" in row


# -- twins without the H200 folders ----------------------------------------------------------


def _synthetic(tmp_path: Path, device: float | None) -> Path:
    """30 steps of 0.2 s, on a CPU (``device`` None) or with ``device`` s of GPU work each."""
    store = rd.new_job(tmp_path / "job", end=rd.T0 + 60)
    rd.write_process_start(store, time=rd.T0 + 0.2)
    frame = rd.steps_frame(30)
    if device is not None:
        for part, share in (("gpu_forward", 0.3), ("gpu_backward", 0.6), ("gpu_optimizer", 0.1)):
            frame[part] = np.float32(device * share)
    rd.write_steps(store, frame)
    rd.write_system(store, rd.system_frame(40))
    return tmp_path / "job"


def test_a_cpu_job_shows_no_device_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _synthetic(tmp_path, None)
    phases = json.loads(show(job, capsys, "--json"))["steps"]["phases"]
    assert "device" not in phases["train"]
    text = show(job, capsys)
    assert "         split: data_wait" in text
    assert not [x for x in text.splitlines() if x.lstrip().startswith(("device", "host split"))]
    assert AHEAD_WORDS not in text


@pytest.mark.parametrize(("device", "ahead"), [(0.5, True), (0.2, False), (0.05, False)])
def test_a_synthetic_gpu_job_says_the_host_ran_ahead_only_when_it_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], device: float, ahead: bool
) -> None:
    job = _synthetic(tmp_path, device)
    split = json.loads(show(job, capsys, "--json"))["steps"]["phases"]["train"]["device"]
    assert split["step_seconds"] == pytest.approx(device, rel=1e-5)
    assert split["busy_share"] == pytest.approx(min(device / 0.2, 1.0), rel=1e-5)
    assert split["ran_ahead"] is ahead
    assert (AHEAD_WORDS in show(job, capsys)) is ahead
