"""The check of ``job.json`` as read: one clear error for a damaged or foreign file.

Every reader opens a job through ``job.json`` (docs/format.md); a file cut short,
not JSON, not an object, with a value of the wrong type or an unsupported
``format_version`` stops the reader with one line that names the file and the
key, instead of a traceback wherever the value is first used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from stepscope.errors import FormatVersionError, JobFolderError
from stepscope.jobfolder._constants import FORMAT_VERSION, TIME_RANGE
from stepscope.jobfolder._json import JobJson, JsonObject, as_job_json


def _is_time(v: object) -> bool:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    return ok and TIME_RANGE[0] <= float(v) <= TIME_RANGE[1]  # type: ignore[arg-type]


def _str_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _seconds(v: object) -> bool:
    return _finite(v) and float(v) >= 0  # type: ignore[arg-type]


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or check(v)


#: Each key of job.json a reader uses: (the check, what it must be).
_KEYS: dict[str, tuple[Callable[[object], bool], str]] = {
    "name": (lambda v: isinstance(v, str), "a string"),
    "status": (lambda v: isinstance(v, str), "a string (Running, Completed, Failed, Stopped)"),
    "command": (_str_list, "a list of strings"),
    "cwd": (lambda v: isinstance(v, str), "a string"),
    "config": (lambda v: isinstance(v, dict), "an object"),
    "hosts": (_str_list, "a list of strings"),
    "start_time": (_is_time, "unix seconds between 1970 and 2100"),
    "end_time": (_optional(_is_time), "null or unix seconds between 1970 and 2100"),
    "exit_code": (_optional(_whole), "null or a whole number"),
    "reason": (_optional(lambda v: isinstance(v, str)), "null or a string"),
    "stepscope_version": (lambda v: isinstance(v, str), "a string"),
    "monotonic_offset_s": (_optional(_finite), "null or a number of seconds"),
    "duration_s": (_optional(_seconds), "null or a number of seconds, at least 0"),
    "incomplete": (lambda v: isinstance(v, bool), "true or false"),
    "incomplete_reason": (_optional(lambda v: isinstance(v, str)), "null or a string"),
}
_FIX = "restore it from a copy, or remove the job folder"


def check_version(meta: Mapping[str, object], where: str) -> None:
    """Refuse a job written in a format this stepscope does not read (newer, or not a
    version number at all)."""
    version = meta.get("format_version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise FormatVersionError(
            f"Job {where} has format version {version!r} ({type(version).__name__}), not a "
            f"whole number: job.json is damaged or not written by stepscope; {_FIX}."
        )
    if not 1 <= version <= FORMAT_VERSION:
        raise FormatVersionError(
            f"Job {where} has format version {version}; this stepscope reads 1 to "
            f"{FORMAT_VERSION}. Upgrade: pip install -U stepscope"
        )


def check_job_json(body: object, where: str) -> JobJson:
    """``body`` as the JobJson of the job at ``where``, or JobFolderError naming the key."""
    meta = as_job_json(body, f"job.json of {where!r}")
    check_version(meta, where)
    if "status" not in meta:
        raise JobFolderError(f"job.json of {where!r} has no status: damaged; {_FIX}.")
    for key, (ok, expected) in _KEYS.items():
        if key in meta and not ok(meta[key]):  # type: ignore[literal-required]
            value = repr(meta[key])[:60]  # type: ignore[literal-required]
            raise JobFolderError(
                f"job.json of {where!r} is damaged: {key} is {value}, expected {expected}; {_FIX}."
            )
    return meta


# -- records the readers skip when damaged (rule verdicts, window records) -----------------

_num = (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number")
_int = (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number")
_text = (lambda v: isinstance(v, str), "a string")
_bool = (lambda v: isinstance(v, bool), "true or false")
_obj = (lambda v: isinstance(v, dict), "an object")
Spec = dict[str, tuple[Callable[[object], bool], str]]

FINDING_SPEC: Spec = {
    "message": _text,
    "recommendation": _text,
    "severity": _num,
    "node": _text,
    "device": _text,
    "rank": _int,
    "start": _num,
    "end": _num,
    "steps": (lambda v: isinstance(v, list) and all(_int[0](x) for x in v), "a list of steps"),
    "value": _num,
    "threshold": _num,
}
VERDICT_SPEC: Spec = {
    "rule": _text,
    "status": _text,
    "verdict": _text,
    "triggers": _int,
    "datapoints": _int,
    "message": _text,
    "recommendation": _text,
    "description": _text,
    "reason": _text,
    "parameters": _obj,
    "details": _obj,
    "updated": _num,
    "cost_seconds": _num,
    "saving_seconds": _num,
    "findings": (lambda v: isinstance(v, list), "a list"),
}
FAULT_SPEC: Spec = {
    "component": _text,
    "node": _text,
    "rank": _int,
    "local_rank": _int,
    "pid": _int,
    "time": _num,
    "first_time": _num,
    "error": _text,
    "count": _int,
    "traceback": _text,
    "stream": _text,
    "last_error": _text,
    "recovered_time": _num,
    "dropped_rows": _int,
    "dropped_first_time": _num,
    "dropped_last_time": _num,
}
WINDOW_SPEC: Spec = {
    "kind": _text,
    "rank": _int,
    "start_step": _int,
    "end_step": _int,
    "start_time": _num,
    "end_time": _num,
    "path": _text,
    "files": (_str_list, "a list of strings"),
    "window": _obj,
    "request": _text,
    # a detailed window says how its trace was cut (an object, docs/profiling.md)
    "truncated": (lambda v: isinstance(v, bool | dict), "true, false or an object"),
}


def record_problem(body: object, spec: Spec, required: tuple[str, ...] = ()) -> str | None:
    """Why ``body`` is not a record of ``spec`` (None: it is). Null is accepted for
    every key but those ``required``; numbers must be finite."""
    if not isinstance(body, dict):
        return f"a JSON {type(body).__name__}, not an object"
    for key in required:
        if body.get(key) is None:
            return f"no {key}"
    for key, (ok, expected) in spec.items():
        value = body.get(key)
        if value is None:
            continue
        if not ok(value) or (isinstance(value, float) and not math.isfinite(value)):
            return f"{key} is {repr(value)[:40]}, expected {expected}"
    return None


def verdict_problem(body: object) -> str | None:
    """Why ``body`` is not a rule verdict a reader can show (None: it is)."""
    problem = record_problem(body, VERDICT_SPEC, ("status",))
    if problem is None and isinstance(body, dict):
        for i, finding in enumerate(body.get("findings") or []):
            bad = record_problem(finding, FINDING_SPEC)
            if bad is not None:
                return f"finding {i}: {bad}"
    return problem


_GPU = {"index": _int, "name": _text, "mem_total": _num}


def _gpus(v: object) -> bool:
    return isinstance(v, list) and all(record_problem(g, _GPU) is None for g in v)


NODE_SPEC: Spec = {
    "node": _text,
    "hostname": _text,
    "cpu_count": _int,
    "mem_total": _num,
    "gpus": (_gpus, "a list of GPUs ({index, name, mem_total})"),
    "interval_ms": _int,
    "clock_offset_s": _num,
    "boot_time": _num,
    "sched_autogroup": _bool,
}


def without_bad_keys(body: JsonObject, spec: Spec) -> tuple[JsonObject, str | None]:
    """``body`` without the keys whose values ``spec`` refuses, and why (None: all good)."""
    clean, why = dict(body), None
    for key in spec:
        problem = record_problem({key: body.get(key)}, {key: spec[key]})
        if problem is not None:
            del clean[key]
            why = why or problem
    return clean, why
