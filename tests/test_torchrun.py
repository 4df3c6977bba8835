"""torchrun jobs: DDP (gloo, CPU) on one node and on two nodes, in a loopback-only netns.

torchrun's store listens on every interface, so every run happens inside
``unshare -n`` with only ``lo`` up (docs/distributed.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder
from stepscope.agent.frameworks._torch_collectives import CollectiveTimer
from stepscope.launch._clocksync import TimeServer, measure, skewed_clock
from stepscope.launch._dist_job import aggregate
from stepscope.launch._torchrun import TorchrunUsageError, plan, torchrun_command
from stepscope.rules import RuleConfigError, RuleInput, Status, evaluate_job
from stepscope.rules.straggler import Straggler

DDP = str(SCRIPTS / "ddp_train.py")
SKEW_S = 30.0
SLOW_S = 0.03


def _netns_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = ["unshare", "-n", "sh", "-c", "ip link set lo up"]
    return subprocess.run(probe, capture_output=True).returncode == 0


needs_netns = pytest.mark.skipif(
    not _netns_works(),
    reason="needs `unshare -n` and `ip` (root or user namespaces): torchrun must run in a "
    "loopback-only network namespace",
)


def _stepscope(out: Path, job: str, *args: str) -> str:
    cmd = [str(BIN / "stepscope"), "run", "-o", str(out), "--job", job, *args]
    return " ".join(f"'{a}'" for a in cmd)


def _in_netns(script: str, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the shell ``script`` in a new network namespace with only loopback up."""
    cmd = ["unshare", "-n", "sh", "-c", f"ip link set lo up && {script}"]
    environ = env_for_tests(GLOO_SOCKET_IFNAME="lo", **env)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=environ)
    (out / "log.txt").write_text(p.stdout + p.stderr)
    return p


