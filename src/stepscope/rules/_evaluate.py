"""Evaluating a rule set: over frames in memory, or over a whole job one node at a time.

An exception inside a rule becomes a result with status ``Error`` and the
message: one broken rule never stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

import pandas as pd
import pyarrow as pa

from stepscope.errors import RuleConfigError
from stepscope.jobfolder import (
    EVENTS_SCHEMA,
    STEPS_SCHEMA,
    SYSTEM_BASE_SCHEMA,
    NodeInfo,
    as_node_info,
    read_meta,
)
from stepscope.read import Job
from stepscope.rules._base import Rule
from stepscope.rules._data import (
    SKIPPED_SYSTEM_COLUMNS,
    node_streams,
    read_streams,
    stream_prefixes,
)
from stepscope.rules._input import RuleInput, empty_events, empty_others, empty_steps, empty_system
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._registry import RuleSpec, build_rules
from stepscope.rules._system_base import SystemRule
from stepscope.rules._trace_source import JobTraces
from stepscope.rules._train_frame import TRAIN_KEY
from stepscope.rules._types import RuleResult, Status

T = TypeVar("T")
STEPS_ORDER = ("rank", "phase", "step")


def error_result(rule: Rule, exc: BaseException, now: float) -> RuleResult:
    """Status ``Error`` with what went wrong in the rule."""
    message = f"the rule failed: {type(exc).__name__}: {exc}"
    data = RuleInput(now=now)
    return rule.result(Status.ERROR, data, message=message, reason=message)


class _Evaluation:
    """The rules of one evaluation, their per-node parts and their errors."""

    def __init__(self, rules: Sequence[Rule], now: float) -> None:
        self.rules, self.now = list(rules), now
        self.parts: dict[int, list[Part]] = {id(r): [] for r in self.rules}
        self.errors: dict[int, RuleResult] = {}

    def guarded(self, rule: Rule, fn: Callable[[], T]) -> T | None:
        if id(rule) in self.errors:
            return None
        try:
            return fn()
        except Exception as exc:  # a broken rule is reported, never raised
            self.errors[id(rule)] = error_result(rule, exc, self.now)
            return None

    def check_node(self, data: RuleInput) -> None:
        # Shared frames never sit under other rules' copies of a long job's steps (a
        # day-long node: 532 -> 4xx MB): the rules sharing the training steps first, the
        # frame dropped after them; the rules of samples' windows, which share framings
        # (tens of MB a day), last. Results keep the rules' order.
        for rule in sorted(self.rules, key=_order):
            if isinstance(rule, NodeRule):
                if not rule.reads_train_frame:
                    data.cache.pop(TRAIN_KEY, None)
                part = self.guarded(rule, lambda r=rule: r.check(data))  # type: ignore[misc]
                rule.forget()
                if part is not None:
                    self.parts[id(rule)].append(part)

    def results(self, whole: Callable[[], RuleInput], data: RuleInput) -> list[RuleResult]:
        """Combine the node rules' parts; judge the whole-job rules on ``whole()``, built once."""
        memo: list[RuleInput] = []

        def once() -> RuleInput:
            if not memo:
                memo.append(whole())
            return memo[0]

        out = []
        for rule in self.rules:
            if isinstance(rule, NodeRule):
                parts = self.parts[id(rule)]
                res = self.guarded(rule, lambda r=rule, p=parts: r.combine(p, data))  # type: ignore[misc]
            else:
                res = self.guarded(rule, lambda r=rule: r.evaluate(once()))  # type: ignore[misc]
            out.append(self.errors.get(id(rule)) or res)
        return [r for r in out if r is not None]


def _order(rule: Rule) -> tuple[bool, bool]:
    """The rules sharing the training steps, the other node rules, samples' windows."""
    return isinstance(rule, SystemRule), not (isinstance(rule, NodeRule) and rule.reads_train_frame)


def evaluate_input(rules: Sequence[Rule], data: RuleInput) -> list[RuleResult]:
    """Every rule over ``data`` (frames in memory); results in the order of ``rules``."""
    ev = _Evaluation(rules, data.now)
    for node in data.node_names():
        ev.check_node(data.for_node(node))
    return ev.results(lambda: data, data)


def _node_infos(job: Job) -> dict[str, NodeInfo]:
    """Every readable ``nodes/<node>.json`` of the job, by node."""
    infos: dict[str, NodeInfo] = {}
    for key in job.store.list("nodes", suffix=".json"):
        try:
            body = job.store.read_json(key)
        except (OSError, ValueError):
            continue
        if not isinstance(body, dict):
            continue  # a damaged file, as one that cannot be read
        info = as_node_info(body, key)
        infos[str(info.get("node") or key.rsplit("/", 1)[-1][:-5])] = info
    return infos


