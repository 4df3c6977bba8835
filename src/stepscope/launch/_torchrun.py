"""``stepscope run`` over torchrun: the command, and what this node is in the job.

``stepscope run --nproc-per-node 4 -- train.py`` runs
``python -m torch.distributed.run --nproc-per-node 4 train.py``;
``stepscope run -- torchrun ... train.py`` runs the command as given. Either
way torchrun does the rendezvous and the process groups; stepscope only reads
torchrun's arguments (with torchrun's own parser) to learn the number of
nodes, this node's rank and the rendezvous host. See docs/distributed.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stepscope.errors import TorchrunUsageError
from stepscope.jobfolder import is_job, read_meta

if TYPE_CHECKING:
    from stepscope.launch._launcher import RunSpec
    from stepscope.store import Store

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# stepscope run option -> torchrun option; every one is passed through as given.
OPTIONS = {
    "nproc_per_node": "--nproc-per-node",
    "nnodes": "--nnodes",
    "node_rank": "--node-rank",
    "master_addr": "--master-addr",
    "master_port": "--master-port",
    "rdzv_backend": "--rdzv-backend",
    "rdzv_endpoint": "--rdzv-endpoint",
    "rdzv_id": "--rdzv-id",
}
# Each option's metavar and help, with torchrun's default.
_HELP = {
    "nproc_per_node": ("N", "processes per node, one per GPU (default 1)"),
    "nnodes": ("N", "number of nodes, or MIN:MAX (default 1)"),
    "node_rank": ("RANK", "this node's rank among the nodes (default 0)"),
    "master_addr": ("HOST", "the address of the node of rank 0 (default 127.0.0.1)"),
    "master_port": ("PORT", "the port of the node of rank 0 (default 29500)"),
    "rdzv_backend": ("BACKEND", "rendezvous backend, e.g. c10d (default static)"),
    "rdzv_endpoint": ("HOST:PORT", "rendezvous endpoint (default: none)"),
    "rdzv_id": ("ID", "rendezvous id, the same on every node (default: none)"),
}
TEST_SKEW_ENV = "STEPSCOPE_TEST_CLOCK_OFFSET_S"


def add_options(p: argparse.ArgumentParser) -> None:
    """The torchrun options of ``stepscope run`` (any of them runs the command under torchrun)."""
    g = p.add_argument_group("torchrun (the command runs under torchrun; docs/distributed.md)")
    for dest, flag in OPTIONS.items():
        metavar, text = _HELP[dest]
        g.add_argument(flag, dest=dest, metavar=metavar, help=f"torchrun {flag}: {text}")


@dataclass(frozen=True)
class Plan:
    """What this launcher is in a torchrun job (or a TensorFlow worker's, ``_tfconfig``)."""

    nnodes: str
    node_rank: int
    rendezvous_host: str
    node: str
    clock_skew_s: float = 0.0
    launcher: str = "torchrun"  # or "tf_config": one TensorFlow worker of TF_CONFIG
    rank: int | None = None  # the agent's rank, when no RANK comes from torchrun

    @property
    def max_nodes(self) -> int:
        return int(self.nnodes.split(":")[-1])

    @property
    def multi_node(self) -> bool:
        return self.max_nodes > 1

    @property
    def leader(self) -> bool:
        """Node rank 0 keeps the job's reference clock, its job.json and its rule runner."""
        return self.node_rank == 0


def _script_args(command: list[str]) -> list[str]:
    """torchrun's tail for ``command``: ``train.py ...``, ``-m pkg ...`` or ``--no-python``."""
    first = os.path.basename(command[0])
    if first.startswith("python") and len(command) > 1:
        rest = command[1:]
        return ["-m", *rest[1:]] if rest[0] == "-m" else rest
    if command[0].endswith(".py"):
        if not os.path.isfile(command[0]):
            raise TorchrunUsageError(f"script not found: {command[0]!r}. Check the path.")
        return command
    return ["--no-python", *command]


def torchrun_command(args: argparse.Namespace, command: list[str]) -> list[str]:
    """``command`` wrapped in torchrun if a torchrun option was given, else unchanged."""
    given = {d: getattr(args, d, None) for d in OPTIONS if getattr(args, d, None) is not None}
    if not given:
        return command
    if torchrun_args(command) is not None:
        raise TorchrunUsageError(
            "the command is torchrun already: give the torchrun options either to "
            "stepscope run or to torchrun, not to both."
        )
    opts = [x for d, v in given.items() for x in (OPTIONS[d], str(v))]
    return [sys.executable, "-m", "torch.distributed.run", *opts, *_script_args(command)]


def torchrun_args(command: list[str]) -> list[str] | None:
    """torchrun's own arguments if ``command`` runs torchrun, else None."""
    if command and os.path.basename(command[0]) == "torchrun":
        return command[1:]
    for i in range(len(command) - 1):
        if command[i] == "-m" and command[i + 1] in TORCHRUN_MODULES:
            return command[i + 2 :]
        if not command[i].startswith("-") and i > 0:
            break  # a script's own "-m" is not the interpreter's
    return None


def _parse(args: list[str]) -> argparse.Namespace:
    from torch.distributed.run import get_args_parser  # only torchrun jobs pay for torch

    try:
        return get_args_parser().parse_args(args)
    except SystemExit as exc:
        raise TorchrunUsageError(f"torchrun rejected its arguments {args!r}") from exc


def _rendezvous_host(parsed: argparse.Namespace) -> str:
    if parsed.rdzv_backend != "static" and parsed.rdzv_endpoint:
        return str(parsed.rdzv_endpoint).rsplit(":", 1)[0].strip("[]")
    return str(parsed.master_addr)


def plan(command: list[str], env: Mapping[str, str], node: str) -> Plan | None:
    """This node's part in the torchrun job of ``command`` (None: not a torchrun command)."""
    tail = torchrun_args(command)
    if tail is None:
        return None
    parsed = _parse(tail)
    nnodes = "1" if parsed.standalone else str(parsed.nnodes)
    rank = int(parsed.node_rank)
    multi = int(nnodes.split(":")[-1]) > 1
    own = tail[: tail.index(parsed.training_script)] if parsed.training_script in tail else tail
    if multi and parsed.rdzv_backend != "static" and not _gives_node_rank(own):
        raise TorchrunUsageError(
            f"with --rdzv-backend {parsed.rdzv_backend} every node would count as node rank 0 "
            "for stepscope (reference clock, job.json, live rules): give each node its own "
            "--node-rank (0 on exactly one node; torchrun's dynamic rendezvous ignores it "
            "when it numbers the ranks). docs/distributed.md."
        )
    name = node if env.get("STEPSCOPE_NODE") or not multi else f"{node}-node{rank}"
    try:
        skew = float(env.get(TEST_SKEW_ENV) or 0.0)
    except ValueError as exc:
        raise TorchrunUsageError(f"{TEST_SKEW_ENV} must be a number of seconds") from exc
    return Plan(nnodes, rank, _rendezvous_host(parsed), name, skew)


def _gives_node_rank(args: list[str]) -> bool:
    flags = ("--node-rank", "--node_rank")
    return any(a in flags or a.startswith(tuple(f"{f}=" for f in flags)) for a in args)


def default_node() -> str:
    return os.environ.get("STEPSCOPE_NODE") or socket.gethostname()


def prepare(args: argparse.Namespace, command: list[str]) -> tuple[list[str], Plan | None]:
    """The command to run (wrapped in torchrun if asked) and this node's plan in it:
    torchrun's, else the TensorFlow worker's of ``TF_CONFIG``, else None."""
    from stepscope.launch._tfconfig import tf_plan

    command = torchrun_command(args, command)
    found = plan(command, os.environ, default_node())
    return command, found if found is not None else tf_plan(os.environ, default_node())


def attach(spec: RunSpec, plan: Plan) -> RunSpec:
    """``spec`` (a RunSpec) as this node's part of the torchrun job of ``plan``.

    Only node rank 0 runs the live rules (one writer of ``rules/``). A node may
    join a job folder that exists only while that job runs, and only once.
    """
    from dataclasses import replace

    from stepscope.launch._dist_job import NodeLauncher
    from stepscope.store import open_store

    store = open_store(spec.output).sub(spec.job)
    if plan.multi_node:
        _check_join(store, plan)
    rules = spec.rules and plan.leader
    return replace(spec, node=plan.node, rules=rules, dist=NodeLauncher(plan, store))


def _check_join(store: Store, plan: Plan) -> None:
    if store.exists(f"launchers/{plan.node}.json"):
        raise TorchrunUsageError(
            f"node {plan.node!r} is already part of job {store.url}: give every node its own "
            + ("task index in TF_CONFIG" if plan.launcher == "tf_config" else "--node-rank")
            + " (or STEPSCOPE_NODE), or choose another --job."
        )
    if is_job(store) and read_meta(store).get("status") != "Running":
        raise TorchrunUsageError(
            f"the job at {store.url} has ended: choose another --job, or remove the old folder."
        )
