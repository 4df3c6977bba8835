"""TensorFlow ``MultiWorkerMirroredStrategy`` jobs: one ``stepscope run`` per worker, each
with its own ``TF_CONFIG``, into one job with one rank per worker (docs/tensorflow.md).

The end-to-end tests train real workers (tests/scripts/tf_multiworker.py) in a
loopback-only network namespace: their gRPC servers listen on the ports of
``TF_CONFIG``. Skipped when TensorFlow is not installed: ``pip install -e '.[tensorflow]'``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import stepscope
from conftest import BIN, SCRIPTS, env_for_tests, needs_tensorflow
from stepscope.agent.bootstrap import settings_from_env
from stepscope.cli import main
from stepscope.launch._clocksync import Offset
from stepscope.launch._dist_job import NodeLauncher
from stepscope.launch._tfconfig import TFConfigError, tf_plan
from stepscope.launch._torchrun import Plan
from stepscope.rules import LoadBalancing, RuleInput, Status, evaluate_job
from stepscope.rules.straggler import Straggler
from stepscope.sampler.main import _parser as sampler_parser
from stepscope.store import open_store

TRAIN = str(SCRIPTS / "tf_multiworker.py")
SLOW_S = 0.03
STEPS = "120"  # the Straggler defaults: 5 skipped, then 3 windows of 20 at least


def _tf_config(kind: str, index: int, **cluster: list[str]) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


# -- the plan of one worker, the agent's rank --------------------------------------------


def test_rank_comes_from_tf_config_chief_first() -> None:
    workers = ["10.0.0.2:2222", "10.0.0.3:2222"]
    env = {"TF_CONFIG": _tf_config("worker", 1, chief=["10.0.0.1:2222"], worker=workers)}
    plan = tf_plan(env, "host")
    assert plan is not None
    assert (plan.rank, plan.node_rank, plan.nnodes, plan.node) == (2, 2, "3", "host-node2")
    assert (plan.launcher, plan.rendezvous_host, plan.leader) == ("tf_config", "10.0.0.1", False)
    chief = tf_plan({"TF_CONFIG": _tf_config("chief", 0, chief=["h:1"], worker=workers)}, "h")
    assert chief is not None and chief.leader and chief.rank == 0
    # no chief: worker 0 is rank 0; a node named by STEPSCOPE_NODE keeps its name
    alone = tf_plan(
        {"TF_CONFIG": _tf_config("worker", 0, worker=workers), "STEPSCOPE_NODE": "a"}, "a"
    )
    assert alone is not None and (alone.rank, alone.node) == (0, "a")


def test_tasks_that_do_not_train_and_no_tf_config_make_no_plan() -> None:
    assert tf_plan({}, "h") is None
    evaluator = _tf_config("evaluator", 0, worker=["h:1"], evaluator=["h:2"])
    assert tf_plan({"TF_CONFIG": evaluator}, "h") is None


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("{not json", "is not JSON"),
        ('{"cluster": {"worker": ["h:1"]}}', "needs a 'cluster' object and a 'task'"),
        (
            _tf_config("worker", 2, worker=["h:1", "h:2"]),
            "names task worker 2, but its cluster has 2",
        ),
    ],
)
def test_bad_tf_config_is_a_clear_error(raw: str, words: str) -> None:
    with pytest.raises(TFConfigError, match="It must be JSON like") as err:
        tf_plan({"TF_CONFIG": raw}, "h")
    assert words in str(err.value)


def test_run_with_a_bad_tf_config_says_so_before_any_job_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TF_CONFIG", "{not json")
    assert main(["run", "-o", str(tmp_path / "out"), "--", "true"]) == 2
    assert "TF_CONFIG is not JSON" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_agent_takes_the_launchers_rank_unless_torchrun_sets_one() -> None:
    spec = json.dumps({"job_url": "file:///j", "node": "n", "rank": 1})
    settings = settings_from_env({"STEPSCOPE_AGENT": spec})
    assert settings is not None and (settings.rank, settings.local_rank) == (1, 0)
    torch = settings_from_env({"STEPSCOPE_AGENT": spec, "RANK": "3"})
    assert torch is not None and torch.rank == 3


def test_sampler_takes_a_tiny_negative_clock_offset(tmp_path: Path) -> None:
    """A node on the reference's machine measures microseconds, e.g. -1.2e-05."""
    node = NodeLauncher(Plan("2", 1, "127.0.0.1", "h-node1", 0.5), open_store(str(tmp_path)))
    node.offset = Offset(-1.2e-05, 0.0)
    args = sampler_parser().parse_args(["--job-url", "x", "--node", "n", *node.sampler_args()])
    assert (args.clock_offset_s, args.clock_skew_s) == (-1.2e-05, 0.5)


