"""A step of the wall clock during a run (issue 31: an NTP correction of +-1 h).

Injected through an ``LD_PRELOAD`` shim (compiled here with the system C compiler):
every process of the job (launcher, agent, sampler, rule runner) sees the wall clock
jump by the step once a trigger file appears, mid-training or between the launcher's
start and its helpers' and agent's. The job's times and
durations keep the monotonic clock of its start (docs/format.md, "One clock"): no
duration changes, none is negative, every row (steps, samples, tensors) and fault
record stays on the job's timeline, the rule runner keeps judging and ends by itself,
the step is recorded as a fault, and the training's result is a bare run's.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import stepscope
from conftest import BIN, env_for_tests
from test_fault_matrix import ARGS, MLP, state_hash, wait_for

STEP_S = 3600.0
PACE = ["--step-sleep", "0.05"]  # about 8 s of training: room for a step in the middle
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc for the clock shim"),
]

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The wall clock steps by STEPSCOPE_TEST_CLOCK_STEP_S seconds once the file
   STEPSCOPE_TEST_CLOCK_FILE exists; the monotonic clocks do not. */
static long long step_ns(void) {
    const char *file = getenv("STEPSCOPE_TEST_CLOCK_FILE");
    const char *step = getenv("STEPSCOPE_TEST_CLOCK_STEP_S");
    if (file == NULL || step == NULL || access(file, F_OK) != 0) return 0;
    return (long long)(atof(step) * 1e9);
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        long long t = ts->tv_sec * 1000000000LL + ts->tv_nsec + step_ns();
        ts->tv_sec = t / 1000000000LL;
        ts->tv_nsec = t % 1000000000LL;
    }
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0 && tv != NULL) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    (void)tz;
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}
"""


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The hash of the state a bare run (no stepscope, no shim) saves."""
    save = tmp_path_factory.mktemp("bare") / "bare.pt"
    cmd = [sys.executable, MLP, *ARGS, "--save", str(save)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=240, env=env_for_tests())
    return state_hash(save)


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shim")
    (folder / "shim.c").write_text(SHIM)
    lib = folder / "libclockstep.so"
    cmd = ["gcc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(folder / "shim.c"), "-ldl"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return lib


def test_the_shim_steps_the_wall_clock_only(shim: Path, tmp_path: Path) -> None:
    """The injection itself: time.time() jumps, time.monotonic() does not."""
    flag = tmp_path / "step"
    flag.touch()
    env = env_for_tests(LD_PRELOAD=str(shim), STEPSCOPE_TEST_CLOCK_FILE=str(flag),
                        STEPSCOPE_TEST_CLOCK_STEP_S="-3600")  # fmt: skip
    code = "import time, json; print(json.dumps([time.time(), time.monotonic()]))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=60).stdout  # fmt: skip
    wall, mono = json.loads(out)
    assert time.time() - wall == pytest.approx(STEP_S, abs=30)
    assert abs(time.monotonic() - mono) < 30


def _steps_started(job_dir: Path) -> bool:
    return any((job_dir / "steps").glob("rank-0/part-*.parquet"))


def _refused_requests(job_dir: Path) -> None:
    """A request nested too deep for each reader of control/ (the agent, the sampler, the
    launcher): each refuses it in a fault record of its own process, at its own time."""
    (job_dir / "control").mkdir(exist_ok=True)
    for reader in ("profile", "config", "stop"):
        (job_dir / "control" / f"{reader}-0000000000001-deep.json").write_text("[" * 100)


def _on_the_timeline(times: list[float], meta: dict[str, Any], what: str) -> None:
    """Every time in the job's span (job.json's start and end), none an hour off."""
    start, end = float(meta["start_time"]), float(meta["end_time"])
    assert times, what
    assert start - 1 <= min(times) and max(times) <= end + 5, (what, start, end, times)


@pytest.mark.parametrize(
    ("step", "when"),
    [(STEP_S, "mid-run"), (-STEP_S, "mid-run"), (STEP_S, "before-the-agent")],
    ids=["plus-1h", "minus-1h", "plus-1h-before-the-agent"],
)
def test_a_wall_clock_step_changes_no_duration(
    shim: Path,
    tmp_path: Path,
    bare: str,
    step: float,
    when: str,
) -> None:
    """The step mid-run, or between the launcher's start and its helpers' and agent's
    (the trigger is job.json: the launcher's clock read comes before it). Every row
    (steps, samples, tensors) and every fault record keeps the job's timeline."""
    out = tmp_path / "out"
    flag = out / "j" / "job.json" if when == "before-the-agent" else tmp_path / "step"
    env = env_for_tests(LD_PRELOAD=str(shim), STEPSCOPE_TEST_CLOCK_FILE=str(flag),
                        STEPSCOPE_TEST_CLOCK_STEP_S=repr(step))  # fmt: skip
    config = tmp_path / "stepscope.toml"  # the loss of every step: tensor rows through it
    config.write_text("[debugger.hook_parameters]\nsave_interval = 1\n")
    cmd = [str(BIN / "stepscope"), "run", "-o", str(out), "--job", "j", "--config", str(config)]
    cmd += ["--", sys.executable, MLP, *ARGS, *PACE, "--save", str(tmp_path / "traced.pt")]
    with open(tmp_path / "stderr", "w") as stderr:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        try:
            wait_for(lambda: _steps_started(out / "j"), "the first flushed steps")
            flag.touch()  # mid-training: every process's wall clock steps now
            _refused_requests(out / "j")  # fault records made after the step
            assert proc.wait(timeout=240) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    said = (tmp_path / "stderr").read_text()
    job = stepscope.open(str(out / "j"))
    meta, steps = job.meta, job.steps()
    # The job's duration: the monotonic one, at least the training's steps, not an hour.
    trained = float(steps["duration"].sum())
    duration = float(meta["duration_s"] or 0)
    assert trained <= duration < STEP_S / 10
    assert meta["end_time"] - meta["start_time"] == pytest.approx(duration, abs=0.05)
    took = float(re.findall(r"Completed \(exit 0\) after (-?[\d.]+) s", said)[0])
    assert trained <= took < STEP_S / 10
    # No time of the data jumped: steps and samples go on from where they were.
    assert len(steps) == int(ARGS[1])
    ends = sorted(float(t) for t in steps["end"])
    assert max(b - a for a, b in itertools.pairwise(ends)) < STEP_S / 10
    samples = sorted(float(t) for t in job.system()["time"])
    assert max(b - a for a, b in itertools.pairwise(samples)) < STEP_S / 10
    # Every row and fault record on the job's timeline: none an hour off, none jumped.
    _on_the_timeline([*steps["start"], *steps["end"]], meta, "steps")
    _on_the_timeline(samples, meta, "system samples")
    scalars = pq.read_table(out / "j" / "tensors" / "rank-0" / "scalars").to_pandas()
    losses = scalars.sort_values("step")["time"].tolist()
    assert len(set(scalars["step"])) == int(ARGS[1])  # the loss of every step
    assert all(b >= a for a, b in itertools.pairwise(losses))  # in step order, monotonic
    _on_the_timeline(losses, meta, "tensor rows")
    refused = [f for f in job.faults() if f.get("component") == "control"]
    assert len({f["pid"] for f in refused}) == 3, refused  # agent, sampler, launcher
    stamps = [float(f[k]) for f in job.faults() for k in ("first_time", "time") if k in f]
    _on_the_timeline(stamps, meta, "fault records")
    # The step is recorded, said once, and its size right.
    (fault,) = [f for f in job.faults() if f.get("component") == "clock-step"]
    assert fault["step_seconds"] == pytest.approx(step, abs=30) and fault["count"] == 1
    assert said.count("the wall clock stepped") == 1
    # The rule runner kept judging, and finished by itself: final verdicts of every step.
    outlier = json.loads((out / "j" / "rules" / "StepOutlier.json").read_text())
    assert outlier["status"] != "InProgress" and outlier["datapoints"] > 0
    assert not [f for f in job.faults() if str(f.get("component")).startswith("helper-")]
    # Readers: no negative duration, none of an hour.
    listed = json.loads(_cli("ls", str(out), "--json"))
    assert 0 < listed[0]["duration_seconds"] == pytest.approx(duration, abs=0.01)
    shown = json.loads(_cli("show", str(out / "j"), "--json"))
    assert shown["duration_seconds"] == pytest.approx(duration, abs=0.01)
    assert shown["init_seconds"] is not None and 0 <= shown["init_seconds"] < duration
    assert state_hash(tmp_path / "traced.pt") == bare


def _cli(*args: str) -> str:
    cmd = [str(BIN / "stepscope"), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env_for_tests())
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_no_step_no_fault(shim: Path, tmp_path: Path) -> None:
    """The silent twin: under the same shim, without the trigger, nothing is recorded."""
    env = env_for_tests(LD_PRELOAD=str(shim), STEPSCOPE_TEST_CLOCK_FILE=str(tmp_path / "never"),
                        STEPSCOPE_TEST_CLOCK_STEP_S="3600")  # fmt: skip
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp_path / "out"), "--job", "j", "--"]
    cmd += [sys.executable, MLP, "--steps", "30"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr
    job = stepscope.open(str(tmp_path / "out" / "j"))
    assert not [f for f in job.faults() if f.get("component") == "clock-step"]
    assert "the wall clock stepped" not in done.stderr
    assert len(job.steps()) == 30 and float(job.meta["duration_s"] or 0) > 0
    assert os.environ.get("LD_PRELOAD") is None  # the shim never leaked into the tests
