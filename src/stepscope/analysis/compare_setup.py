"""What differs in the setup of two jobs: what may explain a change in step time.

A job's setup is flattened to ``key -> text``: the command line, the stepscope
configuration (``config.<section>.<key>``, the job's name left out), versions
(stepscope's, each framework's), the facts the agent records in events
(``threads.<name>``; ``dataloader<i>.<name>`` per DataLoader in the order rank 0 made
them: ``num_workers``, ``pin_memory``, ``batch_size``...), node facts
(``node<i>.cores``, ``node<i>.gpus``) and the host's contention (HostContention's
status, the median CPU of other processes). A key only one job has shows as missing
on the other side, never as zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from stepscope.analysis._plain import read_rules
from stepscope.analysis.host import others_cpu

if TYPE_CHECKING:
    from stepscope.read import Job

__all__ = ["Setup", "SetupDiff", "diff_setups", "read_setup"]

EVENT_KINDS = ("framework", "threads", "dataloader")
CONTENTION_RULE = "HostContention"
UNCOMPARED = {"config.job.name"}  # two jobs' names always differ: no difference of setup


@dataclass(frozen=True)
class Setup:
    """One job's setup facts and its rules' statuses."""

    facts: dict[str, str]
    rules: dict[str, str]


@dataclass(frozen=True)
class SetupDiff:
    """The facts whose values differ (key, A's, B's; None: not recorded) and the rules
    whose status changed (rule, A's, B's)."""

    facts: list[tuple[str, str | None, str | None]]
    rules: list[tuple[str, str | None, str | None]]


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _meta_facts(job: Job) -> dict[str, str]:
    meta = dict(job.meta)
    facts: dict[str, str] = {}
    command = meta.get("command")
    if isinstance(command, list):
        facts["command"] = " ".join(str(c) for c in command)
    config = meta.get("config")
    if isinstance(config, dict):
        for section, value in config.items():
            items = value.items() if isinstance(value, dict) else [("", value)]
            for key, v in items:
                name = f"config.{section}{'.' if key else ''}{key}"
                if name not in UNCOMPARED:
                    facts[name] = _text(v)
    if meta.get("stepscope_version") is not None:
        facts["version.stepscope"] = _text(meta["stepscope_version"])
    return facts


def _event_facts(job: Job) -> dict[str, str]:
    events = job.events(kinds=list(EVENT_KINDS))
    facts: dict[str, str] = {}
    if not len(events):
        return facts
    first_rank = int(events["rank"].min())
    loaders = 0
    for kind, rank, raw in zip(events["kind"], events["rank"], events["detail"], strict=True):
        try:
            detail = json.loads(raw) if isinstance(raw, str) else {}
        except ValueError:
            continue
        if not isinstance(detail, dict) or int(rank) != first_rank:
            continue  # every rank records the same settings; rank 0's stand for them
        if kind == "framework" and "name" in detail:
            facts[f"version.{detail['name']}"] = _text(detail.get("version"))
        elif kind == "threads":
            facts.update({f"threads.{k}": _text(v) for k, v in detail.items()})
        elif kind == "dataloader":
            facts.update({f"dataloader{loaders}.{k}": _text(v) for k, v in detail.items()})
            loaders += 1
    return facts


def _node_facts(job: Job) -> dict[str, str]:
    facts: dict[str, str] = {}
    for i, node in enumerate(job.nodes()):
        info = dict(job.node_info(node))
        if info.get("cpu_count") is not None:
            facts[f"node{i}.cores"] = _text(info["cpu_count"])
        gpus = info.get("gpus")
        if isinstance(gpus, list):
            names = [str(g.get("name")) for g in gpus if isinstance(g, dict)]
            facts[f"node{i}.gpus"] = (
                f"{len(names)} x {', '.join(sorted(set(names)))}" if names else "none"
            )
    return facts


def _contention(job: Job, rules: dict[str, str]) -> dict[str, str]:
    facts: dict[str, str] = {}
    if CONTENTION_RULE in rules:
        facts["contention.HostContention"] = rules[CONTENTION_RULE]
    system = job.system()
    if len(system):
        others = others_cpu(system)
        if others is not None:
            facts["contention.others_cpu_median"] = f"{float(np.nanmedian(others)):.0f}%"
    return facts


def read_setup(job: Job) -> Setup:
    """The setup facts of ``job`` (module docstring)."""
    rules = {str(v.get("rule")): str(v.get("status")) for v in read_rules(job)}
    facts = {**_meta_facts(job), **_event_facts(job), **_node_facts(job)}
    facts.update(_contention(job, rules))
    return Setup(facts, rules)


def _differ(a: dict[str, str], b: dict[str, str]) -> list[tuple[str, str | None, str | None]]:
    keys = sorted(set(a) | set(b))
    return [(k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)]


def diff_setups(a: Setup, b: Setup) -> SetupDiff:
    """What differs between A's setup and B's."""
    return SetupDiff(_differ(a.facts, b.facts), _differ(a.rules, b.rules))