# -- Straggler where the collectives are not measured ------------------------------------

UNMEASURED = {"distributed": {"launcher": "tf_config", "nnodes": "2", "collectives": "unmeasured"}}


def _tf_steps(slow_data: float, where: str = "forward") -> pd.DataFrame:
    """Two synchronous workers: rank 1's input pipeline takes ``slow_data`` s more a step
    and rank 0 waits that long at the all-reduce in ``where`` (durations equal)."""
    rows = []
    for rank in (0, 1):
        for step in range(80):
            parts = {"data_wait": 0.001, "forward": 0.01, "other": 0.001}
            parts["data_wait" if rank == 1 else where] += slow_data
            rows.append(
                {"rank": rank, "node": f"h-node{rank}", "phase": "train", "step": step,
                 "start": step * 0.05, "end": step * 0.05 + 0.05, "duration": 0.012 + slow_data,
                 "backward": 0.0, "optimizer": 0.0, "collective": 0.0, "profiled": False, **parts}
            )  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("where", ["forward", "other"])
def test_straggler_never_names_the_worker_that_waits(where: str) -> None:
    found = Straggler().evaluate(RuleInput(steps=_tf_steps(SLOW_S, where), meta=UNMEASURED))
    assert found.status is Status.ISSUES_FOUND
    assert [(f.rank, f.message.split(" of ")[0]) for f in found.findings] == [(1, "data_wait")]
    assert found.details["not_judged"] == ["forward", "optimizer", "busy"]
    assert "not judged: forward, optimizer, busy" in found.message
    # what it would say if it judged them: the waiting rank 0 named
    blind = Straggler().evaluate(RuleInput(steps=_tf_steps(SLOW_S, where)))
    assert 0 in {f.rank for f in blind.findings}
    quiet = Straggler().evaluate(RuleInput(steps=_tf_steps(0.0, where), meta=UNMEASURED))
    assert quiet.status is Status.NO_ISSUES_FOUND and quiet.datapoints > 0


def test_straggler_without_a_column_it_can_judge_is_not_applicable() -> None:
    rule = Straggler(metrics="forward,busy")
    result = rule.evaluate(RuleInput(steps=_tf_steps(SLOW_S), meta=UNMEASURED))
    assert result.status is Status.NOT_APPLICABLE
    assert result.reason is not None and "not judged: forward, busy" in result.reason


def test_load_balancing_does_not_compare_ranks_on_a_column_that_holds_waits() -> None:
    steps = _tf_steps(SLOW_S)
    blind = LoadBalancing().evaluate(RuleInput(steps=steps))
    assert [f.rank for f in blind.findings] == [0]  # rank 0 only waits in its forward
    result = LoadBalancing().evaluate(RuleInput(steps=steps, meta=UNMEASURED))
    assert result.status is Status.NOT_APPLICABLE and not result.findings
    assert result.reason is not None and "ranks not judged: forward" in result.reason
    own = LoadBalancing(rank_metric="data_wait").evaluate(RuleInput(steps=steps, meta=UNMEASURED))
    assert [f.rank for f in own.findings] == [1]


# -- real workers ------------------------------------------------------------------------


def _netns_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = ["unshare", "-n", "sh", "-c", "ip link set lo up"]
    return subprocess.run(probe, capture_output=True).returncode == 0


REAL = [
    pytest.mark.process,
    needs_tensorflow,
    pytest.mark.skipif(
        not _netns_works(),
        reason="needs `unshare -n` and `ip` (root or user namespaces): the workers' gRPC "
        "servers must listen in a loopback-only network namespace",
    ),
]


def real(fn: Callable[..., None]) -> Callable[..., None]:
    """The marks of a test that trains real TensorFlow workers."""
    for mark in REAL:
        fn = mark(fn)
    return fn