def _or(frame: pd.DataFrame | None, empty: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    return empty() if frame is None or not len(frame) else frame


def node_inputs(job: Job, base: RuleInput) -> Iterator[RuleInput]:
    """One RuleInput per node of ``job``, read one node at a time (bounded memory)."""
    store, check = job.store, job.segment_check
    system, steps = node_streams(store, "system", check), node_streams(store, "steps", check)
    others = node_streams(store, "others", check)
    for node in sorted(set(system) | set(steps) | set(base.nodes)):
        yield RuleInput(
            steps=_or(
                read_streams(store, steps.get(node, []), STEPS_ORDER, check=check),
                empty_steps,
            ),
            system=_or(
                read_streams(store, system.get(node, []), ("time",), SKIPPED_SYSTEM_COLUMNS, check),
                empty_system,
            ),
            events=base.events[base.events["node"] == node] if len(base.events) else base.events,
            others=_or(
                read_streams(store, others.get(node, []), ("time",), check=check), empty_others
            ),
            nodes=base.nodes_of(node),
            now=base.now,
            origin=base.origin,
            meta=base.meta,
        )


def whole_steps(job: Job) -> pd.DataFrame:
    """Every step of ``job`` as ``job.steps()`` gives them, read by pyarrow (a third of
    the memory of DuckDB's read: see ``read_streams``)."""
    return _whole(job, "steps", STEPS_ORDER, STEPS_SCHEMA, empty_steps)


def whole_events(job: Job) -> pd.DataFrame:
    """Every event of ``job`` as ``job.events()`` gives them, read by pyarrow: the
    final evaluation imports no DuckDB (0.05-0.1 s of the runner's CPU, issue 32)."""
    return _whole(job, "events", ("time",), EVENTS_SCHEMA, empty_events)


def whole_system(job: Job) -> pd.DataFrame:
    """Every system sample of ``job`` as ``job.system()`` gives them, read by pyarrow."""
    return _whole(job, "system", ("node", "time"), SYSTEM_BASE_SCHEMA, empty_system)


def _whole(
    job: Job, kind: str, order: Sequence[str], schema: pa.Schema, empty: Callable[[], pd.DataFrame]
) -> pd.DataFrame:
    prefixes = stream_prefixes(job.store, kind)
    frame = read_streams(job.store, prefixes, order, check=job.segment_check, schema=schema)
    return empty() if frame is None or not len(frame) else frame


def job_input(job: Job, now: float) -> RuleInput:
    """The job's metadata, node facts and events (no steps or samples yet)."""
    meta = job.meta
    return RuleInput(
        events=whole_events(job),
        nodes=_node_infos(job),
        now=now,
        origin=meta.get("start_time"),
        meta=meta,
        tensors=job.tensors,
        traces=JobTraces(job),
    )


def evaluate_rules(job: Job, rules: Sequence[Rule], now: float | None = None) -> list[RuleResult]:
    """``rules`` over the whole of ``job``, node by node."""
    base = job_input(job, time.time() if now is None else now)
    ev = _Evaluation(rules, base.now)
    for data in node_inputs(job, base):
        ev.check_node(data)
        del data  # the last node's frames are not held while the whole-job rules read

    wanted = {f for r in rules if not isinstance(r, NodeRule) for f in r.frames}

    def whole() -> RuleInput:
        """The whole job, with only the frames the whole-job rules read."""
        steps = whole_steps(job) if "steps" in wanted else empty_steps()
        system = whole_system(job) if "system" in wanted else empty_system()
        return replace(base, steps=steps, system=system, cache={})

    return ev.results(whole, base)


def job_rules(
    job: Job,
    rules_config: Sequence[Mapping[str, object]] | None = None,
    overrides: Mapping[str, Mapping[str, object]] | None = None,
) -> list[RuleSpec]:
    """The job's rule set: ``rules_config``, else job.json's ``config.rules``."""
    meta = read_meta(job.store)
    if rules_config is None:
        configured = (meta.get("config") or {}).get("rules") or []
        if not isinstance(configured, list):
            raise RuleConfigError(f"config.rules of job.json is not a list: {configured!r}")
        rules_config = configured
    return build_rules(rules_config, overrides, base_dir=str(meta.get("cwd") or "."))


def evaluate_job(
    job: Job,
    rules_config: Sequence[Mapping[str, object]] | None = None,
    overrides: Mapping[str, Mapping[str, object]] | None = None,
    now: float | None = None,
) -> list[RuleResult]:
    """Evaluate the job's rules (or ``rules_config``) over the whole job, offline.

    ``overrides`` maps rule names to parameter values. Bad configuration raises
    :class:`RuleConfigError`; a failing rule gives a result with status Error.
    """
    specs = job_rules(job, rules_config, overrides)
    return evaluate_rules(job, [s.rule for s in specs], now)
