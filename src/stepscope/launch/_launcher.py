"""``stepscope run``: run a command as a managed, watched job.

The launcher creates the job folder, injects the agent into the Python process
(``sitecustomize`` on ``PYTHONPATH``, no change to the script), starts the node's
system sampler and the live rule runner in their own processes, keeps a
heartbeat, forwards signals, takes stop requests from the control channel
(``_command_watch``), and records how the job ended. It exits with the command's
own exit code.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope.config import missing_rule_inputs
from stepscope.jobfolder import (
    FaultLog,
    JobClock,
    JobJson,
    JobMeta,
    JsonObject,
    update_meta,
    use_clock,
    write_meta,
)
from stepscope.launch._command_watch import CommandWatch, say
from stepscope.launch._ending import incomplete_reason, node_status, rank_error, record_abrupt
from stepscope.launch._folder import disk_full, start_error
from stepscope.launch._supervise import Helpers
from stepscope.process import spawn_interruptible
from stepscope.store import Store, open_store

if TYPE_CHECKING:
    from stepscope.launch._dist_job import NodeLauncher

# The agent's sitecustomize, put on the command's PYTHONPATH by path (never imported here).
BOOTSTRAP_DIR = str(Path(__file__).parents[1] / "agent" / "_bootstrap")


@dataclass
class RunSpec:
    """What to run and where, resolved by the CLI from the configuration."""

    command: list[str]
    output: str
    job: str
    interval_ms: int = 500
    config: JsonObject = field(default_factory=dict)
    node: str = field(
        default_factory=lambda: os.environ.get("STEPSCOPE_NODE") or socket.gethostname()
    )
    rules: bool = True
    # (host, port) of the live rule runner's Prometheus /metrics, None: not served
    metrics: tuple[str, int] | None = None
    # experiment trackers the live rule runner logs to ("mlflow", "wandb"):
    # docs/integrations.md; the runner then starts as stepscope.export.live
    trackers: tuple[str, ...] = ()
    # set for torchrun jobs (_dist_job.NodeLauncher): shared job.json, clock offset
    dist: NodeLauncher | None = None
    # the job clock's monotonic offset (JobClock.offset_s), set by run(): the agent's
    # and the sampler's timeline, so that every row keeps one clock
    timeline_s: float | None = None


def _job_meta(spec: RunSpec, clock: JobClock, warnings: list[str]) -> JobMeta:
    meta = JobMeta.new(spec.job, spec.command, spec.config, [spec.node], clock)
    if warnings:  # rules whose input the configuration does not save (docs/tensors.md)
        meta.extra["config_warnings"] = list(warnings)
    return meta


def _child_env(spec: RunSpec, store: Store) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (BOOTSTRAP_DIR, env.get("PYTHONPATH")) if p)
    agent: JsonObject = {"job_url": store.url, "node": spec.node, "config": spec.config}
    agent["timeline_s"] = spec.timeline_s
    if spec.dist is not None:
        agent["clock"] = spec.dist.agent_clock()
        if (rank := spec.dist.agent_rank()) is not None:
            agent["rank"] = rank
    env["STEPSCOPE_AGENT"] = json.dumps(agent)
    return env


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _finish(
    store: Store, spec: RunSpec, child: subprocess.Popen[bytes], clock: JobClock, sup: CommandWatch
) -> JobJson:
    faults, stop_reason, code = sup.helpers.faults, sup.stop_reason, _exit_code(child.returncode)
    abrupt = record_abrupt(store, spec.node, clock.now(), faults, (child.pid, child.returncode))
    error = rank_error(store) if code and stop_reason is None else None
    status, reason = node_status(code, stop_reason, error=error)
    disk_full(store, faults)
    faults.flush()
    changes: JobJson = {"status": status, "reason": reason, "exit_code": code}
    changes |= {"end_time": clock.now(), "duration_s": round(clock.elapsed(), 3)}
    if (incomplete := incomplete_reason([(a.rank, a.line()) for a in abrupt])) is not None:
        changes |= {"incomplete": True, "incomplete_reason": incomplete}
    if unsaved := faults.pending():  # job.json has room kept for them (a full disk)
        changes["faults"] = unsaved
    return update_meta(store, **changes)


def run(spec: RunSpec) -> int:
    """Run ``spec.command`` as a job; returns the command's exit code."""
    store = open_store(spec.output).sub(spec.job)
    clock = JobClock()
    spec = replace(spec, timeline_s=clock.offset_s)
    use_clock(clock.now)  # the control channel's refusals: the job's timeline too
    warnings = missing_rule_inputs(spec.config)
    for warning in warnings:
        say(f"warning: {warning}")
    try:  # any failure to create the job folder: one line, exit 2, no job started
        if spec.dist is None:
            write_meta(store, _job_meta(spec, clock, warnings))
        else:
            spec.dist.begin(_job_meta(spec, clock, warnings))
    except OSError as exc:
        raise start_error(store.url, exc) from None
    say(f"job {spec.job!r} -> {store.url}")
    child = spawn_interruptible(spec.command, _child_env(spec, store))
    faults = FaultLog(store, spec.node, os.getpid(), wall=clock.now)
    helpers = Helpers(spec, store, child.pid, faults, clock.now)
    sup = CommandWatch(store, spec, child, helpers, clock)
    old = {s: signal.signal(s, sup.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    helpers.start()
    try:
        code = _exit_code(sup.wait())
        took = clock.elapsed()  # a monotonic clock: a step of the wall clock changes nothing
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    meta: JobJson
    if spec.dist is None:  # the verdicts are made while the end is recorded (torchrun:
        helpers.tell_end()  # after it, which waits for the other nodes' ends)
    try:
        if spec.dist is None:
            meta = _finish(store, spec, child, clock, sup)
        else:
            ended = (child.pid, child.returncode)  # a TensorFlow worker's rank is the child
            meta = spec.dist.finish(code, sup.stop_reason, sup.helpers.faults, ended)
    except OSError as exc:  # the store is failing: the exit code is still the command's
        sup.folder.end_failed(exc)
        meta = {"status": node_status(code, sup.stop_reason)[0]}
    finally:
        if spec.dist is not None:
            spec.dist.close()
    helpers.stop()
    if meta.get("incomplete"):
        say(f"the job's data is incomplete: {meta.get('incomplete_reason')}")
    say(f"job {spec.job!r} {meta['status']} (exit {code}) after {took:.1f} s{sup.folder.where()}")
    return code