def _job(out: Path, job: str, port: int, *train: str, bare: bool = False) -> str:
    """Two workers, each under its own ``stepscope run`` into ``job`` (or bare), as a
    shell line."""
    cluster = [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]
    runs = []
    for i in (0, 1):
        cmd = [] if bare else [str(BIN / "stepscope"), "run", "-o", str(out), "--job", job, "--"]
        cmd += [str(BIN / "python"), TRAIN, "--steps", STEPS, *train]
        env = _tf_config("worker", i, worker=cluster)
        runs.append(f"TF_CONFIG='{env}' {' '.join(cmd)} > {out}/{job}-{i}.log 2>&1")
    return f"{{ {runs[0]} & {runs[1]}; wait; }}"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job whose worker 1 has a slow input pipeline, its calm twin (and the same
    training bare, for its weights), and one whose worker 1 fails; one after the other
    (each TensorFlow import costs 5-8 s of CPU)."""
    out = tmp_path_factory.mktemp("tfmw")
    slow = ["--slow-rank", "1", "--slow-data"]
    script = "; ".join(
        [
            _job(out, "slow", 23461, *slow, str(SLOW_S)),
            _job(out, "calm", 23463, *slow, "0", "--save", str(out / "watched")),
            _job(out, "bare", 23465, *slow, "0", "--save", str(out / "bare"), bare=True),
            _job(out, "fail", 23467, "--fail-rank", "1", "--fail-at", "10"),
        ]
    )
    cmd = ["unshare", "-n", "sh", "-c", f"ip link set lo up && {script}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env_for_tests())
    (out / "log.txt").write_text(p.stdout + p.stderr)
    return out


def _log(out: Path, job: str) -> str:
    return "".join((out / f"{job}-{i}.log").read_text()[-2000:] for i in (0, 1))


@real
def test_workers_share_one_job_one_rank_each(jobs: Path) -> None:
    job = stepscope.open(jobs / "calm")
    assert job.status == "Completed", _log(jobs, "calm")
    assert job.meta["distributed"] == UNMEASURED["distributed"]
    nodes = sorted(job.meta["nodes_status"])
    assert len(nodes) == 2 and nodes[0].endswith("-node0") and nodes[1].endswith("-node1")
    assert job.nodes() == nodes  # each worker's sampler, into system/<node>/
    assert sorted(job.store.listdir("heartbeat")) == [f"{n}.json" for n in nodes]
    launchers = [job.store.read_json(f"launchers/{n}.json")["status"] for n in nodes]
    assert launchers == ["Completed", "Completed"]
    assert [job.store.read_json(f"ranks/rank-{r}.json")["status"] for r in (0, 1)] == [
        "Exited",
        "Exited",
    ]
    steps = job.steps(phase="train")
    assert steps.groupby("rank")["step"].count().tolist() == [int(STEPS), int(STEPS)]
    assert dict(zip(steps["rank"], steps["node"], strict=True)) == {0: nodes[0], 1: nodes[1]}
    # nothing failed inside stepscope (a busy machine may delay the samplers: their gaps)
    faults = job.store.listdir("faults") if job.store.exists("faults") else []
    assert [f for f in faults if not f.startswith("sampling-gap-")] == []
    for i in (0, 1):  # the agent never changes training: each worker's weights bit for bit
        bare, watched = np.load(jobs / f"bare-{i}.npz"), np.load(jobs / f"watched-{i}.npz")
        assert len(bare.files) == 6
        assert all(np.array_equal(bare[k], watched[k]) for k in bare.files)


@real
def test_straggler_names_the_worker_with_the_slow_input_pipeline(jobs: Path) -> None:
    job = stepscope.open(jobs / "slow")
    assert job.status == "Completed", _log(jobs, "slow")
    medians = job.steps(phase="train").groupby("rank")[["data_wait", "forward"]].median()
    # the planted delay: rank 1's data wait; rank 0 waits for it inside its compiled step
    assert medians.loc[1, "data_wait"] > SLOW_S / 2 > medians.loc[0, "data_wait"]
    assert medians.loc[0, "forward"] > medians.loc[1, "forward"] + SLOW_S / 2
    (balance,) = evaluate_job(job, [{"name": "LoadBalancing"}])
    assert 0 not in {f.rank for f in balance.findings}, balance.message
    (found,) = evaluate_job(job, [{"name": "Straggler"}])
    assert found.status is Status.ISSUES_FOUND, found.message
    assert {(f.rank, f.message.split(" of ")[0]) for f in found.findings} == {(1, "data_wait")}
    assert "forward" in found.details["not_judged"]
    live = job.store.read_json("rules/Straggler.json")  # the live runner, on rank 0's node
    assert live["datapoints"] > 0 and 0 not in {f["rank"] for f in live["findings"]}
    (quiet,) = evaluate_job(stepscope.open(jobs / "calm"), [{"name": "Straggler"}])
    assert quiet.status is Status.NO_ISSUES_FOUND, quiet.message
    assert quiet.datapoints > 0


@real
def test_a_failed_worker_fails_the_job_and_is_named(jobs: Path) -> None:
    meta = stepscope.open(jobs / "fail").meta
    assert meta["status"] == "Failed", _log(jobs, "fail")
    assert meta["reason"].startswith("rank 1 (local rank 0) on node "), meta["reason"]
    assert "planted failure after step 10" in meta["reason"]
    assert meta["failed_ranks"][0]["rank"] == 1
