"""Typed bodies of the job folder's JSON files, for the parts that read them.

A JSON file of the folder that stepscope writes through one of these types is
read back as it (``job.json``, ``nodes/<node>.json``): its shape is the format's
contract (docs/format.md, version-checked), so the reader checks that the body
is a JSON object and does not check each key again. A file whose writer does not
go through a type here is read as :data:`JsonObject`, whose values the reader
narrows before use. Every key is optional (``total=False``): another tool, or an
older stepscope, may leave some out.
"""

from __future__ import annotations

from typing import TypedDict, cast

from stepscope.errors import JobFolderError

#: A JSON object as read from the folder: its values are not validated yet (narrow them).
JsonObject = dict[str, object]


class JobJson(TypedDict, total=False):
    """The body of ``job.json`` as readers see it (docs/format.md).

    ``distributed``, ``nodes_status`` and ``failed_ranks`` are the additions of
    torchrun jobs; ``alive`` is added by :func:`stepscope.jobfolder.liveness`,
    never stored.
    """

    format_version: int
    name: str
    command: list[str]
    cwd: str
    config: JsonObject
    hosts: list[str]
    start_time: float
    end_time: float | None
    status: str
    exit_code: int | None
    reason: str | None
    stepscope_version: str
    monotonic_offset_s: float | None
    duration_s: float | None
    incomplete: bool
    incomplete_reason: str | None
    distributed: JsonObject
    nodes_status: dict[str, str]
    failed_ranks: list[JsonObject]
    faults: list[FaultJson]
    alive: bool


class GpuFacts(TypedDict):
    """One GPU of a node, in ``nodes/<node>.json``."""

    index: int
    name: str
    mem_total: float


class NodeInfo(TypedDict, total=False):
    """``nodes/<node>.json``: static facts about a node, written by its sampler.

    ``clock_offset_s`` is None when a node of a torchrun job could not measure it.
    """

    node: str
    hostname: str
    cpu_count: int | None
    mem_total: float
    gpus: list[GpuFacts]
    interval_ms: int
    clock_offset_s: float | None
    boot_time: float
    sched_autogroup: bool | None


class LauncherRecord(TypedDict, total=False):
    """``launchers/<node>.json``: a torchrun node's launcher and how it ended."""

    node: str
    node_rank: int
    pid: int
    status: str
    start_time: float
    end_time: float
    reason: str | None
    exit_code: int


class ClockReference(TypedDict):
    """``clock/reference.json``: where node rank 0 serves the job's reference clock."""

    node: str
    host: str
    port: int


class FindingJson(TypedDict, total=False):
    """One finding of a rule verdict (``stepscope.rules.Finding.to_dict()``)."""

    message: str
    recommendation: str
    severity: float
    node: str | None
    device: str | None
    rank: int | None
    start: float | None
    end: float | None
    steps: list[int] | None
    value: float | None
    threshold: float | None


class RuleVerdict(TypedDict, total=False):
    """``rules/<Rule>.json``: a rule's latest verdict (``stepscope.rules.RuleResult``)."""

    rule: str
    status: str
    triggers: int
    datapoints: int
    message: str
    recommendation: str
    parameters: JsonObject
    findings: list[FindingJson]
    description: str
    reason: str | None
    updated: float
    verdict: str | None
    details: JsonObject
    cost_seconds: float | None
    stale: JsonObject  # set by the launcher: the rule runner did not finish (docs/format.md)
    saving_seconds: float | None


class FaultJson(TypedDict, total=False):
    """``faults/<component>-<node>-<pid>.json``: what one fault boundary caught.

    The agent's and the rule runner's records carry the rank and the first
    traceback; the sampler's and a store stream's also count the rows they had to
    drop (``dropped_rows`` and the gap ``dropped_first_time``-``dropped_last_time``);
    a store stream's record names its ``stream`` and when it ``recovered_time``;
    the control channel's lists the last ``requests`` it refused.
    The launcher's record of a helper that died adds its ``exit_code`` or
    ``signal``, the last lines of its ``stderr`` and the ``restarts`` so far; of
    one that hung (or outlived the stop deadline), what it was doing: ``state``,
    ``wchan``, ``last_progress_time``, ``stack`` (``stack_note`` why none); a
    ``sampling-gap`` record lists its ``gaps`` (``start``, ``end``, ``cause``); a
    ``sampler-store`` record sums the seconds its store calls ``blocked_seconds``.
    An ``abrupt-exit`` record names the rank (``rank_pid``) and the ``lost_seconds``
    of steps it may have lost; a ``clock-step`` record the wall clock's newest
    ``step_seconds``; a ``rule-action`` record the ``rule`` whose webhook or command
    failed; a ``cuda-oom`` record the allocator's last per-step ``memory_readings``
    and its counters at the failure, ``memory_stats``.
    """

    component: str
    rule: str
    node: str
    rank: int | None
    local_rank: int
    pid: int
    time: float
    first_time: float
    error: str | None
    count: int
    traceback: str
    stream: str
    last_error: str
    recovered_time: float
    dropped_rows: int
    dropped_first_time: float
    dropped_last_time: float
    requests: list[JsonObject]
    gaps: list[JsonObject]
    gap_seconds: float
    blocked_seconds: float
    exit_code: int | None
    signal: str | None
    stderr: list[str]
    restarts: int
    state: str | None
    wchan: str | None
    last_progress_time: float
    stack: list[str]
    stack_note: str
    rank_pid: int | None
    lost_seconds: float
    step_seconds: float
    memory_readings: list[JsonObject]
    memory_stats: dict[str, int]


class WindowJson(TypedDict, total=False):
    """``profiling/rank-<r>/<base>.window.json``: one finished profiling window."""

    kind: str
    rank: int
    start_step: int
    end_step: int
    start_time: float
    end_time: float
    window: JsonObject
    request: str | None
    path: str
    files: list[str]
    truncated: bool


def json_number(value: object) -> float | None:
    """``value`` as a float if it is a JSON number (an int or a float), else None."""
    return float(value) if isinstance(value, int | float) else None


def as_json_object(body: object, what: str) -> JsonObject:
    """``body`` if it is a JSON object; JobFolderError names the damaged file ``what``."""
    if not isinstance(body, dict):
        raise JobFolderError(f"{what} is not a JSON object but {type(body).__name__}: damaged")
    return cast(JsonObject, body)


def as_job_json(body: object, what: str) -> JobJson:
    """``body`` of a ``job.json`` (the version is checked by its reader)."""
    return cast(JobJson, as_json_object(body, what))


def as_node_info(body: object, what: str) -> NodeInfo:
    """``body`` of a ``nodes/<node>.json``."""
    return cast(NodeInfo, as_json_object(body, what))


def as_launcher_record(body: object, what: str) -> LauncherRecord:
    """``body`` of a ``launchers/<node>.json``."""
    return cast(LauncherRecord, as_json_object(body, what))


def as_clock_reference(body: object, what: str) -> ClockReference:
    """``body`` of ``clock/reference.json``."""
    return cast(ClockReference, as_json_object(body, what))


def as_rule_verdict(body: object, what: str) -> RuleVerdict:
    """``body`` of a ``rules/<Rule>.json``."""
    return cast(RuleVerdict, as_json_object(body, what))
