"""Live profiling windows: limits per kind, windows "from now" judged on arrival,
steps relative to the job's current one, and the CLI's words for them."""

from __future__ import annotations

import argparse

import pytest

from stepscope.agent import _window_state as state
from stepscope.cli import main
from stepscope.cli._profile import parse_steps, profile_windows
from stepscope.config import LIVE_WINDOW_LIMITS
from stepscope.errors import RequestError
from stepscope.jobfolder import describe, parse_request

KINDS = {
    "detailed": {"kind": "detailed"},
    "python (cprofile)": {"kind": "python", "python_profiler": "cprofile"},
    "python (pyinstrument)": {"kind": "python", "python_profiler": "pyinstrument"},
    "dataloader": {"kind": "dataloader"},
}


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize("unit", ["num_steps", "duration"])
def test_each_kind_takes_its_limit_and_rejects_more(name, unit, monkeypatch):
    monkeypatch.setattr("stepscope.jobfolder._requests._has_pyinstrument", lambda: True)
    limit = LIVE_WINDOW_LIMITS[name]
    at = limit.steps if unit == "num_steps" else limit.seconds
    ok = parse_request("r", {"windows": [{**KINDS[name], unit: at}]}, now=1.0)
    assert getattr(ok.windows[0].window, unit) == at  # the silent twin: at the limit
    with pytest.raises(RequestError, match=f"live {name.replace('(', '.').replace(')', '.')} "):
        parse_request("r", {"windows": [{**KINDS[name], unit: at + 1}]}, now=1.0)


def test_limits_are_documented():
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "docs" / "profiling.md").read_text()
    section = doc.split("## Limits of a live window", 1)[1].split("\n## ", 1)[0]
    for name, limit in LIVE_WINDOW_LIMITS.items():
        row = next((line for line in section.splitlines() if line.startswith(f"| {name} |")), "")
        assert f"{limit.steps:,}" in row and f"{limit.seconds:g} s" in row, name


def test_a_time_window_from_now_starts_when_the_job_applies_it():
    # read at t=100 with 1 s; the step boundary that applies it comes at t=105
    req = parse_request("r", {"windows": [{"kind": "python", "duration": 1}]}, now=100.0)
    planned = state.resolve(req.windows[0], 7, 105.0)
    assert planned.window.start_unix_time == 105.0
    assert not state.past(planned.window, 7, 105.0)
    assert state.missed_or_due(planned.window, 7, 105.0) == (False, True)
    assert describe(planned).endswith("for 1 s from now")


def test_a_time_window_with_a_given_start_is_still_judged_by_it():
    req = parse_request(
        "r", {"windows": [{"kind": "python", "start_unix_time": 100, "duration": 1}]}, now=100.0
    )
    assert state.past(state.resolve(req.windows[0], 7, 105.0).window, 7, 105.0)


def test_steps_relative_to_the_current_one():
    assert parse_steps("+0:3") == {"start_step": None, "step_offset": 0, "num_steps": 3}
    assert parse_steps("+10:2") == {"start_step": None, "step_offset": 10, "num_steps": 2}
    assert parse_steps("120:3") == {"start_step": 120, "num_steps": 3}
    req = parse_request("r", {"windows": [{"kind": "python", **parse_steps("+10:2")}]}, now=1.0)
    planned = state.resolve(req.windows[0], 57, 1.0)
    assert (planned.window.start_step, planned.window.end_step) == (67, 69)
    assert describe(planned).endswith("steps 67-68")


@pytest.mark.parametrize(
    "window",
    [
        {"kind": "python", "start_step": 3, "step_offset": 2},
        {"kind": "python", "step_offset": -1},
        {"kind": "python", "step_offset": "5"},
    ],
)
def test_a_bad_step_offset_is_rejected(window):
    with pytest.raises(RequestError, match="step_offset"):
        parse_request("r", {"windows": [window]}, now=1.0)


def _args(**given: object) -> argparse.Namespace:
    base = {"detailed": False, "python": None, "dataloader": False, "steps": None,
            "start_time": None, "duration": None, "timer": "total_time",
            "metrics_regex": ".*", "record_shapes": False, "profile_memory": False,
            "with_stack": False, "memory": False, "max_entries": 100_000}  # fmt: skip
    return argparse.Namespace(**{**base, **given})


