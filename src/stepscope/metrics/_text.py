"""The Prometheus text exposition format (version 0.0.4) of :class:`JobMetrics`.

Written here rather than through ``prometheus_client`` (no extra to install, and
its registry is process-global state); the tests read it back with that package's
parser. Every family's samples are written together, across jobs (``stepscope ui``
shows several). Labels are bounded: ``job``, ``node``, ``rank``, ``phase``,
``part``, ``gpu``, ``rule``; never a step number or a message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from stepscope.metrics._state import (
    BUCKETS,
    GPU_GAUGES,
    PARTS,
    STATUS_VALUES,
    SYSTEM_GAUGES,
    JobMetrics,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Labels = dict[str, str]
Sample = tuple[str, Labels, float]
_GPU = re.compile(r"^gpu(\d+)_(util|mem_used|mem_total)$")


def render(jobs: Sequence[JobMetrics]) -> str:
    """The exposition of every job's metrics, one block per family."""
    out: list[str] = []
    for job in jobs:
        job.lock.acquire()
    try:
        _steps(out, jobs)
        _system(out, jobs)
        _rules(out, jobs)
    finally:
        for job in jobs:
            job.lock.release()
    return "".join(out)


def _family(out: list[str], name: str, kind: str, doc: str, samples: Iterable[Sample]) -> None:
    lines = [f"{n}{_labels(labels)} {_value(v)}\n" for n, labels, v in samples]
    if lines:
        out += [f"# HELP {name} {doc}\n", f"# TYPE {name} {kind}\n", *lines]


def _steps(out: list[str], jobs: Sequence[JobMetrics]) -> None:
    series = [({"job": j.job, "node": k[0], "rank": str(k[1]), "phase": k[2]}, s)
              for j in jobs for k, s in sorted(j.steps.items())]  # fmt: skip
    hist: list[Sample] = []
    for labels, s in series:
        hist += [("stepscope_step_seconds_bucket", {**labels, "le": repr(b)}, n)
                 for b, n in zip(BUCKETS, s.buckets, strict=True)]  # fmt: skip
        hist.append(("stepscope_step_seconds_bucket", {**labels, "le": "+Inf"}, s.count))
        hist.append(("stepscope_step_seconds_sum", labels, s.total_s))
        hist.append(("stepscope_step_seconds_count", labels, s.count))
    _family(out, "stepscope_step_seconds", "histogram", "Step time, seconds", hist)
    name = "stepscope_step_part_seconds_total"
    parts = [(name, {**labels, "part": p}, s.parts_s[p]) for labels, s in series for p in PARTS]
    doc = "Seconds of the steps spent in each part (data_wait, forward, backward, ...)"
    _family(out, name, "counter", doc, parts)
    rates = [("stepscope_steps_per_second", labels, r) for labels, s in series
             if (r := s.steps_per_second()) is not None]  # fmt: skip
    doc = "Throughput: 1 / the median interval between the last 33 step ends"
    _family(out, "stepscope_steps_per_second", "gauge", doc, rates)


def _system(out: list[str], jobs: Sequence[JobMetrics]) -> None:
    for name, (column, doc) in SYSTEM_GAUGES.items():
        samples = [(name, {"job": j.job, "node": node}, values[column])
                   for j in jobs for node, values in sorted(j.system.items())
                   if column in values]  # fmt: skip
        _family(out, name, "gauge", doc, samples)
    for name, (field, doc) in GPU_GAUGES.items():
        samples = [(name, labels, value) for j in jobs for labels, value in _gpus(j, field)]
        _family(out, name, "gauge", doc, samples)


def _gpus(job: JobMetrics, field: str) -> list[tuple[Labels, float]]:
    """``(labels, value)`` of each GPU's ``gpu<i>_<field>`` column, per node."""
    found = []
    for node, values in sorted(job.system.items()):
        for column, value in sorted(values.items()):
            m = _GPU.match(column)
            if m is not None and m.group(2) == field:
                found.append(({"job": job.job, "node": node, "gpu": m.group(1)}, value))
    return found


def _rules(out: list[str], jobs: Sequence[JobMetrics]) -> None:
    rules = [({"job": j.job, "rule": name}, r) for j in jobs for name, r in sorted(j.rules.items())]
    doc = "Rule verdict: 1 IssuesFound, 0 NoIssuesFound, -1 NotApplicable, -2 Error"
    status = [("stepscope_rule_status", labels, STATUS_VALUES.get(r.status, -1))
              for labels, r in rules]  # fmt: skip
    _family(out, "stepscope_rule_status", "gauge", doc, status)
    name = "stepscope_rule_findings_total"
    found = [(name, labels, len(r.findings)) for labels, r in rules]
    _family(out, name, "counter", "Distinct findings of the rule so far", found)


def _labels(labels: Labels) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(number: float) -> str:
    if number != number:
        return "NaN"
    if number in (float("inf"), float("-inf")):
        return "+Inf" if number > 0 else "-Inf"
    return repr(float(number)) if not float(number).is_integer() else str(int(number))
