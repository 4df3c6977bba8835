"""The controls: JSON bodies of the dashboard's POSTs to control-channel requests.

The same requests as ``stepscope profile`` / ``stepscope config`` / a stop
(:mod:`stepscope.jobfolder.control`); the agent, the samplers and the launcher answer in
``control/ack/``. Bodies are checked completely here, with messages that say
what was wrong and what is valid; the agent checks profile windows again.
"""

from __future__ import annotations

import re
from typing import TypedDict

from stepscope.config import LIVE_WINDOW_LIMITS, SYSTEM_MONITOR_INTERVALS, ConfigError
from stepscope.errors import JobFolderError, UsageError
from stepscope.jobfolder import JsonObject, control
from stepscope.store import Store

BY = "dashboard"
REQUEST_NAME = re.compile(r"^(stop|config|profile)-\d{13}-[0-9a-f]{8}\.json$")
PROFILE_KEYS = ("detailed", "python", "timer", "dataloader", "memory", "max_entries",
                "start_step", "num_steps", "start_time", "duration")  # fmt: skip
PYTHON_PROFILERS = ("cprofile", "pyinstrument")
TIMERS = ("total_time", "cpu_time", "off_cpu_time")


class BadRequest(UsageError, ValueError):
    """A body the dashboard refuses (HTTP 400, the message says why)."""


class DamagedAck(JobFolderError):
    """The job's answer to a request cannot be read (HTTP 422, the message says why)."""


class RequestState(TypedDict):
    """A control request's state: ``pending`` until the job answered (``ack``)."""

    name: str
    pending: bool
    ack: control.Ack | None


def _object(body: object, keys: tuple[str, ...]) -> JsonObject:
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object.")
    unknown = sorted(set(body) - set(keys))
    if unknown:
        raise BadRequest(f"Unknown key(s) {', '.join(map(repr, unknown))}. Valid keys: "
                         f"{', '.join(keys)}.")  # fmt: skip
    return body


def interval(store: Store, body: object) -> str:
    """``{"interval_ms": 1000}`` -> a ``config`` request; returns its name."""
    ms = _object(body, ("interval_ms",)).get("interval_ms")
    if (
        isinstance(ms, bool)
        or not isinstance(ms, int | float)
        or ms not in SYSTEM_MONITOR_INTERVALS
    ):
        accepted = ", ".join(map(str, SYSTEM_MONITOR_INTERVALS))
        raise BadRequest(f"Invalid value {ms!r} for interval_ms. Accepted values are {accepted}.")
    return control.request_interval(store, int(ms), BY)


def stop(store: Store, body: object) -> str:
    """``{"reason": "..."}`` (optional) -> a ``stop`` request; returns its name."""
    reason = _object(body or {}, ("reason",)).get("reason") or "stop requested in the dashboard"
    if not isinstance(reason, str) or len(reason) > 500:
        raise BadRequest("reason must be a string of at most 500 characters.")
    return control.request_stop(store, reason, BY)


def _int_or_none(body: JsonObject, key: str) -> int | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"{key} must be a whole number >= 0 or blank, not {value!r}.")
    return value


