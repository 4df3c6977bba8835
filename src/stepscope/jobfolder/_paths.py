"""Where things are in a job folder: every name of docs/format.md, in one place.

Keys are ``/``-separated and relative to the job folder, whatever the store.
"""

from __future__ import annotations

JOB_JSON = "job.json"
HEARTBEAT = "heartbeat"
NODES = "nodes"
SYSTEM = "system"
OTHERS = "others"
STEPS = "steps"
EVENTS = "events"
FAULTS = "faults"
LAUNCHERS = "launchers"
CLOCK = "clock"
RANKS = "ranks"
RULES = "rules"
CONTROL = "control"
ACK = "control/ack"
PROFILING = "profiling"
TENSORS = "tensors"
REPORT = "report.html"

JSON = ".json"
WINDOW_JSON = ".window.json"
CLOCK_REFERENCE = f"{CLOCK}/reference.json"

# The top-level entries of a job folder, as docs/format.md lists them (a test compares).
ENTRIES = (
    JOB_JSON,
    HEARTBEAT,
    NODES,
    SYSTEM,
    OTHERS,
    STEPS,
    EVENTS,
    FAULTS,
    LAUNCHERS,
    CLOCK,
    RANKS,
    RULES,
    CONTROL,
    PROFILING,
    TENSORS,
)


def rank_dir(rank: int) -> str:
    """``rank-<r>``: the sub-folder of one rank in steps/, events/, profiling/, tensors/."""
    return f"rank-{rank}"


def rank_of(name: str) -> int | None:
    """The rank of a ``rank-<r>`` folder name, or None for any other name."""
    head, _, tail = name.partition("-")
    return int(tail) if head == "rank" and tail.isdigit() else None


def steps_stream(rank: int) -> str:
    """``steps/rank-<r>``: the segments of one rank's steps."""
    return f"{STEPS}/{rank_dir(rank)}"


def events_stream(rank: int) -> str:
    """``events/rank-<r>``: the segments of one rank's lifecycle events."""
    return f"{EVENTS}/{rank_dir(rank)}"


def system_stream(node: str) -> str:
    """``system/<node>``: the segments of one node's system samples."""
    return f"{SYSTEM}/{node}"


def others_stream(node: str) -> str:
    """``others/<node>``: the segments of one node's busiest processes outside the job."""
    return f"{OTHERS}/{node}"


def tensors_dir(rank: int) -> str:
    """``tensors/rank-<r>``: one rank's output tensors."""
    return f"{TENSORS}/{rank_dir(rank)}"


def profiling_dir(rank: int) -> str:
    """``profiling/rank-<r>``: one rank's profiling artifacts and window records."""
    return f"{PROFILING}/{rank_dir(rank)}"


def heartbeat_key(node: str) -> str:
    """``heartbeat/<node>.json``: the liveness of a node's launcher (or standalone agent)."""
    return f"{HEARTBEAT}/{node}{JSON}"


def node_key(node: str) -> str:
    """``nodes/<node>.json``: static facts about a node."""
    return f"{NODES}/{node}{JSON}"


def rank_key(rank: int) -> str:
    """``ranks/rank-<r>.json``: how rank r's process ended."""
    return f"{RANKS}/{rank_dir(rank)}{JSON}"


def launcher_key(node: str) -> str:
    """``launchers/<node>.json``: a torchrun node's launcher and how it ended."""
    return f"{LAUNCHERS}/{node}{JSON}"


def clock_key(node: str) -> str:
    """``clock/<node>.json``: a torchrun node's measured clock offset."""
    return f"{CLOCK}/{node}{JSON}"


def rule_key(rule: str) -> str:
    """``rules/<rule>.json``: the latest verdict of one rule."""
    return f"{RULES}/{rule}{JSON}"


def fault_key(component: str, where: str, pid: int) -> str:
    """``faults/<component>-<node>-<pid>.json``: what one fault boundary caught.

    ``where`` is the node, or for a store stream's record the stream (``/`` as ``.``).
    """
    return f"{FAULTS}/{component}-{where}-{pid}{JSON}"


def stem(key: str, suffix: str = JSON) -> str:
    """The file name of ``key`` without its folder and ``suffix``: ``heartbeat/a.json`` -> a."""
    name = key.rsplit("/", 1)[-1]
    return name[: -len(suffix)] if suffix and name.endswith(suffix) else name