def test_the_cli_asks_for_a_memory_window_and_the_parser_takes_it():
    (window,) = profile_windows(_args(memory=True, steps="+2:3", max_entries=5000))
    assert window == {"kind": "memory", "start_step": None, "step_offset": 2, "num_steps": 3,
                      "max_entries": 5000}  # fmt: skip
    (planned,) = parse_request("r", {"windows": [window]}, now=1.0).windows
    assert planned.window.kind == "memory" and planned.window.max_entries == 5000
    with pytest.raises(RequestError, match="max_entries"):
        parse_request("r", {"windows": [{**window, "max_entries": 0}]}, now=1.0)
    with pytest.raises(RequestError, match="over the limit of 200 steps"):
        parse_request("r", {"windows": [{**window, "num_steps": 201}]}, now=1.0)


def test_a_live_memory_window_without_cuda_is_refused_in_the_answer(monkeypatch):
    import torch

    req = parse_request("r", {"windows": [{"kind": "memory", "num_steps": 2}]}, now=1.0)
    windows = [state.resolve(p, 7, 1.0) for p in req.windows]
    said = state.refusal(windows, 7, 1.0)  # this process has not initialised CUDA
    assert said is not None and said.startswith("memory steps 7-8 cannot run: no CUDA device")
    # its twin: a process that uses CUDA (as the allocator stand-in makes it look)
    monkeypatch.setattr(torch.cuda, "_initialized", True)
    assert state.refusal(windows, 7, 1.0) is None


def test_the_cli_leaves_now_to_the_job():
    (window,) = profile_windows(_args(detailed=True, start_time="now", duration=2.0))
    assert window["start_unix_time"] is None and window["duration"] == 2.0


def test_the_dashboard_leaves_now_to_the_job_and_checks_the_limits():
    from stepscope.dashboard._controls import BadRequest
    from stepscope.dashboard._controls import profile_windows as dashboard_windows

    (window,) = dashboard_windows({"detailed": True, "start_time": "now", "duration": 2})
    assert window["start_unix_time"] is None and window["duration"] == 2
    with pytest.raises(BadRequest, match="over the limit of 200 steps"):
        dashboard_windows({"detailed": True, "num_steps": 10**11})


def test_profile_with_nothing_asked_names_the_flags(tmp_path, capsys):
    assert main(["profile", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--detailed" in err and "--python" in err and "--off" in err
    assert "'windows'" not in err and "'off'" not in err


@pytest.mark.process
def test_windows_cut_by_the_job_end_write_what_they_have(tmp_path):
    """The longest windows allowed, asked early in a short job: both end with the job."""
    import gzip
    import json
    import pstats
    import subprocess
    import sys
    import time
    from pathlib import Path

    import stepscope
    from conftest import BIN, SCRIPTS, env_for_tests
    from stepscope.jobfolder import control
    from stepscope.store import open_store

    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp_path), "--job", "cut", "--no-rules"]
    script = [sys.executable, str(SCRIPTS / "mlp.py"), "--steps", "150", "--step-sleep", "0.03"]
    proc = subprocess.Popen([*cmd, "--", *script], env=env_for_tests(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    job_path = tmp_path / "cut"
    try:
        deadline = time.monotonic() + 120
        while not (job_path / "steps").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        detailed = LIVE_WINDOW_LIMITS["detailed"].steps
        python = LIVE_WINDOW_LIMITS["python (cprofile)"].steps
        windows = [{"kind": "detailed", "num_steps": detailed},
                   {"kind": "python", "num_steps": python}]  # fmt: skip
        name = control.request_profile(open_store(job_path), windows, "test")
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    job = stepscope.open(job_path)
    records = {r["kind"]: r for r in job.profiling_artifacts()}
    assert set(records) == {"detailed", "python"}, records
    for kind, asked in (("detailed", detailed), ("python", python)):
        record = records[kind]
        assert record["request"] == name
        assert record["end_step"] == 149  # cut by the job's end, with its last step
        assert record["end_step"] - record["start_step"] + 1 < asked
    with gzip.open(Path(job.path, records["detailed"]["path"])) as f:
        assert json.load(f)["traceEvents"]
    stats = pstats.Stats(str(Path(job.path, records["python"]["path"])))
    assert any(Path(f).name == "mlp.py" for f, _, _ in stats.stats)  # type: ignore[attr-defined]