def _number(key: str, value: object) -> float | None:
    """``value`` if a number (None stays None), else BadRequest naming ``key``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{key} must be a number (unix seconds / seconds), not {value!r}.")
    return value


def _span(body: JsonObject) -> JsonObject:
    """A step window (blank: the current step, one step) or a time window."""
    start_time, duration = body.get("start_time"), body.get("duration")
    timed = start_time not in (None, "") or duration not in (None, "")
    steps: JsonObject = {"start_step": _int_or_none(body, "start_step"),
             "num_steps": _int_or_none(body, "num_steps")}  # fmt: skip
    if not timed:
        return steps
    if any(v is not None for v in steps.values()):
        raise BadRequest("Give either start_step/num_steps or start_time/duration, not both.")
    # "now" is left blank: the job starts the window when it reads the request
    start = None if start_time in (None, "", "now") else _number("start_time", start_time)
    length = _number("duration", None if duration in ("",) else duration)
    return {"start_unix_time": None if start is None else float(start), "duration": length}


def profile_windows(given: object) -> list[JsonObject]:
    """The windows a profile body asks for, as ``control.request_profile`` wants them."""
    body = _object(given, PROFILE_KEYS)
    span = _span(body)
    windows: list[JsonObject] = []
    if body.get("detailed"):
        windows.append({"kind": "detailed", **span})
    python = body.get("python")
    if python not in (None, "", False):
        if python not in PYTHON_PROFILERS:
            raise BadRequest(f"python must be one of {', '.join(PYTHON_PROFILERS)} or null.")
        timer = body.get("timer") or "total_time"
        if timer not in TIMERS:
            raise BadRequest(f"timer must be one of {', '.join(TIMERS)}.")
        windows.append({"kind": "python", **span, "python_profiler": python,
                        "cprofile_timer": timer if python == "cprofile" else None})  # fmt: skip
    if body.get("dataloader"):
        windows.append({"kind": "dataloader", **span})
    entries = _max_entries(body)
    if body.get("memory"):
        windows.append({"kind": "memory", **span, **entries})
    elif entries:
        raise BadRequest("max_entries goes with memory: set memory to true, or leave it out.")
    if not windows:
        raise BadRequest("Nothing to profile: set detailed, python, dataloader or memory.")
    _check_steps(windows)
    try:
        control.check_windows(windows)
    except ConfigError as exc:
        raise BadRequest(str(exc)) from None
    return windows


def _max_entries(body: JsonObject) -> JsonObject:
    """A memory window's ``max_entries`` when given (the parser checks it; blank: default)."""
    value = body.get("max_entries")
    return {} if value in (None, "") else {"max_entries": value}


def _check_steps(windows: list[JsonObject]) -> None:
    """``num_steps`` 0 gets the valid range of each kind asked, not only ">= 1"."""
    if windows[0].get("num_steps") != 0:
        return
    names = [w["kind"] if w["kind"] != "python" else f"python ({w['python_profiler']})"
             for w in windows]  # fmt: skip
    ranges = "; ".join(f"{n}: 1 to {LIVE_WINDOW_LIMITS[str(n)].steps:,}" for n in names)
    raise BadRequest(
        f"Invalid value 0 for num_steps: profile at least one step ({ranges}), "
        "or leave it blank for one step."
    )


def profile(store: Store, body: object) -> str:
    """A ``profile`` request for the windows of ``body``; returns its name."""
    return control.request_profile(store, profile_windows(body), BY)


def status(store: Store, name: str) -> RequestState:
    """A request's state: ``pending`` until the job acknowledged it, then its answer."""
    if not REQUEST_NAME.match(name):
        raise LookupError(f"no control request named {name!r}")
    if not store.exists(f"{control.CONTROL}/{name}"):
        raise LookupError(f"no control request named {name!r}")
    return {"name": name, "pending": (ack := _ack(store, name)) is None, "ack": ack}


def _ack(store: Store, name: str) -> control.Ack | None:
    """The job's answer to ``name``; DamagedAck says what is wrong with a bad one
    (nothing is written into the job: the dashboard only reads it)."""
    try:
        ack = control.acknowledgement(store, name)
    except ValueError as exc:  # not JSON, not an object, a link, a FIFO, too big...
        problem = str(exc)
    else:
        shape = None if ack is None else _shape_problem(ack)
        if shape is None:
            return ack
        problem = f"the acknowledgement '{control.ACK}/{name}' {shape}"
    raise DamagedAck(
        f"{problem}: damaged, so whether the job applied request {name!r} is unknown; "
        "look at the job's log, or send the request again."
    )


def _shape_problem(ack: control.Ack) -> str | None:
    """Why ``ack`` is not an acknowledgement (``accepted`` true or false, a ``detail``)."""
    accepted, detail = ack.get("accepted"), ack.get("detail")
    if not isinstance(accepted, bool):
        return f"has accepted={accepted!r}, expected true or false"
    if detail is not None and not isinstance(detail, str):
        return f"has detail={str(detail)[:40]!r}, expected a string"
    return None
