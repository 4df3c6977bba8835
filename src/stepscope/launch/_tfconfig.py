"""``stepscope run`` of one TensorFlow worker: its rank in the job from ``TF_CONFIG``.

A ``tf.distribute.MultiWorkerMirroredStrategy`` job is several worker processes,
each started with its own ``TF_CONFIG`` (the cluster, and this process's task).
Each runs under its own ``stepscope run -o DIR --job J``, as each node of a
multi-node torchrun job does: one launcher per worker, one rank per launcher, one
job folder. The launcher reads ``TF_CONFIG`` (which the worker inherits unchanged)
to learn the job's size, this worker's rank and the chief's host, and gives the
rank to the agent. See docs/tensorflow.md, "Several workers".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from stepscope.errors import UsageError
from stepscope.launch._torchrun import TEST_SKEW_ENV, Plan

ENV = "TF_CONFIG"
# The tasks that train under MultiWorkerMirroredStrategy, in TensorFlow's order: the
# chief (if the cluster names one) is the first, then the workers by index.
MEMBERS = ("chief", "worker")


class TFConfigError(UsageError, ValueError):
    """``TF_CONFIG`` cannot be read as a cluster and a task; the message says how to fix it."""


def _bad(why: str) -> TFConfigError:
    return TFConfigError(
        f"TF_CONFIG {why}. It must be JSON like "
        '{"cluster": {"worker": ["127.0.0.1:12345", "127.0.0.1:12346"]}, '
        '"task": {"type": "worker", "index": 0}} (docs/tensorflow.md).'
    )


def _parse(raw: str) -> tuple[dict[str, list[str]], str, int]:
    try:
        spec: Any = json.loads(raw)
    except ValueError as exc:
        raise _bad(f"is not JSON ({exc})") from None
    cluster, task = (spec.get("cluster"), spec.get("task")) if isinstance(spec, dict) else (0, 0)
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise _bad("needs a 'cluster' object and a 'task' object")
    kind, index = task.get("type"), task.get("index", 0)
    if not isinstance(kind, str) or not isinstance(index, int) or isinstance(index, bool):
        raise _bad(f"has a task {task!r} without a string 'type' and an integer 'index'")
    tasks = {k: v for k, v in cluster.items() if isinstance(v, list)}
    if kind in MEMBERS and not 0 <= index < len(tasks.get(kind, [])):
        raise _bad(f"names task {kind} {index}, but its cluster has {len(tasks.get(kind, []))}")
    return tasks, kind, index


def members(cluster: Mapping[str, list[str]]) -> list[tuple[str, int]]:
    """The training tasks of ``cluster`` in rank order: the chief, then the workers."""
    return [(kind, i) for kind in MEMBERS for i in range(len(cluster.get(kind, [])))]


def tf_plan(env: Mapping[str, str], node: str) -> Plan | None:
    """This worker's part in the job of ``TF_CONFIG`` (None: no ``TF_CONFIG``, or a task
    that does not train under MultiWorkerMirroredStrategy, e.g. an evaluator)."""
    raw = env.get(ENV)
    if not raw:
        return None
    cluster, kind, index = _parse(raw)
    if kind not in MEMBERS:
        return None  # an evaluator or a parameter server: a job of its own
    ranks = members(cluster)
    rank = ranks.index((kind, index))
    first_kind, first_index = ranks[0]
    host = str(cluster[first_kind][first_index]).rsplit(":", 1)[0].strip("[]")
    name = node if env.get("STEPSCOPE_NODE") or len(ranks) == 1 else f"{node}-node{rank}"
    try:
        skew = float(env.get(TEST_SKEW_ENV) or 0.0)
    except ValueError as exc:
        raise TFConfigError(f"{TEST_SKEW_ENV} must be a number of seconds") from exc
    return Plan(str(len(ranks)), rank, host, name, skew, launcher="tf_config", rank=rank)