def _rule(job: Any, name: str) -> Any:
    (result,) = evaluate_job(job, [{"name": name}])
    return result


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Two nodes on this machine, node 1 with a clock 30 s off, rank 1 slow."""
    out = tmp_path_factory.mktemp("two")
    common = "--nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29511"
    train = f"{DDP} --steps 80 --slow-rank 1 --slow-s 0.03"
    nodes = [
        f"{skew}{_stepscope(out, 'job')} -- torchrun {common} --node-rank {i} {train}"
        f" > {out}/node{i}.log 2>&1"
        for i, skew in ((0, ""), (1, f"{'STEPSCOPE_TEST_CLOCK_OFFSET_S'}={SKEW_S} "))
    ]
    p = _in_netns(f"{nodes[0]} & {nodes[1]}; s1=$?; wait $!; wait; exit $s1", out)
    logs = "".join((out / f"node{i}.log").read_text() for i in (0, 1))
    assert p.returncode == 0, logs[-3000:]
    return out / "job", logs


@pytest.mark.process
@needs_netns
def test_two_processes_on_one_node_balanced(tmp_path: Path) -> None:
    run = _stepscope(tmp_path, "one", "--nproc-per-node", "2", "--", DDP, "--steps", "60")
    p = _in_netns(run, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1])["world"] == 2
    job = stepscope.open(tmp_path / "one")
    assert job.status == "Completed"
    assert job.meta["distributed"]["launcher"] == "torchrun"
    assert job.ranks() == [0, 1]
    assert job.nodes() == job.meta["hosts"]  # one sampler for the node, not one per rank
    steps = job.steps(phase="train")
    assert steps.groupby("rank")["step"].count().tolist() == [60, 60]
    assert steps["collective"].notna().all() and (steps["collective"] > 0).any()
    assert sorted(steps["local_rank"].unique()) == [0, 1]
    assert steps["node"].nunique() == 1
    events = job.events(kinds=["agent_start"])
    assert sorted(events["rank"]) == [0, 1]
    ranks = [job.store.read_json(f"ranks/rank-{r}.json")["status"] for r in (0, 1)]
    assert ranks == ["Exited", "Exited"]
    straggler = _rule(job, "Straggler")
    assert straggler.status is Status.NO_ISSUES_FOUND, straggler.message
    assert straggler.datapoints > 0
    live = job.store.read_json("rules/Straggler.json")
    assert live["status"] == "NoIssuesFound" and live["datapoints"] > 0


@pytest.mark.process
@needs_netns
def test_two_nodes_share_one_job(two_nodes: tuple[Path, str]) -> None:
    path, _ = two_nodes
    job = stepscope.open(path)
    assert job.status == "Completed"
    nodes = sorted(job.meta["nodes_status"])
    assert len(nodes) == 2 and all(n.endswith(("-node0", "-node1")) for n in nodes)
    assert job.nodes() == nodes  # one sampler per node, into system/<node>/
    assert sorted(job.store.listdir("heartbeat")) == [f"{n}.json" for n in nodes]
    steps = job.steps(phase="train")
    assert dict(zip(steps["rank"], steps["node"], strict=True)) == {0: nodes[0], 1: nodes[1]}


@pytest.mark.process
@needs_netns
def test_clock_offset_of_a_node_is_measured_and_corrected(two_nodes: tuple[Path, str]) -> None:
    path, _ = two_nodes
    job = stepscope.open(path)
    node1 = job.store.read_json(f"clock/{job.meta['hosts'][1]}.json")
    assert node1["offset_s"] == pytest.approx(-SKEW_S, abs=0.5)
    assert node1["reference"] == job.meta["hosts"][0]
    # DDP ends every step together: aligned clocks put both ranks' step ends together,
    # where node 1's uncorrected clock would put them 30 s apart.
    ends = job.steps(phase="train").pivot(index="step", columns="rank", values="end")
    assert (ends[1] - ends[0]).abs().median() < 1.0
    # The node's sampler takes the same offset: it records it, and its samples end with
    # node 0's (both samplers end with their node's training, which ends together).
    hosts = job.meta["hosts"]
    facts = [job.store.read_json(f"nodes/{n}.json")["clock_offset_s"] for n in hosts]
    assert facts[0] == 0.0 and facts[1] == pytest.approx(node1["offset_s"])
    last = job.system().groupby("node")["time"].max()
    assert abs(last[hosts[1]] - last[hosts[0]]) < 5.0, last  # 30 s apart if uncorrected


@pytest.mark.process
@needs_netns
def test_slow_rank_is_named_by_straggler(two_nodes: tuple[Path, str]) -> None:
    path, _ = two_nodes
    job = stepscope.open(path)
    result = _rule(job, "Straggler")
    assert result.status is Status.ISSUES_FOUND, result.message
    assert {f.rank for f in result.findings} == {1}
    assert {f.node for f in result.findings} == {job.meta["hosts"][1]}
    assert "data_wait of rank 1" in result.findings[0].message
    live = job.store.read_json("rules/Straggler.json")  # the rule runner of node rank 0
    assert {f["rank"] for f in live["findings"]} == {1}


@pytest.mark.process
@needs_netns
def test_peers_wait_at_collectives_for_a_rank_slow_in_backward(tmp_path: Path) -> None:
    # Slow in backward compute: every rank's backward and duration look the same (the
    # fast ones wait inside backward for the all-reduce); only the wait tells them apart.
    train = [DDP, "--steps", "60", "--slow-rank", "1", "--slow-s", str(SLOW_S)]
    train += ["--slow-in", "backward", "--allreduce-loss"]
    run = _stepscope(tmp_path, "slow", "--nproc-per-node", "2", "--", *train)
    p = _in_netns(run, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    job = stepscope.open(tmp_path / "slow")
    waits = job.steps(phase="train").query("step >= 5").groupby("rank")["collective"].median()
    # rank 0 cannot finish a step's all-reduce before rank 1 has slept: a causal bound
    assert waits[0] > SLOW_S / 2 and waits[1] < waits[0] / 3, waits
    result = _rule(job, "Straggler")
    assert result.status is Status.ISSUES_FOUND, result.message
    assert [f.rank for f in result.findings] == [1]
    assert result.findings[0].message.startswith("busy time (step time outside collectives)")
    assert "its peers waited" in result.findings[0].message


@pytest.mark.process
@needs_netns
def test_crashing_rank_fails_the_job_and_is_named(tmp_path: Path) -> None:
    train = [DDP, "--steps", "40", "--crash-rank", "1", "--crash-at", "5"]
    p = _in_netns(_stepscope(tmp_path, "crash", "--nproc-per-node", "2", "--", *train), tmp_path)
    assert p.returncode != 0
    meta = stepscope.open(tmp_path / "crash").meta
    assert meta["status"] == "Failed"
    assert meta["reason"].startswith("rank 1 (local rank 1) on node ")
    assert "injected crash at step 5" in meta["reason"]
    assert meta["failed_ranks"][0]["rank"] == 1


# -- without torchrun: the command, the plan, the status, the clock, the rule ----------
def _args(**given: Any) -> argparse.Namespace:
    return argparse.Namespace(**given)


def test_torchrun_command_wraps_scripts_modules_and_programs() -> None:
    head = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    args = _args(nproc_per_node="2")
    assert torchrun_command(args, [DDP, "--x"]) == [*head, DDP, "--x"]
    assert torchrun_command(args, ["python", DDP]) == [*head, DDP]
    assert torchrun_command(args, ["python3", "-m", "pkg.train"]) == [*head, "-m", "pkg.train"]
    assert torchrun_command(args, ["bash", "x.sh"]) == [*head, "--no-python", "bash", "x.sh"]
    assert torchrun_command(_args(), ["python", DDP]) == ["python", DDP]
    with pytest.raises(TorchrunUsageError, match="torchrun already"):
        torchrun_command(args, ["torchrun", DDP])


def test_plan_reads_torchrun_arguments() -> None:
    cmd = ["torchrun", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.5", DDP]
    p = plan(cmd, {}, "host")
    assert p is not None and (p.node, p.leader, p.rendezvous_host) == (
        "host-node1",
        False,
        "10.0.0.5",
    )
    p = plan(["torchrun", "--standalone", "--nproc-per-node", "2", DDP], {}, "host")
    assert p is not None and (p.node, p.leader, p.multi_node) == ("host", True, False)
    assert plan(["python", DDP], {}, "host") is None
    c10d = ["torchrun", "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:29400"]
    with pytest.raises(TorchrunUsageError, match="give each node its own --node-rank"):
        plan([*c10d, DDP], {}, "host")
    p = plan([*c10d, "--node-rank", "1", DDP, "--node-rank", "0"], {}, "host")
    assert p is not None and (p.node_rank, p.rendezvous_host) == (1, "h")


@pytest.mark.process
def test_stepscope_run_rejects_torchrun_options_twice(tmp_path: Path) -> None:
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp_path), "--nproc-per-node", "2"]
    p = subprocess.run([*cmd, "--", "torchrun", DDP], capture_output=True, text=True)
    assert p.returncode == 2 and "not to both" in p.stderr


def test_job_status_aggregates_nodes_and_ranks() -> None:
    now = time.time()
    done = {"node": "a", "status": "Completed", "end_time": now, "exit_code": 0}
    running = {"node": "b", "status": "Running"}
    assert aggregate([done, running], [], {"b": now}, now)["status"] == "Running"
    assert aggregate([done, running], [], {"b": now - 60}, now)["status"] == "Failed"
    failed = {"node": "b", "status": "Failed", "end_time": now, "exit_code": 1}
    dead = {"rank": 3, "local_rank": 1, "node": "b", "status": "Running", "time": now}
    meta = aggregate([done, failed], [dead], {}, now)
    assert meta["status"] == "Failed" and meta["exit_code"] == 1
    assert meta["reason"].startswith("rank 3 on node b ended without a record")
    assert "incomplete" not in meta  # a rank still Running may yet be recorded
    # a rank recorded Abrupt by its node's launcher: the whole job's data is incomplete
    line = "rank 3 ended without its agent's end (...): ended without flushing; up to 1.0 s"
    meta = aggregate([done, failed], [dead | {"status": "Abrupt", "error": line}], {}, now)
    assert meta["reason"].startswith("rank 3 on node b ended without a record")
    assert meta["incomplete"] is True and meta["incomplete_reason"] == line
    two = [dead | {"status": "Abrupt", "error": line}, dead | {"rank": 1, "status": "Abrupt"}]
    assert aggregate([done], two, {}, now)["incomplete_reason"].startswith("2 ranks (3, 1) ended")


def test_clock_offset_is_measured_against_the_reference() -> None:
    server = TimeServer("127.0.0.1", skewed_clock(12.5)).start()
    try:
        offset = measure("127.0.0.1", server.port, skewed_clock(0.0))
    finally:
        server.close()
    assert offset.offset_s == pytest.approx(12.5, abs=0.2)
    assert 0 <= offset.error_s < 0.2


def _steps(slow: dict[int, float], n: int = 60) -> pd.DataFrame:
    rows = []
    for rank in (0, 1, 2, 3):
        for step in range(n):
            wait = slow.get(rank, 0.001)
            rows.append(
                {"rank": rank, "node": f"n{rank // 2}", "phase": "train", "step": step,
                 "start": step * 0.1, "end": step * 0.1 + 0.1, "duration": 0.1,
                 "data_wait": wait, "forward": 0.02, "backward": 0.05, "optimizer": 0.01,
                 "other": 0.001, "profiled": False}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_straggler_rule_names_the_slow_rank_only() -> None:
    found = Straggler().evaluate(RuleInput(steps=_steps({2: 0.05})))
    assert found.status is Status.ISSUES_FOUND
    assert [(f.rank, f.node) for f in found.findings] == [(2, "n1")]
    quiet = Straggler().evaluate(RuleInput(steps=_steps({})))
    assert quiet.status is Status.NO_ISSUES_FOUND and quiet.datapoints > 0
    short = Straggler(patience=5).evaluate(RuleInput(steps=_steps({2: 0.05}, n=60)))
    assert short.status is Status.NO_ISSUES_FOUND  # only 3 windows: less than the patience
    with pytest.raises(RuleConfigError, match="comma-separated list"):
        Straggler(metrics="data_wait,gpu_time")


def _ddp_steps(slow_rank: int | None) -> pd.DataFrame:
    """DDP-like steps: equal durations and backward; peers of a slow rank wait in it."""
    frame = _steps({})
    slow = frame["rank"] == slow_rank
    return frame.assign(collective=np.where(slow, 0.001, 0.04 if slow_rank is not None else 0.001))


def test_straggler_names_the_rank_its_peers_wait_for() -> None:
    found = Straggler().evaluate(RuleInput(steps=_ddp_steps(3)))
    assert found.status is Status.ISSUES_FOUND
    assert [(f.rank, f.node) for f in found.findings] == [(3, "n1")]
    assert found.findings[0].message.startswith("busy time")
    quiet = Straggler().evaluate(RuleInput(steps=_ddp_steps(None)))
    assert quiet.status is Status.NO_ISSUES_FOUND
    # a rank named for its data wait is not named again for the busy time it causes
    both = _steps({2: 0.05}).assign(collective=0.0)
    assert [
        f.message.split(" of ")[0] for f in Straggler().evaluate(RuleInput(steps=both)).findings
    ] == ["data_wait"]


def test_collectives_outside_the_step_parts_are_not_other() -> None:
    rows: deque = deque()
    rec = StepRecorder(rows)
    rec.on_collective(0.0, 0.5, False)  # before the first step: set-up, not counted
    rec.on_forward_start(1.0)
    rec.on_collective(1.1, 1.2, False)  # inside forward (DDP's buffer broadcast)
    rec.on_forward_end(1.3, training=True)
    rec.on_collective(1.4, 1.5, True)  # inside backward (DDP's gradient all-reduce)
    rec.on_collective(1.6, 1.9, False)  # the script's own all_reduce of the loss
    rec.on_optimizer_start(2.0)
    rec.on_optimizer_end(2.1)
    collective, outside = rows[0][8:10]
    assert (collective, outside) == (pytest.approx(0.5), pytest.approx(0.3))


class _Calls:
    """Records what the collective timer reports."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float, bool]] = []

    def on_collective(self, t0: float, t1: float, in_backward: bool) -> None:
        self.calls.append((t0, t1, in_backward))


def test_collectives_called_from_python_are_timed_once_and_unwrapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import Work

    originals = (dist.all_reduce, dist.distributed_c10d.all_gather, Work.wait,
                 torch.autograd.backward)  # fmt: skip
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    rec = _Calls()
    timer = CollectiveTimer(rec, FaultBoundary(None, {}))  # type: ignore[arg-type]
    timer.install()
    try:
        dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1),
                                rank=0, world_size=1)  # fmt: skip
        dist.all_reduce(torch.ones(3))
        dist.all_gather_object([None], {"a": 1})  # two all_gathers inside: one interval
        dist.all_reduce(torch.ones(3), async_op=True).wait()  # the call, then the wait
        torch.nn.Linear(3, 1)(torch.ones(3)).sum().backward()  # the tail of backward
        dist.destroy_process_group()
    finally:
        timer.remove()
    assert [c[2] for c in rec.calls] == [False, False, False, False, True]
    assert all(t1 >= t0 for t0, t1, _ in rec.calls)
    restored = (dist.all_reduce, dist.distributed_c10d.all_gather, Work.wait,
                torch.autograd.backward)  # fmt: skip
    assert restored == originals
